//! Why an update or its ticket was refused, over a real socket with each store: the 409 of a
//! refused ticket and the 422 of a refused update keep their status and `error` code and add a
//! `reason` (`ticket_unknown`, `ticket_in_progress`, `instance_overwritten`,
//! `ticket_for_another_model`, `ticket_expired`; `guard_coordinate`, …), the same from both
//! stores, and `privfed-client` reads it into its error.

use crate::common;
use crate::identity::{finish_upload, start_upload};
use privfed_server::client::{Client, ClientError, Submitted};
use privfed_server::ddml::store::embedded::{EmbeddedOptions, OpenMode};
use privfed_server::ddml::ticket::TicketLimits;
use privfed_server::{EmbeddedStore, RedisStore};
use std::time::Duration;

const TOKEN: &str = "t0ken";

/// Tickets live 1.5 s, and only `k` overwritten instances are kept for them.
fn limits() -> TicketLimits {
    TicketLimits {
        ttl: Duration::from_millis(1_500),
        retired_bytes: 0,
        ..TicketLimits::default()
    }
}

fn refused(e: &ClientError, status: u16, code: &str, reason: &str) {
    assert_eq!(e.status(), Some(status), "{e}");
    assert!(
        matches!(e, ClientError::Api { code: c, .. } if c == code),
        "{e}"
    );
    assert_eq!(e.reason(), Some(reason), "{e}");
}

/// Provokes each reason against the server at `url` and checks the body's key.
async fn every_reason(url: &str) {
    let admin = Client::new(url).unwrap().with_admin_token(TOKEN);
    // One instance, so every draw is of it, and (k = 1) one overwritten value kept for tickets.
    admin.create_model(&common::spec("r", 4, 1)).await.unwrap();
    let c = Client::new(url).unwrap();

    // A ticket the server never issued: a fresh one with its last hex digit changed (so it
    // carries a recent issue time; a made-up one whose time field is old reads as expired).
    let mut forged = c.draw("r").await.unwrap().ticket.unwrap();
    let last = if forged.ends_with('0') { "1" } else { "0" };
    forged.replace_range(31.., last);
    let e = c.submit("r", Some(&forged), &[1.0; 4]).await.unwrap_err();
    refused(&e, 409, "ticket_invalid", "ticket_unknown");

    // A ticket whose update is still uploading, presented again by a second request.
    let t = c.draw("r").await.unwrap().ticket.unwrap();
    let held = start_upload(url, "r", 4, Some(&t)).await;
    let e = c.submit("r", Some(&t), &[1.0; 4]).await.unwrap_err();
    refused(&e, 409, "ticket_invalid", "ticket_in_progress");
    assert_eq!(finish_upload(held).await, 202);

    // A ticket whose instance value was overwritten twice since (only one value is kept).
    let stale = c.draw("r").await.unwrap().ticket.unwrap();
    for _ in 0..3 {
        let d = c.draw("r").await.unwrap();
        assert_eq!(
            c.submit("r", d.ticket.as_deref(), &[2.0; 4]).await.unwrap(),
            Submitted::Accepted
        );
    }
    let e = c.submit("r", Some(&stale), &[1.0; 4]).await.unwrap_err();
    refused(&e, 409, "ticket_invalid", "instance_overwritten");

    // A ticket of a model deleted and created again under its name, presented to the new one.
    let gone = c.draw("r").await.unwrap().ticket.unwrap();
    admin.delete_model("r").await.unwrap();
    admin.create_model(&common::spec("r", 4, 1)).await.unwrap();
    let e = c.submit("r", Some(&gone), &[1.0; 4]).await.unwrap_err();
    refused(&e, 409, "ticket_invalid", "ticket_for_another_model");
    // A ticket of a model with another name: each model keeps its own tickets, so neither store
    // knows it.
    admin.create_model(&common::spec("x", 4, 1)).await.unwrap();
    let of_x = c.draw("x").await.unwrap().ticket.unwrap();
    let e = c.submit("r", Some(&of_x), &[1.0; 4]).await.unwrap_err();
    refused(&e, 409, "ticket_invalid", "ticket_unknown");

    // A ticket past its lifetime.
    let old = c.draw("r").await.unwrap().ticket.unwrap();
    tokio::time::sleep(limits().ttl + Duration::from_millis(300)).await;
    let e = c.submit("r", Some(&old), &[1.0; 4]).await.unwrap_err();
    refused(&e, 409, "ticket_invalid", "ticket_expired");

    // The guard's per-coordinate test: a 422 with its reason.
    let mut spec = common::spec("g", 4, 1);
    spec.update_guard = Some(
        serde_json::from_value(serde_json::json!({
            "learning_rate": 0.01, "noise": {"kind": "none"}
        }))
        .unwrap(),
    );
    admin.create_model(&spec).await.unwrap();
    let d = c.draw("g").await.unwrap();
    let far: Vec<f32> = d.weights.iter().map(|w| w + 10.0).collect();
    match c.submit("g", d.ticket.as_deref(), &far).await.unwrap() {
        Submitted::Rejected(r) => assert_eq!(r.reason.as_deref(), Some("guard_coordinate"), "{r}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_refusals_carry_their_reason() {
    let dir = common::TempDir::new("refusals");
    let options = EmbeddedOptions {
        limits: limits(),
        ..EmbeddedOptions::default()
    };
    let store = EmbeddedStore::open_with(&dir.0, OpenMode::Create, options).unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    every_reason(&url).await;
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn redis_refusals_carry_their_reason() {
    let redis = common::RedisServer::start();
    let store = RedisStore::connect(&redis.url())
        .await
        .unwrap()
        .with_ticket_limits(limits());
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    every_reason(&url).await;
    stop.send(()).unwrap();
    h.await.unwrap();
}

/// The embedded store keeps what it needs to recognize a deleted incarnation's tickets durably:
/// a ticket drawn before the deletion answers `ticket_for_another_model` when the name is
/// created again after a restart, and after a further restart (the model then loaded from the
/// database).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_deleted_incarnation_is_recognized_across_restarts() {
    let dir = common::TempDir::new("refusals-restart");
    let open = |mode| {
        let options = EmbeddedOptions {
            limits: TicketLimits {
                ttl: Duration::from_secs(600),
                ..limits()
            },
            ..EmbeddedOptions::default()
        };
        EmbeddedStore::open_with(&dir.0, mode, options).unwrap()
    };
    let (url, stop, h) = common::serve_on_loopback(open(OpenMode::Create), TOKEN).await;
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    admin.create_model(&common::spec("r", 4, 2)).await.unwrap();
    let gone = Client::new(&url)
        .unwrap()
        .draw("r")
        .await
        .unwrap()
        .ticket
        .unwrap();
    admin.delete_model("r").await.unwrap();
    stop.send(()).unwrap();
    h.await.unwrap();

    for restart in 0..2 {
        let (url, stop, h) = common::serve_on_loopback(open(OpenMode::Existing), TOKEN).await;
        if restart == 0 {
            let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
            admin.create_model(&common::spec("r", 4, 2)).await.unwrap();
        }
        let c = Client::new(&url).unwrap();
        let e = c.submit("r", Some(&gone), &[1.0; 4]).await.unwrap_err();
        refused(&e, 409, "ticket_invalid", "ticket_for_another_model");
        stop.send(()).unwrap();
        h.await.unwrap();
    }
}
