//! What one group commit costs the writer thread: a record of the update journal
//! (`privfed_server::ddml::store::journal`: one positioned write and one `fdatasync`) against a redb
//! transaction with `Durability::Immediate` holding the same instance values (what a commit was
//! before the journal). Both write `values` instances of `dim` weights (the batch's last value of
//! each) out of `k` = 20, and one model's metadata, `commits` times, in a fresh directory under
//! `DIR` (default: the system temp dir), removed afterwards.
//!
//! `cargo run --release -p privfed-server --example commit_cost -- [commits] [values] [dim] [DIR]`
//! (defaults 2000, 9, 387) prints, per commit, the wall time and the writer thread's CPU time
//! (user + system, from `/proc/thread-self/schedstat`; Linux only), for each in turn, twice.

use privfed_server::ddml::store::journal::{self, Entry, Journal};
use redb::{Database, Durability, TableDefinition};
use std::path::Path;
use std::time::Instant;

mod support;

const INSTANCES: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("instances");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("models");
const K: u32 = 20;

/// The calling thread's CPU time in seconds (its run time in ns, the first field of
/// `/proc/thread-self/schedstat`: user and system time).
fn thread_cpu() -> Result<f64, Box<dyn std::error::Error>> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")?;
    let ns: f64 = stat
        .split_whitespace()
        .next()
        .ok_or("empty /proc/thread-self/schedstat")?
        .parse()?;
    Ok(ns * 1e-9)
}

fn measure(
    label: &str,
    commits: usize,
    mut commit: impl FnMut(usize) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (t0, c0) = (Instant::now(), thread_cpu()?);
    for i in 0..commits {
        commit(i)?;
    }
    let wall = t0.elapsed().as_secs_f64() / commits as f64 * 1e6;
    let cpu = (thread_cpu()? - c0) / commits as f64 * 1e6;
    println!("{label:>8}: {wall:7.1} µs wall, {cpu:6.1} µs CPU per commit");
    Ok(())
}

fn run(
    dir: &Path,
    commits: usize,
    values: usize,
    dim: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let value = vec![7u8; 4 * dim];
    let meta = vec![b'm'; 200];
    let index = |i: usize, q: usize| ((i * 7 + q * 3) % K as usize) as u32;

    let db = Database::create(dir.join("commit_cost.redb"))?;
    let w = db.begin_write()?;
    {
        let mut t = w.open_table(INSTANCES)?;
        for j in 0..K {
            t.insert(("m", j), value.as_slice())?;
        }
        w.open_table(META)?.insert("m", meta.as_slice())?;
    }
    w.commit()?;
    let path = dir.join(journal::JOURNAL_FILE);
    journal::create(&path, journal::DEFAULT_JOURNAL_BYTES)?;
    let mut j = Journal::open(&path, 1, rand::random())?;

    for _ in 0..2 {
        measure("redb", commits, |i| {
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Immediate)?;
            {
                let mut t = w.open_table(INSTANCES)?;
                for q in 0..values {
                    t.insert(("m", index(i, q)), value.as_slice())?;
                }
                w.open_table(META)?.insert("m", meta.as_slice())?;
            }
            w.commit()?;
            Ok(())
        })?;
        measure("journal", commits, |i| {
            let entry = Entry {
                name: "m".to_string(),
                generation: 1,
                accepted: values as u64,
                rejected: 0,
                writes: (0..values)
                    .map(|q| (index(i, q), value.as_slice()))
                    .collect(),
                versions: (0..values).map(|q| q as u64).collect(),
                used: Vec::new(),
            };
            let len = journal::record_len(std::slice::from_ref(&entry));
            if !j.fits(len) {
                // What a checkpoint does to the journal (the redb side is measured above).
                j.restart();
            }
            j.append(std::slice::from_ref(&entry))?;
            Ok(())
        })?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (commits, values, dim) = (
        support::arg(1, 2000)?,
        support::arg(2, 9)?,
        support::arg(3, 387)?,
    );
    let dir = support::scratch(4, "commit-cost");
    std::fs::create_dir_all(&dir)?;
    println!(
        "{commits} commits of {values} instances of {dim} weights, in {}",
        dir.display()
    );
    let r = run(&dir, commits, values, dim);
    let _ = std::fs::remove_dir_all(&dir);
    r
}
