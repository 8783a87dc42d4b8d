//! When the embedded store's group commit starts ([`CommitPacing`]): with `WhenIdle` a commit
//! waits for a worker to park (the runtime's `on_thread_park` hook, called by hand here so the
//! test decides when) or for the maximum delay, and then carries every pending update; updates
//! are still acknowledged only after their commit. Over a real socket, `privfed serve`'s hook
//! is exercised by the CLI tests and `/metrics` reports the commits.

use crate::common;
use privfed_server::ddml::model::ModelSpec;
use privfed_server::ddml::store::embedded::{CommitPacing, EmbeddedOptions, IdleSignal, OpenMode};
use privfed_server::ddml::store::{CommitStats, Store, Submission, SubmitOutcome};
use privfed_server::{EmbeddedStore, StoreError};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn spec() -> ModelSpec {
    ModelSpec {
        name: "g".into(),
        dim: 3,
        k: 4,
        init_std: 0.0,
        spam: None,
        generation: 1,
        guard: None,
        step_guard: None,
    }
}

fn idle_store(dir: &common::TempDir, signal: &IdleSignal, max_delay: Duration) -> EmbeddedStore {
    let options = EmbeddedOptions {
        pacing: CommitPacing::WhenIdle {
            signal: signal.clone(),
            max_delay,
        },
        ..EmbeddedOptions::default()
    };
    EmbeddedStore::open_with(&dir.0, OpenMode::Create, options).unwrap()
}

/// Creates the model: its commit waits (no park, a long maximum delay) until `notify`.
async fn create_on_park(store: &Arc<EmbeddedStore>, signal: &IdleSignal) {
    let create = {
        let store = store.clone();
        tokio::spawn(async move { store.create_model(spec(), vec![vec![0.0; 3]; 4]).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !create.is_finished(),
        "the creation committed before any park"
    );
    signal.notify();
    create.await.unwrap().unwrap();
}

/// Posts updates of 1.0, 2.0, …, `n` to model `g`, each from a task of its own.
fn post_updates(
    store: &Arc<EmbeddedStore>,
    n: u32,
) -> Vec<tokio::task::JoinHandle<Result<SubmitOutcome, StoreError>>> {
    (1..=n)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.submit("g", update(i as f32)).await })
        })
        .collect()
}

fn assert_commits(store: &EmbeddedStore, commits: u64, operations: u64) {
    let CommitStats {
        commits: c,
        operations: o,
        ..
    } = store
        .commit_stats()
        .expect("the embedded store counts commits");
    assert_eq!((c, o), (commits, operations));
}

fn update(v: f32) -> Submission {
    Submission {
        generation: 1,
        ticket: None,
        weights: vec![v; 3],
    }
}

/// Eight updates queued while no worker parks are held (for a long maximum delay), then go out
/// in one commit when a worker parks, and all eight are acknowledged and stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_pacing_holds_the_commit_until_a_worker_parks() {
    let dir = common::TempDir::new("pacing-park");
    let signal = IdleSignal::new();
    let store = Arc::new(idle_store(&dir, &signal, Duration::from_secs(600)));
    create_on_park(&store, &signal).await;

    let posts = post_updates(&store, 8);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        posts.iter().all(|p| !p.is_finished()),
        "acknowledged before its commit"
    );
    assert_commits(&store, 0, 0);
    signal.notify();
    for p in posts {
        assert_eq!(p.await.unwrap().unwrap(), SubmitOutcome::Accepted);
    }
    assert_commits(&store, 1, 8);
    assert_eq!(store.snapshot("g").await.unwrap().accepted, 8);
}

/// Without any park, an update is committed once the maximum delay has passed (and not before).
#[tokio::test]
async fn idle_pacing_commits_after_the_maximum_delay() {
    let dir = common::TempDir::new("pacing-delay");
    let signal = IdleSignal::new();
    let max_delay = Duration::from_millis(50);
    let store = idle_store(&dir, &signal, max_delay);
    let t = Instant::now();
    store
        .create_model(spec(), vec![vec![0.0; 3]; 4])
        .await
        .unwrap();
    assert!(t.elapsed() >= max_delay, "{:?}", t.elapsed());
    let t = Instant::now();
    assert_eq!(
        store.submit("g", update(1.0)).await.unwrap(),
        SubmitOutcome::Accepted
    );
    assert!(t.elapsed() >= max_delay, "{:?}", t.elapsed());
    assert_eq!(store.snapshot("g").await.unwrap().accepted, 1);
    assert_eq!(store.commit_stats().unwrap().commits, 1);
}

