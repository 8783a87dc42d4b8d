//! Whether this machine's disk overlaps concurrent durable writes: 1, 2 and 4 threads each make
//! `syncs` commits shaped like the update journal's (one positioned write of `bytes` into a
//! preallocated file, then `fdatasync`), all into the same file at distinct offsets, as
//! concurrent group commits would. Prints the mean latency of one commit and the aggregate
//! commits per second for each thread count, twice. If the device served syncs in parallel,
//! two threads would double the aggregate rate at the same latency; if it serialises them, the
//! rate stays and the latency doubles, and no committer design can hide a sync's latency from
//! the updates waiting on it (docs/history/BENCHMARKS-history.md, "Session 20").
//!
//! `cargo run --release -p privfed-server --example sync_parallelism -- [syncs] [bytes] [DIR]`
//! (defaults 1500 per thread, 8192 bytes, the system temp dir; the file is removed afterwards).

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::Instant;

mod support;

/// Offsets cycle through this many slots of `bytes` per thread.
const SLOTS: u64 = 256;

#[cfg(unix)]
fn commits(file: &File, base: u64, n: usize, bytes: usize) -> std::io::Result<f64> {
    use std::os::unix::fs::FileExt;
    let buf: Vec<u8> = (0..bytes).map(|i| (i * 31 + 7) as u8).collect();
    let t = Instant::now();
    for i in 0..n {
        file.write_at(&buf, base + (i as u64 % SLOTS) * bytes as u64)?;
        file.sync_data()?;
    }
    Ok(t.elapsed().as_secs_f64() / n as f64)
}

#[cfg(not(unix))]
fn commits(_: &File, _: u64, _: usize, _: usize) -> std::io::Result<f64> {
    Err(std::io::Error::other(
        "positioned writes are measured on Unix only",
    ))
}

fn run(path: &Path, syncs: usize, bytes: usize) -> Result<(), Box<dyn std::error::Error>> {
    let threads = [1usize, 2, 4];
    let slot_bytes = SLOTS * bytes as u64;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)?;
    // Preallocated and durable before measuring, as the journal is: a commit then writes data,
    // never the file's size.
    file.set_len(slot_bytes * *threads.iter().max().unwrap_or(&1) as u64)?;
    file.sync_all()?;
    for round in 1..=2 {
        for &t in &threads {
            let start = Instant::now();
            let latencies = std::thread::scope(|s| {
                let handles: Vec<_> = (0..t)
                    .map(|k| {
                        let file = &file;
                        s.spawn(move || commits(file, k as u64 * slot_bytes, syncs, bytes))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .map_err(|_| std::io::Error::other("thread panicked"))?
                    })
                    .collect::<std::io::Result<Vec<f64>>>()
            })?;
            let elapsed = start.elapsed().as_secs_f64();
            let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
            println!(
                "round {round}, {t} thread(s): {:7.1} µs per commit, {:7.0} commits/s in all",
                mean * 1e6,
                (t * syncs) as f64 / elapsed
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (syncs, bytes) = (support::arg(1, 1500)?, support::arg(2, 8192)?);
    if syncs == 0 || bytes == 0 {
        return Err("syncs and bytes must be positive".into());
    }
    let path = support::scratch(3, "sync-parallelism");
    println!(
        "{syncs} commits of {bytes} bytes per thread, into {}",
        path.display()
    );
    let r = run(&path, syncs, bytes);
    let _ = std::fs::remove_file(&path);
    r
}
