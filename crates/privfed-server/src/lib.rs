//! # privfed-server
//!
//! The Draw-and-Discard model server of paper 003 (`docs/ALGORITHMS.md` §4.2): each model has `k`
//! instances; a client draws a uniformly random one, takes a noisy local step
//! (`privfed_ddml::client`) and posts the result, which overwrites a uniformly random instance
//! chosen independently of the draw. The logic comes from `privfed_ddml::engine` and the request
//! body and weight format from `privfed_ddml::wire`; this crate owns HTTP and storage.
//!
//! ## Routes
//! | route | who | answers |
//! |---|---|---|
//! | `POST /v1/models` `{"name","dim","k","update_guard","init_std"?,"spam_sigmas"?,"spam_max_outside_fraction"?}` | admin | 201, 400, 401, 403, 409, 507 (over `max_model_bytes`) |
//! | `DELETE /v1/models/{name}` | admin | 204, 401, 403, 404 |
//! | `GET /v1/models/{name}/draw` (JSON, or raw LE `f32` with `Accept: application/octet-stream`); answers a single-use `Privfed-Ticket` header | anyone | 200, 404, 429 (rate limit, or `tickets_full`), 500 (quarantined) |
//! | `POST /v1/models/{name}/updates` (JSON `{"weights"}` or raw LE `f32`; header `Privfed-Ticket`, required when the model has an update guard) | anyone | 202, 400, 404, 408 (body timeout), 409 (ticket), 413, 415, 422 (guard or spam filter), 428 (no ticket), 429, 503 |
//! | `GET /v1/models/{name}` | anyone | 200 (counters, mean, intra-model variance), 404, 503 (large views busy) |
//! | `GET /healthz`, `GET /metrics`, `GET /openapi.json` | anyone | 200 |
//!
//! Admin routes need `Authorization: Bearer TOKEN` (scheme case-insensitive; 401 without it, 403
//! with a wrong one). Model names are 1–64 characters from `[A-Za-z0-9_.-]`, not `.` or `..`;
//! `spam_sigmas` lies in [1, 1000]. Every answer, 404 and 405 included, is counted in `/metrics`.
//!
//! An update is checked before its body is read (model, content type, declared length, ticket);
//! a refused update's body is never read. Defences against hostile clients (per-address caps on
//! connections and tickets, tickets protected for the step time, a budget of bodies in flight)
//! are in [`http::defence`], [`ddml::ticket`] and [`server`].
//!
//! ## Limits
//! [`serve_with`] takes a [`ServeConfig`] (defaults: header timeout 10 s, body 30 s, idle
//! keep-alive 60 s, write 30 s, 768 connections, shutdown deadline 10 s; `privfed serve` flags
//! `--header-timeout-secs`, `--body-timeout-secs`, `--idle-timeout-secs`, `--write-timeout-secs`,
//! `--max-connections`, `--shutdown-deadline-secs`); see [`server`]. Total model memory is capped
//! by [`AppState::max_model_bytes`] (`--max-model-bytes`, default 2 GiB of weights). Views of
//! models above [`ddml::api::SMALL_VIEW_FLOATS`] floats are rendered off the async workers and shared
//! for up to [`ddml::api::VIEW_TTL`]; JSON draws above [`ddml::api::STREAM_JSON_FLOATS`] weights are streamed.
//!
//! ## Logs
//! The crate logs through `tracing` (the binary installs the subscriber): one DEBUG event per
//! request (target `privfed_server::request`: method, route template, status, latency in µs),
//! internal errors and failed commits at ERROR, 503s at WARN, start-up and shutdown at INFO.
//! Errors are JSON `{"error", "message"}` ([`http::error`]). Weights are stored as `f32`.
//!
//! ## Clients
//! Devices link `privfed-client` (no server stack): its async `Client` (re-exported here as
//! [`client`] so existing imports keep working) and its load generator. The simulator's adapter
//! that trains against a live server is `privfed_sim::http::HttpModelServer`.
//!
//! ## Layout
//! | module | what |
//! |---|---|
//! | [`http`] | the kit both protocols' routes share: errors and their mapping to responses, the admin token, body limits, extractors, metrics, rate limit, defences |
//! | [`ddml`] | Draw-and-Discard: routes ([`ddml::api`]), model specification, tickets, and the stores that persist the decisions of `privfed_ddml` |
//! | [`secagg`] | secure aggregation: the coordinator over `privfed_secagg`, its routes and round stores |
//! | [`redis_conn`] | the Redis connection and durability policy both Redis stores share |
//! | [`server`] | the connection layer (timeouts, connection caps, shutdown) around the router |
//!
//! Dependencies go one way: `server` → `ddml` → `secagg` → `redis_conn` → `http` (each may also
//! use any module after it); `http` depends on no other module of the crate.
//!
//! ## Stores
//! [`ddml::store::embedded::EmbeddedStore`] (redb, group commit, crash consistent) and
//! [`ddml::store::redis::RedisStore`] (shared by several processes). Secure-aggregation rounds have
//! their own [`secagg::RoundStore`]: [`secagg::EmbeddedRoundStore`] beside the embedded model
//! store, or [`secagg::RedisRoundStore`] over the Redis model store's connection, so several
//! processes serve one round.

pub mod ddml;
pub mod http;
pub mod openapi;
pub mod redis_conn;
pub mod secagg;
pub mod server;

/// The device-side client, re-exported from `privfed_client::client` (its home) so that
/// `privfed_server::client::Client` keeps working.
pub use privfed_client::client;

pub use ddml::api::{AppState, router};
pub use ddml::store::{Store, embedded::EmbeddedStore, redis::RedisStore};
pub use http::error::{ApiError, StoreError};
pub use server::{ServeConfig, serve_with};

use std::sync::Arc;

/// Serves `state` on `listener` until `shutdown` resolves, with the hardened defaults of
/// [`ServeConfig`] (timeouts, connection cap, shutdown deadline): [`serve_with`] with
/// `ServeConfig::default()`.
pub async fn serve<S: Store>(
    listener: tokio::net::TcpListener,
    state: Arc<AppState<S>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, shutdown, ServeConfig::default()).await
}
