//! The `RoundStore` contract (`privfed_server::secagg::store`), checked against both stores by
//! the same function: the embedded redb store and the Redis store over a real `redis-server`.
//! Plus what only the Redis store has: key prefixes, outages, a strict store's refusal of a Redis
//! that would lose writes, and acknowledged messages surviving `kill -9` of Redis.

use std::sync::Arc;
use std::time::{Duration, Instant};

use privfed_secagg::{GraphSpec, RoundConfig};
use privfed_server::StoreError;
use privfed_server::ddml::store::redis::{Durability, RedisOptions};
use privfed_server::secagg::store::RESULT_STAGE;
use privfed_server::secagg::store::redis::DEFAULT_PREFIX;
use privfed_server::secagg::{
    EmbeddedRoundStore, JoinTicket, PutOutcome, RedisRoundStore, RoundRecord, RoundStore,
    StoredStatus,
};

use crate::common::{self, TempDir};

fn record(clients: u32) -> RoundRecord {
    RoundRecord {
        config: RoundConfig {
            session_id: [7; 32],
            clients,
            threshold: clients / 2 + 1,
            bits: 16,
            dim: 4,
            graph: GraphSpec::Complete,
            threat_model: Default::default(),
        },
        status: StoredStatus::Collecting { stage: 0 },
        stage_opened_ms: 1_700_000_000_000,
        stage_timeout_ms: 60_000,
        joined: Vec::new(),
        roster: None,
        devices: Vec::new(),
        // One used and one unused join ticket: both stores give them back as stored.
        join_tickets: Some(vec![
            JoinTicket {
                digest: [3; 32],
                used: true,
            },
            JoinTicket {
                digest: [4; 32],
                used: false,
            },
        ]),
        version: 0,
    }
}

/// `record` moved on by one version.
fn next(record: &RoundRecord, status: StoredStatus) -> RoundRecord {
    let mut r = record.clone();
    r.status = status;
    r.version += 1;
    r
}