/// A park that happened before an update was queued does not start its commit early: the
/// commit waits for a park after it.
#[tokio::test]
async fn an_earlier_park_does_not_release_a_later_update() {
    let dir = common::TempDir::new("pacing-stale");
    let signal = IdleSignal::new();
    let store = Arc::new(idle_store(&dir, &signal, Duration::from_secs(600)));
    create_on_park(&store, &signal).await;
    // Parks while nothing is pending.
    signal.notify();
    signal.notify();
    let post = {
        let store = store.clone();
        tokio::spawn(async move { store.submit("g", update(2.0)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !post.is_finished(),
        "committed on a park from before it was queued"
    );
    signal.notify();
    assert_eq!(post.await.unwrap().unwrap(), SubmitOutcome::Accepted);
}

/// One signal paces one store: a second store given the same signal is refused.
#[tokio::test]
async fn an_idle_signal_paces_one_store() {
    let (a, b) = (
        common::TempDir::new("pacing-one-a"),
        common::TempDir::new("pacing-one-b"),
    );
    let signal = IdleSignal::new();
    let _first = idle_store(&a, &signal, Duration::from_millis(1));
    let options = EmbeddedOptions {
        pacing: CommitPacing::WhenIdle {
            signal: signal.clone(),
            max_delay: Duration::from_millis(1),
        },
        ..EmbeddedOptions::default()
    };
    match EmbeddedStore::open_with(&b.0, OpenMode::Create, options) {
        Err(StoreError::Backend(why)) => assert!(why.contains("IdleSignal"), "{why}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a second store accepted the same IdleSignal"),
    }
}

/// Several updates of one batch landing on the same instance (k = 1): the batch's last one is
/// what a draw then sees and what is stored (after a restart too), every one is counted, and a
/// ticket drawn before the batch still finds the instance it drew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stores_its_last_value_of_each_instance() {
    let dir = common::TempDir::new("pacing-finals");
    let signal = IdleSignal::new();
    let store = Arc::new(idle_store(&dir, &signal, Duration::from_secs(600)));
    let one = ModelSpec { k: 1, ..spec() };
    {
        let store = store.clone();
        let create = tokio::spawn(async move { store.create_model(one, vec![vec![0.0; 3]]).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        signal.notify();
        create.await.unwrap().unwrap();
    }
    let before = store.draw("g").await.unwrap();

    // Queued in this order (20 ms apart), committed together on the park.
    let mut posts = Vec::new();
    for v in 1..=6 {
        let store = store.clone();
        posts.push(tokio::spawn(async move {
            store.submit("g", update(v as f32)).await
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal.notify();
    for p in posts {
        assert_eq!(p.await.unwrap().unwrap(), SubmitOutcome::Accepted);
    }
    assert_commits(&store, 1, 6);
    let drawn = store.draw("g").await.unwrap();
    assert_eq!(
        privfed_server::ddml::model::decode_f32(&drawn.weights).unwrap(),
        [6.0; 3]
    );
    let snap = store.snapshot("g").await.unwrap();
    assert_eq!((&*snap.instances[0], snap.accepted), (&[6.0f32; 3][..], 6));

    // The ticket of the draw from before the batch is still good.
    let post = {
        let store = store.clone();
        let sub = Submission {
            ticket: Some(before.ticket),
            ..update(7.0)
        };
        tokio::spawn(async move { store.submit("g", sub).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    signal.notify();
    assert_eq!(post.await.unwrap().unwrap(), SubmitOutcome::Accepted);

    drop(store);
    let reopened = common::reopen(&dir.0).await;
    let snap = reopened.snapshot("g").await.unwrap();
    assert_eq!((&*snap.instances[0], snap.accepted), (&[7.0f32; 3][..], 7));
}

/// A worker about to park commits a batch of updates itself: when `notify` returns, the batch
/// is durable, counted and applied, with no hand-off to the writer thread (which, with a
/// maximum delay of 600 s, would not have started it by itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parking_worker_commits_a_batch_of_updates_itself() {
    let dir = common::TempDir::new("pacing-inline");
    let signal = IdleSignal::new();
    let store = Arc::new(idle_store(&dir, &signal, Duration::from_secs(600)));
    create_on_park(&store, &signal).await;
    let posts = post_updates(&store, 4);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(posts.iter().all(|p| !p.is_finished()));
    signal.notify();
    // Synchronous: committed and applied on this thread before `notify` returned.
    assert_commits(&store, 1, 4);
    assert_eq!(store.snapshot("g").await.unwrap().accepted, 4);
    for p in posts {
        assert_eq!(p.await.unwrap().unwrap(), SubmitOutcome::Accepted);
    }
    drop(store);
    assert_eq!(
        common::reopen(&dir.0)
            .await
            .snapshot("g")
            .await
            .unwrap()
            .accepted,
        4
    );
}

/// Updates of a model beyond the journal (redb transactions) are the writer thread's: a park
/// hands them over at once instead of committing them on the parking thread, and they are
/// acknowledged without waiting for the maximum delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_park_hands_a_large_models_updates_to_the_writer() {
    let dir = common::TempDir::new("pacing-large");
    let signal = IdleSignal::new();
    let store = Arc::new(idle_store(&dir, &signal, Duration::from_secs(600)));
    let dim = privfed_server::ddml::store::embedded::JOURNAL_MAX_INSTANCE_BYTES / 4 + 1;
    let large = ModelSpec {
        dim,
        k: 1,
        ..spec()
    };
    {
        let store = store.clone();
        let create =
            tokio::spawn(async move { store.create_model(large, vec![vec![0.0; dim]]).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        signal.notify();
        create.await.unwrap().unwrap();
    }
    let post = {
        let store = store.clone();
        let sub = Submission {
            generation: 1,
            ticket: None,
            weights: vec![1.0; dim],
        };
        tokio::spawn(async move { store.submit("g", sub).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!post.is_finished(), "committed before any park");
    signal.notify();
    let outcome = tokio::time::timeout(Duration::from_secs(30), post)
        .await
        .expect("the writer thread did not commit after the park");
    assert_eq!(outcome.unwrap().unwrap(), SubmitOutcome::Accepted);
    assert_commits(&store, 1, 1);
}
