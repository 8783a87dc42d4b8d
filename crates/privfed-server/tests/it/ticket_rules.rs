//! The ticket redemption rule is defined once, in Rust (`privfed_ddml::ticket::redeem`); the
//! Redis store carries it out in Lua for atomicity ([`REDEEM_SCRIPT`]). A table of ticket
//! records — none, expired, used, in progress, in progress with a lapsed hold, issued by
//! another incarnation of the model, issued from a value overwritten and dropped, from a value
//! overwritten and kept, from the current value — is written as Redis keys and run through the
//! script, and each answer must be the rule's.

use crate::common;
use privfed_ddml::ticket::{Record, Redeem, Refusal, redeem};
use privfed_server::ddml::store::redis::REDEEM_SCRIPT;

/// What an answer is, in classes both sides share; a refusal with its reason as the Lua names
/// it (an expired ticket's key is gone, so the script answers `unknown` and the store tells the
/// two apart by the issue time the ticket carries).
#[derive(Debug, PartialEq, Eq)]
enum Class {
    Fresh(Vec<u8>),
    Replay(String),
    Busy,
    Refused(String),
}

/// One row: the record the rule sees, whether it expired, and how the record is written in
/// Redis (a lapsed hold and a kept overwritten value are issued records to the rule).
struct Case {
    name: &'static str,
    record: Option<Record<String>>,
    expired: bool,
    lapsed_hold: bool,
    kept_old_value: bool,
}

fn issued(same_model: bool, base_available: bool) -> Option<Record<String>> {
    Some(Record::Issued {
        same_model,
        base_available,
    })
}

fn cases() -> Vec<Case> {
    let c = |name, record, expired, lapsed_hold, kept_old_value| Case {
        name,
        record,
        expired,
        lapsed_hold,
        kept_old_value,
    };
    vec![
        c("none", None, false, false, false),
        c("expired issued", issued(true, true), true, false, false),
        c(
            "expired used",
            Some(Record::Used("a".into())),
            true,
            false,
            false,
        ),
        c(
            "used, accepted",
            Some(Record::Used("a".into())),
            false,
            false,
            false,
        ),
        c(
            "used, rejected",
            Some(Record::Used("r{\"x\":1}".into())),
            false,
            false,
            false,
        ),
        c("in progress", Some(Record::InProgress), false, false, false),
        c("lapsed hold", issued(true, true), false, true, false),
        c(
            "another incarnation",
            issued(false, true),
            false,
            false,
            false,
        ),
        c(
            "overwritten, dropped",
            issued(true, false),
            false,
            false,
            false,
        ),
        c("overwritten, kept", issued(true, true), false, false, true),
        c("current", issued(true, true), false, false, false),
    ]
}

#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
#[tokio::test]
async fn the_redis_script_redeems_as_the_rule_says() {
    let redis = common::RedisServer::start();
    let client = redis::Client::open(redis.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let script = redis::Script::new(REDEEM_SCRIPT);
    let (generation, version) = (5u64, 9u64);
    let current = vec![1u8, 2, 3, 4];
    let old = vec![5u8, 6, 7, 8];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for (n, case) in cases().into_iter().enumerate() {
        let prefix = format!("privfed:m{n}:");
        let (meta, ticket) = (format!("{prefix}meta"), format!("{prefix}t:x"));
        let _: () = redis::pipe()
            .hset(&meta, "gen", generation)
            .set(format!("{prefix}inst:0"), &current)
            .query_async(&mut con)
            .await
            .unwrap();
        let mut drawn_version = version;
        let value = match &case.record {
            None => None,
            Some(Record::Used(o)) => Some(format!("u:{o}")),
            Some(Record::InProgress) => {
                Some(format!("p:{}:{generation}:0:{version}", now_ms + 3_600_000))
            }
            Some(Record::Issued {
                same_model,
                base_available,
            }) => {
                let g = if *same_model {
                    generation
                } else {
                    generation + 1
                };
                if !*base_available || case.kept_old_value {
                    drawn_version = version - 1;
                }
                if case.kept_old_value {
                    let _: () = redis::cmd("SET")
                        .arg(format!("{prefix}old:{generation}:0:{drawn_version}"))
                        .arg(&old)
                        .query_async(&mut con)
                        .await
                        .unwrap();
                }
                let v = format!("{g}:0:{drawn_version}");
                Some(if case.lapsed_hold {
                    format!("p:{}:{v}", now_ms.saturating_sub(1_000))
                } else {
                    v
                })
            }
        };
        let _: () = redis::cmd("HSET")
            .arg(&meta)
            .arg("v:0")
            .arg(version)
            .query_async(&mut con)
            .await
            .unwrap();
        if let Some(v) = value {
            let ttl_ms = if case.expired { 1 } else { 600_000 };
            let _: () = redis::cmd("SET")
                .arg(&ticket)
                .arg(v)
                .arg("PX")
                .arg(ttl_ms)
                .query_async(&mut con)
                .await
                .unwrap();
        }
        if case.expired {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let reply: Vec<redis::Value> = script
            .key(&meta)
            .key(&ticket)
            .arg(generation.to_string())
            .arg(&prefix)
            .arg(10_000u64)
            .invoke_async(&mut con)
            .await
            .unwrap();
        let field = |i: usize| -> Vec<u8> { redis::from_redis_value(reply[i].clone()).unwrap() };
        let lua = match String::from_utf8(field(0)).unwrap().as_str() {
            "fresh" => Class::Fresh(field(1)),
            "used" => Class::Replay(String::from_utf8(field(1)).unwrap()),
            "busy" => Class::Busy,
            "invalid" => Class::Refused(String::from_utf8(field(1)).unwrap()),
            other => panic!("{}: unexpected answer {other}", case.name),
        };
        let base = if case.kept_old_value { &old } else { &current };
        let rust = match redeem(case.record.clone(), case.expired) {
            Redeem::Fresh(()) => Class::Fresh(base.clone()),
            Redeem::Replay(o) => Class::Replay(o),
            Redeem::InProgress => Class::Busy,
            Redeem::Refuse(r) => Class::Refused(
                match r {
                    Refusal::Unknown | Refusal::Expired => "unknown",
                    Refusal::OtherModel => "other_model",
                    Refusal::Overwritten => "overwritten",
                }
                .into(),
            ),
        };
        assert_eq!(lua, rust, "case {}", case.name);
    }
}
