//! The stores overwrite a uniformly random instance (the server-side coin of paper 003 Alg. 2,
//! on which the privacy amplification against adversary II rests). Each store gets 800
//! sequential updates of unique constant vectors on a k = 4 model; after each, the snapshot shows
//! which instance holds it. Chi-square goodness of fit against uniform at α = 1e-6
//! (`privfed_testkit`).

use crate::common;
use privfed_testkit::assert_chi_square_gof;

use privfed_server::ddml::model::ModelSpec;
use privfed_server::ddml::store::{Store, Submission, SubmitOutcome};
use privfed_server::{EmbeddedStore, RedisStore};

fn spec() -> ModelSpec {
    ModelSpec {
        name: "r".into(),
        dim: 3,
        k: 4,
        init_std: 0.0,
        spam: None,
        generation: 7,
        guard: None,
        step_guard: None,
    }
}

async fn replacement_counts<S: Store>(store: &S) -> [u64; 4] {
    store
        .create_model(spec(), vec![vec![0.0; 3]; 4])
        .await
        .unwrap();
    let mut counts = [0u64; 4];
    for i in 1..=800u32 {
        let v = i as f32;
        assert_eq!(
            store
                .submit(
                    "r",
                    Submission {
                        generation: 7,
                        ticket: None,
                        weights: vec![v; 3],
                    }
                )
                .await
                .unwrap(),
            SubmitOutcome::Accepted
        );
        let snap = store.snapshot("r").await.unwrap();
        let holders: Vec<usize> = (0..4).filter(|&j| snap.instances[j][0] == v).collect();
        assert_eq!(holders.len(), 1, "update {i} is in {holders:?}");
        assert!(snap.instances[holders[0]].iter().all(|x| *x == v));
        counts[holders[0]] += 1;
        assert_eq!(snap.accepted, i as u64);
    }
    counts
}

#[tokio::test]
async fn embedded_store_replaces_uniformly() {
    let dir = common::TempDir::new("replace");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    let c = replacement_counts(&store).await;
    assert_chi_square_gof(&c, &[0.25; 4], 1e-6, &format!("{c:?}"));
}

#[tokio::test]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn redis_store_replaces_uniformly() {
    let redis = common::RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let c = replacement_counts(&store).await;
    assert_chi_square_gof(&c, &[0.25; 4], 1e-6, &format!("{c:?}"));
}
