//! The embedded store's update journal (`privfed_server::ddml::store::journal`): a group commit is one
//! record appended and synced; checkpoints move the journal's instances into redb; recovery
//! replays what follows the last checkpoint. A crash is stood in for by copying the data
//! directory while the store runs (after the acknowledgements, with no commit in flight): the
//! copy holds what a crash at that moment would leave on disk, since every acknowledged record
//! was written and synced. kill -9 of `privfed serve` under load is in the CLI tests.

use crate::common;
use privfed_ddml::engine::SpamFilter;
use privfed_server::ddml::model::ModelSpec;
use privfed_server::ddml::store::embedded::{
    DB_FILE, EmbeddedOptions, JOURNAL_MAX_INSTANCE_BYTES, OpenMode,
};
use privfed_server::ddml::store::journal::{self, JOURNAL_FILE};
use privfed_server::ddml::store::{Store, Submission, SubmitOutcome};
use privfed_server::{EmbeddedStore, StoreError};
use redb::ReadableDatabase;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn spec(name: &str, dim: usize, k: usize, generation: u64) -> ModelSpec {
    ModelSpec {
        name: name.into(),
        dim,
        k,
        init_std: 0.0,
        spam: Some(SpamFilter::new(4.0, 0.0).unwrap()),
        generation,
        guard: None,
        step_guard: None,
    }
}

/// Instances with spread (the spam filter needs it): instance `i` is all `i`.
fn start(dim: usize, k: usize) -> Vec<Vec<f32>> {
    (0..k).map(|i| vec![i as f32; dim]).collect()
}

/// Creates model `name` (generation `generation`) with [`start`]'s instances.
async fn add_model(store: &EmbeddedStore, name: &str, dim: usize, k: usize, generation: u64) {
    store
        .create_model(spec(name, dim, k, generation), start(dim, k))
        .await
        .unwrap();
}

fn update(generation: u64, v: f32, dim: usize) -> Submission {
    Submission {
        generation,
        ticket: None,
        weights: vec![v; dim],
    }
}

fn small_journal(dir: &Path, bytes: u64) -> EmbeddedStore {
    let options = EmbeddedOptions {
        journal_bytes: bytes,
        ..EmbeddedOptions::default()
    };
    EmbeddedStore::open_with(dir, OpenMode::Create, options).unwrap()
}

/// The journal's records not yet checkpointed, read from the files as recovery would (of a
/// store that is not open: redb locks its file).
fn pending_records(dir: &Path) -> Vec<journal::Record> {
    let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
    let r = db.begin_read().unwrap();
    let t = r
        .open_table(redb::TableDefinition::<&str, u64>::new("journal"))
        .unwrap();
    let checkpointed = t.get("checkpointed").unwrap().unwrap().value();
    let tag = t.get("tag").unwrap().unwrap().value();
    journal::read_after(&dir.join(JOURNAL_FILE), checkpointed, tag).unwrap()
}

/// A crash at this moment: the data directory's files as they are on disk now.
fn crash_copy(from: &Path, to: &Path) {
    for f in [DB_FILE, JOURNAL_FILE] {
        std::fs::copy(from.join(f), to.join(f)).unwrap();
    }
}

/// [`pending_records`] of a running store, on a crash copy.
fn pending_now(dir: &Path) -> usize {
    let copy = common::TempDir::new("journal-pending");
    crash_copy(dir, &copy.0);
    pending_records(&copy.0).len()
}

async fn assert_same(a: &EmbeddedStore, b: &EmbeddedStore, name: &str) {
    let (x, y) = (
        a.snapshot(name).await.unwrap(),
        b.snapshot(name).await.unwrap(),
    );
    assert_eq!(x.spec.dim, y.spec.dim, "{name}: dim");
    assert_eq!(x.accepted, y.accepted, "{name}: accepted");
    assert_eq!(x.rejected, y.rejected, "{name}: rejected");
    assert_eq!(x.instances, y.instances, "{name}: instances");
}

