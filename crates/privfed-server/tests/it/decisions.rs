//! The engine decides, the stores persist: the same log of decisions
//! ([`privfed_ddml::decision::Decision`]: overwrite instance `j` with `w`, or count a
//! rejection), replayed through [`Store::persist`] into the embedded store and into the Redis
//! store, gives the same model: the same instances bit for bit and the same counters, also
//! after the embedded store is reopened from its files; and the same spam statistics
//! ([`privfed_ddml::decision::SpamStats`]): within the running sums' stated precision after the
//! log (the embedded store follows every write, the Redis store computes them afresh), and bit
//! for bit after a restart of each store.

use crate::common;
use privfed_ddml::decision::SpamStats;
use privfed_ddml::engine::{SpamFilter, SpamRejection};
use privfed_server::ddml::model::ModelSpec;
use privfed_server::ddml::store::{Admission, Decision, Rejection, Store, SubmitOutcome};
use privfed_server::{EmbeddedStore, RedisStore};
use rand::{RngExt, SeedableRng};

fn spec() -> ModelSpec {
    ModelSpec {
        name: "log".into(),
        dim: 5,
        k: 7,
        init_std: 0.5,
        spam: Some(SpamFilter::new(8.0, 0.0).unwrap()),
        generation: 11,
        guard: None,
        step_guard: None,
    }
}

/// A model's initial instances, and a log of decisions with the updates they are about.
type Log = (Vec<Vec<f32>>, Vec<(Decision, Vec<f32>)>);

/// 400 decisions from a seeded generator: a write of a random instance with random weights, or
/// (one in five) a rejection.
fn decision_log() -> Log {
    let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(36);
    let s = spec();
    let initial = (0..s.k)
        .map(|_| (0..s.dim).map(|_| rng.random_range(-1.0..1.0)).collect())
        .collect();
    let log = (0..400)
        .map(|_| {
            let w: Vec<f32> = (0..s.dim).map(|_| rng.random_range(-1.0..1.0)).collect();
            let d = if rng.random_range(0..5) == 0 {
                Decision::Reject(Rejection::Spam(SpamRejection {
                    outside: 1,
                    allowed: 0,
                    dim: s.dim,
                    sigmas: 3.0,
                    worst_index: 0,
                    worst_sigmas: 4.0,
                }))
            } else {
                Decision::Write {
                    instance: rng.random_range(0..s.k),
                }
            };
            (d, w)
        })
        .collect();
    (initial, log)
}

/// Replays the log into `store` and returns the model: (instances, accepted, rejected).
async fn replay<S: Store>(store: &S) -> (Vec<Vec<u32>>, u64, u64) {
    let (initial, log) = decision_log();
    store.create_model(spec(), initial).await.unwrap();
    for (d, w) in log {
        let spec = store.spec("log").await.unwrap();
        let Admission::Admitted(a) = store.admit("log", &spec, None).await.unwrap() else {
            panic!("no ticket, no replay")
        };
        let outcome = store.persist("log", a, d.clone(), w).await.unwrap();
        match d {
            Decision::Write { .. } => assert_eq!(outcome, SubmitOutcome::Accepted),
            Decision::Reject(r) => assert_eq!(outcome, SubmitOutcome::Rejected(r)),
        }
    }
    model(store).await
}

async fn model<S: Store>(store: &S) -> (Vec<Vec<u32>>, u64, u64) {
    let snap = store.snapshot("log").await.unwrap();
    let bits = snap
        .instances
        .iter()
        .map(|w| w.iter().map(|x| x.to_bits()).collect())
        .collect();
    (bits, snap.accepted, snap.rejected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_decision_log_gives_the_same_model_in_both_stores() {
    let dir = common::TempDir::new("decisions");
    let embedded = {
        let store = EmbeddedStore::create(&dir.0).unwrap();
        let m = replay(&store).await;
        let stats = spam_stats(&store).await;
        drop(store);
        (m, stats)
    };
    let (embedded, embedded_stats) = embedded;
    let reopened_store = common::reopen(&dir.0).await;
    let reopened = model(&reopened_store).await;
    let reopened_stats = spam_stats(&reopened_store).await;
    let mut redis = common::RedisServer::start();
    let redis_store = RedisStore::connect(&redis.url()).await.unwrap();
    let redis_model = replay(&redis_store).await;
    let redis_stats = spam_stats(&redis_store).await;
    redis.restart();
    let restarted_stats = loop {
        // Redis may answer LOADING for a moment after its restart.
        match redis_store.spam_stats("log").await {
            Ok(s) => break s.unwrap(),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    };
    let (_, log) = decision_log();
    let writes = log
        .iter()
        .filter(|(d, _)| matches!(d, Decision::Write { .. }))
        .count() as u64;
    assert_eq!(embedded.1, writes);
    assert_eq!(embedded.2, log.len() as u64 - writes);
    assert_eq!(embedded, redis_model, "embedded and Redis differ");
    assert_eq!(
        embedded, reopened,
        "the embedded store's files differ from its memory"
    );
    // The model is the log applied in order: each instance holds its last write.
    let (initial, log) = decision_log();
    let mut want: Vec<Vec<u32>> = initial
        .iter()
        .map(|w| w.iter().map(|x| x.to_bits()).collect())
        .collect();
    for (d, w) in &log {
        if let Decision::Write { instance } = d {
            want[*instance] = w.iter().map(|x| x.to_bits()).collect();
        }
    }
    assert_eq!(embedded.0, want);

    // The spam statistics: the embedded store followed every write of the log (no
    // recomputation: fewer than `SPAM_RECOMPUTE_EVERY` writes), the Redis store computes them
    // from its instances; they agree within the running sums' stated precision (mean within
    // 2⁻²⁹ standard deviations, variance within 2⁻¹⁷ relative).
    assert_eq!(embedded_stats.overwrites(), writes);
    let (e, r) = (embedded_stats.instances(), redis_stats.instances());
    for j in 0..spec().dim {
        let sd = r.variance(j).sqrt();
        assert!(
            (e.mean(j) - r.mean(j)).abs() <= 2f64.powi(-29) * sd,
            "mean {j}"
        );
        let rel = (e.variance(j) - r.variance(j)).abs() / r.variance(j);
        assert!(rel <= 2f64.powi(-17), "variance {j}: {rel}");
    }
    // After a restart of each store: the same statistics bit for bit, computed afresh from the
    // same stored instances.
    assert_eq!(reopened_stats, restarted_stats, "after a restart of each");
    assert_eq!(
        reopened_stats, redis_stats,
        "Redis before and after its restart"
    );
    assert_eq!(reopened_stats.overwrites(), 0);
}

/// The spam filter's statistics of the model `log` (it has a filter).
async fn spam_stats<S: Store>(store: &S) -> SpamStats {
    store
        .spam_stats("log")
        .await
        .unwrap()
        .expect("the model has a spam filter")
}