/// Everything the coordinator relies on, in order; `store` must be empty.
async fn contract(store: &dyn RoundStore) {
    assert!(store.rounds().await.unwrap().is_empty());
    assert_eq!(store.round("r1").await.unwrap(), None);
    assert_eq!(store.version("r1").await.unwrap(), None);

    // Creation, once.
    let r1 = record(1200);
    store.create_round("r1", &r1).await.unwrap();
    assert!(matches!(
        store.create_round("r1", &record(3)).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.round("r1").await.unwrap(), Some(r1.clone()));
    assert_eq!(store.version("r1").await.unwrap(), Some(0));
    store.create_round("r2", &record(5)).await.unwrap();
    let mut listed = store.rounds().await.unwrap();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        listed,
        vec![
            ("r1".to_string(), r1.clone()),
            ("r2".to_string(), record(5))
        ]
    );

    // Compare-and-set: the right version swaps, a stale one does not, and a new record must
    // advance the version.
    let mut joined = r1.clone();
    joined.joined.push([1; 32]);
    joined.version = 1;
    assert!(store.update_round("r1", 0, &joined, None).await.unwrap());
    let mut other = r1.clone();
    other.joined.push([2; 32]);
    other.version = 1;
    assert!(!store.update_round("r1", 0, &other, None).await.unwrap());
    assert_eq!(store.round("r1").await.unwrap(), Some(joined.clone()));
    for v in [0, 1] {
        let mut standing = joined.clone();
        standing.version = v;
        assert!(matches!(
            store.update_round("r1", 1, &standing, None).await,
            Err(StoreError::Backend(_))
        ));
    }
    assert!(matches!(
        store.update_round("nope", 0, &joined, None).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.version("r1").await.unwrap(), Some(1));

    // Messages: put-if-absent, and each stored one advances the version.
    let body = |c: u32| format!("message of {c}").into_bytes();
    let mut version = 1;
    for c in [10u32, 2, 1000, 3, 9, 1] {
        version += 1;
        assert_eq!(
            store.put_message("r1", 0, c, &body(c)).await.unwrap(),
            PutOutcome::Stored { version }
        );
    }
    assert_eq!(
        store.put_message("r1", 0, 10, &body(10)).await.unwrap(),
        PutOutcome::Duplicate
    );
    assert_eq!(
        store.put_message("r1", 0, 10, b"other").await.unwrap(),
        PutOutcome::Conflict
    );
    assert_eq!(store.version("r1").await.unwrap(), Some(version));
    // Only while the round collects that stage.
    assert_eq!(
        store.put_message("r1", 1, 4, &body(4)).await.unwrap(),
        PutOutcome::StageClosed
    );
    assert!(matches!(
        store.put_message("nope", 0, 1, b"x").await,
        Err(StoreError::NotFound(_))
    ));
    // By increasing client id (numerically: 1000 last, 10 after 9).
    let ids = [1u32, 2, 3, 9, 10, 1000];
    assert_eq!(store.message_clients("r1", 0).await.unwrap(), ids);
    assert_eq!(
        store.messages("r1", 0).await.unwrap(),
        ids.iter().map(|&c| (c, body(c))).collect::<Vec<_>>()
    );
    assert_eq!(
        store.messages_of("r1", 0, &[1000, 7, 2, 2]).await.unwrap(),
        vec![(2, body(2)), (1000, body(1000))]
    );
    assert!(store.messages("r1", 1).await.unwrap().is_empty());
    // A stored message makes a compare-and-set from the version before it fail.
    let stale = next(&joined, StoredStatus::Collecting { stage: 1 });
    assert!(!store.update_round("r1", 1, &stale, None).await.unwrap());

    // The stage closes: messages of the old stage are refused, the new one's are taken; the
    // first round's messages are untouched by the second's.
    let current = store.round("r1").await.unwrap().unwrap();
    assert_eq!(current.version, version);
    let stage1 = next(&current, StoredStatus::Collecting { stage: 1 });
    assert!(
        store
            .update_round("r1", version, &stage1, None)
            .await
            .unwrap()
    );
    assert_eq!(
        store.put_message("r1", 0, 4, &body(4)).await.unwrap(),
        PutOutcome::StageClosed
    );
    assert_eq!(
        store.put_message("r1", 1, 4, &body(4)).await.unwrap(),
        PutOutcome::Stored {
            version: version + 2
        }
    );
    assert_eq!(
        store.put_message("r2", 0, 4, b"r2").await.unwrap(),
        PutOutcome::Stored { version: 1 }
    );
    assert_eq!(store.message_clients("r1", 0).await.unwrap(), ids);

    // Finishing stores the aggregate in the same write; a finished round takes no messages.
    let done = next(
        &store.round("r1").await.unwrap().unwrap(),
        StoredStatus::Finished,
    );
    assert!(
        store
            .update_round("r1", version + 2, &done, Some(b"the sum"))
            .await
            .unwrap()
    );
    assert_eq!(
        store.messages("r1", RESULT_STAGE).await.unwrap(),
        vec![(0, b"the sum".to_vec())]
    );
    assert_eq!(
        store.put_message("r1", 1, 5, &body(5)).await.unwrap(),
        PutOutcome::StageClosed
    );
    assert_eq!(store.round("r1").await.unwrap(), Some(done.clone()));
    // A finished round never changes again, even from its current version.
    let reopened = next(&done, StoredStatus::Collecting { stage: 1 });
    assert!(
        !store
            .update_round("r1", done.version, &reopened, None)
            .await
            .unwrap()
    );
    assert_eq!(store.round("r1").await.unwrap(), Some(done));

    // Deletion removes the record, every stage's messages and the result, and only that round.
    store.delete_round("r1").await.unwrap();
    assert_eq!(store.round("r1").await.unwrap(), None);
    assert_eq!(store.version("r1").await.unwrap(), None);
    for stage in [0, 1, RESULT_STAGE] {
        assert!(store.messages("r1", stage).await.unwrap().is_empty());
    }
    assert!(matches!(
        store.delete_round("r1").await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store.rounds().await.unwrap(),
        vec![("r2".to_string(), store.round("r2").await.unwrap().unwrap())]
    );
    assert_eq!(
        store.messages("r2", 0).await.unwrap(),
        vec![(4, b"r2".to_vec())]
    );
    // A compare-and-set may jump the version (the coordinator's abort of a round whose store
    // went back in time); the aborted round then takes no message and no change.
    let mut aborted = next(
        &store.round("r2").await.unwrap().unwrap(),
        StoredStatus::Aborted {
            reason: "rewound".into(),
        },
    );
    aborted.version = 1000;
    assert!(store.update_round("r2", 1, &aborted, None).await.unwrap());
    assert_eq!(store.version("r2").await.unwrap(), Some(1000));
    assert_eq!(store.round("r2").await.unwrap(), Some(aborted.clone()));
    assert_eq!(
        store.put_message("r2", 0, 5, b"late").await.unwrap(),
        PutOutcome::StageClosed
    );
    let mut revived = next(&aborted, StoredStatus::Collecting { stage: 0 });
    revived.version = 1001;
    assert!(
        !store
            .update_round("r2", 1000, &revived, None)
            .await
            .unwrap()
    );
    assert_eq!(store.version("r2").await.unwrap(), Some(1000));
    // A round of the same id can be created again, from scratch.
    store.create_round("r1", &record(3)).await.unwrap();
    assert!(store.message_clients("r1", 0).await.unwrap().is_empty());
}

/// Of `tasks` concurrent compare-and-sets from one version, exactly one succeeds; of concurrent
/// puts of one client's message, exactly one is stored.
async fn races(store: Arc<dyn RoundStore>) {
    store.create_round("race", &record(50)).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut r = record(50);
            r.joined.push([i; 32]);
            r.version = 1;
            store.update_round("race", 0, &r, None).await.unwrap()
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += usize::from(t.await.unwrap());
    }
    assert_eq!(won, 1);
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.put_message("race", 0, 3, &[i]).await.unwrap()
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| matches!(o, PutOutcome::Stored { version: 2 }))
            .count(),
        1,
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, PutOutcome::Stored { .. } | PutOutcome::Conflict))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_round_store_keeps_the_contract() {
    let dir = TempDir::new("roundstore-contract");
    let store = EmbeddedRoundStore::open(&dir.0).unwrap();
    contract(&store).await;
    let dir = TempDir::new("roundstore-races");
    races(Arc::new(EmbeddedRoundStore::open(&dir.0).unwrap())).await;
}