/// With a journal of 16 KiB (≈ 9 single-update records of 387 weights), 200 sequential updates
/// (each its own commit) fill it again and again: the store checkpoints, starts the journal
/// over, and a crash copy taken afterwards, with records pending in the journal, opens with
/// every acknowledged update's value and both counters (rejections included), exactly as the
/// running store has them. A model whose single update does not fit the journal at all is
/// written to the tables directly, and survives too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_copy_recovers_every_acknowledged_update() {
    let dir = common::TempDir::new("journal-crash");
    let store = small_journal(&dir.0, 16 << 10);
    add_model(&store, "m", 387, 5, 1).await;
    add_model(&store, "big", 5000, 3, 1).await;
    // One update of `big` is a record larger than the journal: written to the tables directly.
    for v in [1.5f32, 0.5] {
        assert_eq!(
            store.submit("big", update(1, v, 5000)).await.unwrap(),
            SubmitOutcome::Accepted
        );
    }
    let (mut accepted, mut rejected) = (0, 0);
    for i in 0..200u32 {
        // Every tenth is an outlier the spam filter rejects (counted, not stored).
        let v = if i % 10 == 9 {
            1e6
        } else {
            2.0 + i as f32 / 1000.0
        };
        match store.submit("m", update(1, v, 387)).await.unwrap() {
            SubmitOutcome::Accepted => accepted += 1,
            SubmitOutcome::Rejected(_) => rejected += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((accepted, rejected), (180, 20));
    let stats = store.commit_stats().unwrap();
    assert!(stats.checkpoints >= 10, "{stats:?}");
    let copy = common::TempDir::new("journal-crash-copy");
    crash_copy(&dir.0, &copy.0);
    let pending = pending_records(&copy.0);
    assert!(
        !pending.is_empty(),
        "nothing left to replay: the test would not test recovery"
    );

    let recovered = EmbeddedStore::open(&copy.0).unwrap();
    assert_same(&store, &recovered, "m").await;
    assert_same(&store, &recovered, "big").await;
    let m = recovered.snapshot("m").await.unwrap();
    assert_eq!((m.accepted, m.rejected), (180, 20));
    // The replay was checkpointed at once, and the recovered store goes on writing.
    assert_eq!(pending_now(&copy.0), 0);
    let v = m.instances[0][0];
    assert_eq!(
        recovered.submit("m", update(1, v, 387)).await.unwrap(),
        SubmitOutcome::Accepted
    );
    assert_eq!(recovered.snapshot("m").await.unwrap().accepted, 181);
    assert_eq!(pending_now(&copy.0), 1);
}

/// The updates of a model whose instances are larger than `JOURNAL_MAX_INSTANCE_BYTES` go
/// straight into redb (the journal would write them twice), while a small model's beside it are
/// journaled: the journal names only the small model, though the large one's records would fit
/// in it, and a crash copy has both models' updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_models_updates_bypass_the_journal() {
    let dir = common::TempDir::new("journal-large");
    let store = small_journal(&dir.0, 1 << 20);
    let large = JOURNAL_MAX_INSTANCE_BYTES / 4 + 1000;
    add_model(&store, "large", large, 2, 1).await;
    add_model(&store, "small", 10, 3, 1).await;
    for i in 0..6 {
        let v = 0.5 + i as f32 / 1000.0;
        let (a, b) = tokio::join!(
            store.submit("large", update(1, v, large)),
            store.submit("small", update(1, 1.0 + v, 10))
        );
        assert_eq!(a.unwrap(), SubmitOutcome::Accepted);
        assert_eq!(b.unwrap(), SubmitOutcome::Accepted);
    }
    let copy = common::TempDir::new("journal-large-copy");
    crash_copy(&dir.0, &copy.0);
    let pending = pending_records(&copy.0);
    let names: std::collections::BTreeSet<&str> = pending
        .iter()
        .flat_map(|r| &r.entries)
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["small"].into(), "models named by the journal");
    let recovered = EmbeddedStore::open(&copy.0).unwrap();
    for name in ["large", "small"] {
        assert_same(&store, &recovered, name).await;
        assert_eq!(recovered.snapshot(name).await.unwrap().accepted, 6);
    }
}

/// A model deleted and re-created (another `dim`) while updates to the old one are in the
/// journal: recovery applies none of them to the new one (a delete checkpoints first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_model_gets_none_of_the_old_ones_journaled_updates() {
    let dir = common::TempDir::new("journal-recreate");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    add_model(&store, "m", 4, 3, 1).await;
    for v in [1.1f32, 1.2, 1.3] {
        store.submit("m", update(1, v, 4)).await.unwrap();
    }
    store.delete_model("m").await.unwrap();
    add_model(&store, "m", 3, 3, 2).await;
    assert_eq!(
        store.submit("m", update(2, 1.7, 3)).await.unwrap(),
        SubmitOutcome::Accepted
    );
    let copy = common::TempDir::new("journal-recreate-copy");
    crash_copy(&dir.0, &copy.0);
    assert_eq!(pending_records(&copy.0).len(), 1);
    let recovered = EmbeddedStore::open(&copy.0).unwrap();
    assert_same(&store, &recovered, "m").await;
    let m = recovered.snapshot("m").await.unwrap();
    assert_eq!((m.spec.dim, m.spec.generation, m.accepted), (3, 2, 1));
    assert_eq!(
        m.instances.iter().filter(|w| w[0] == 1.7).count(),
        1,
        "{:?}",
        m.instances
    );
}

/// A clean shutdown checkpoints, and dropping the store's last handle returns only after it:
/// the journal is empty and the database closed at once (a process that exits right after the
/// drop leaves nothing to replay), and the store reopens with every update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_shutdown_leaves_an_empty_journal() {
    let dir = common::TempDir::new("journal-clean");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    add_model(&store, "m", 8, 2, 1).await;
    for v in 0..5 {
        store.submit("m", update(1, v as f32, 8)).await.unwrap();
    }
    assert_eq!(pending_now(&dir.0), 5);
    drop(store);
    // Opens the database itself: it must be closed already.
    assert!(pending_records(&dir.0).is_empty());
    let store = EmbeddedStore::open(&dir.0).expect("the store is closed once its drop returns");
    let m = store.snapshot("m").await.unwrap();
    // The spam filter may reject some of them (counted all the same).
    assert_eq!(m.accepted + m.rejected, 5);
    drop(store);
    assert!(pending_records(&dir.0).is_empty());
}

/// The journal deleted or replaced under the running store: the next write answers
/// unavailable (503) and the store reports unhealthy, never a false acknowledgment; a store
/// whose journal is gone does not open (its last acknowledged updates may be there only), and
/// says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_or_replaced_journal_fails_closed() {
    for replace in [false, true] {
        let dir = common::TempDir::new("journal-gone");
        let store = EmbeddedStore::create(&dir.0).unwrap();
        add_model(&store, "m", 3, 2, 1).await;
        assert_eq!(
            store.submit("m", update(1, 0.5, 3)).await.unwrap(),
            SubmitOutcome::Accepted
        );
        let path = dir.0.join(JOURNAL_FILE);
        if replace {
            let other = dir.0.join("other");
            std::fs::copy(&path, &other).unwrap();
            std::fs::rename(&other, &path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        match store.submit("m", update(1, 0.6, 3)).await {
            Err(StoreError::Unavailable(why)) => assert!(why.contains(JOURNAL_FILE), "{why}"),
            other => panic!("replace={replace}: {other:?}"),
        }
        assert!(!store.healthy().await);
        drop(store);
        tokio::time::sleep(Duration::from_millis(200)).await;
        if !replace {
            let e = EmbeddedStore::open(&dir.0).err().expect("refused");
            assert!(e.to_string().contains("journal"), "{e}");
        }
    }
}

/// A store made before the journal existed (no journal table, no file) opens, gets a journal,
/// and keeps its models.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_the_journal_gets_one() {
    let dir = common::TempDir::new("journal-old");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    add_model(&store, "m", 3, 2, 1).await;
    store.submit("m", update(1, 0.5, 3)).await.unwrap();
    drop(store);
    tokio::time::sleep(Duration::from_millis(200)).await;
    {
        let db = redb::Database::open(dir.0.join(DB_FILE)).unwrap();
        let w = db.begin_write().unwrap();
        assert!(
            w.delete_table(redb::TableDefinition::<&str, u64>::new("journal"))
                .unwrap()
        );
        w.commit().unwrap();
    }
    std::fs::remove_file(dir.0.join(JOURNAL_FILE)).unwrap();
    let store = Arc::new(EmbeddedStore::open(&dir.0).unwrap());
    assert!(dir.0.join(JOURNAL_FILE).exists());
    let m = store.snapshot("m").await.unwrap();
    assert_eq!(m.accepted, 1);
    assert_eq!(m.instances.iter().filter(|w| w[0] == 0.5).count(), 1);
    store.submit("m", update(1, 0.7, 3)).await.unwrap();
    assert_eq!(pending_now(&dir.0), 1);
}