async fn redis_store(url: &str, prefix: &str) -> RedisRoundStore {
    RedisRoundStore::connect(url, RedisOptions::default(), prefix)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn the_redis_round_store_keeps_the_contract() {
    let redis = common::RedisServer::start();
    contract(&redis_store(&redis.url(), DEFAULT_PREFIX).await).await;
    races(Arc::new(redis_store(&redis.url(), "races:").await)).await;
}

/// Two deployments with different prefixes share one Redis without seeing each other's rounds,
/// and deleting a round leaves none of its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn redis_round_stores_under_different_prefixes_share_one_redis() {
    let redis = common::RedisServer::start();
    let a = redis_store(&redis.url(), "dep-a:").await;
    let b = redis_store(&redis.url(), "dep-b:").await;
    a.create_round("same", &record(3)).await.unwrap();
    b.create_round("same", &record(4)).await.unwrap();
    a.put_message("same", 0, 1, b"a").await.unwrap();
    b.put_message("same", 0, 2, b"b").await.unwrap();
    assert_eq!(
        a.messages("same", 0).await.unwrap(),
        vec![(1, b"a".to_vec())]
    );
    assert_eq!(
        b.messages("same", 0).await.unwrap(),
        vec![(2, b"b".to_vec())]
    );
    assert_eq!(a.rounds().await.unwrap().len(), 1);
    let client = redis::Client::open(redis.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let keys = |pattern: &'static str| {
        let mut con = con.clone();
        async move {
            let mut k: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut con)
                .await
                .unwrap();
            k.sort();
            k
        }
    };
    assert_eq!(
        keys("*").await,
        vec![
            "dep-a:m:same:0",
            "dep-a:r:same",
            "dep-a:rounds",
            "dep-b:m:same:0",
            "dep-b:r:same",
            "dep-b:rounds"
        ]
    );
    a.delete_round("same").await.unwrap();
    assert!(keys("dep-a:*").await.is_empty());
    assert_eq!(keys("dep-b:*").await.len(), 3);
    let _: () = redis::cmd("PING").query_async(&mut con).await.unwrap();
}

/// While Redis is down every operation answers `Unavailable` quickly (never a wrong answer);
/// the store recovers by itself when Redis is back, with every acknowledged message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_redis_outage_is_unavailable_and_loses_no_acknowledged_message() {
    let mut redis = common::RedisServer::start();
    let store = redis_store(&redis.url(), DEFAULT_PREFIX).await;
    store.create_round("r", &record(100)).await.unwrap();
    for c in 1..=40u32 {
        assert!(matches!(
            store.put_message("r", 0, c, &c.to_le_bytes()).await,
            Ok(PutOutcome::Stored { .. })
        ));
    }
    redis.kill9();
    let t0 = Instant::now();
    assert!(matches!(
        store.put_message("r", 0, 41, b"x").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.version("r").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.messages("r", 0).await,
        Err(StoreError::Unavailable(_))
    ));
    let mut r = record(100);
    r.version = 41;
    assert!(matches!(
        store.update_round("r", 40, &r, None).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    redis.restart();
    // Redis may answer LOADING for a moment: Unavailable, then the data.
    let t0 = Instant::now();
    let listed = loop {
        match store.messages("r", 0).await {
            Ok(m) => break m,
            Err(StoreError::Unavailable(_)) if t0.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(listed.len(), 40);
    assert!(
        listed
            .iter()
            .all(|(c, bytes)| bytes.as_slice() == c.to_le_bytes())
    );
    assert_eq!(store.version("r").await.unwrap(), Some(40));
    assert_eq!(
        store.put_message("r", 0, 41, b"x").await.unwrap(),
        PutOutcome::Stored { version: 41 }
    );
}

/// A strict round store refuses a Redis that would lose acknowledged writes (the check is the
/// model store's), and a best-effort one says its acknowledgments are not durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_strict_redis_round_store_refuses_a_redis_that_would_lose_writes() {
    let redis = common::RedisServer::start_with(&[]);
    let e = RedisRoundStore::connect(&redis.url(), RedisOptions::default(), DEFAULT_PREFIX)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Unavailable(m) if m.contains("appendonly")),
        "{e}"
    );
    let best = RedisRoundStore::connect(
        &redis.url(),
        RedisOptions {
            durability: Durability::BestEffort,
            ..RedisOptions::default()
        },
        DEFAULT_PREFIX,
    )
    .await
    .unwrap();
    assert!(!best.durable_acks());
    let strict = common::RedisServer::start();
    assert!(
        redis_store(&strict.url(), DEFAULT_PREFIX)
            .await
            .durable_acks()
    );
}
