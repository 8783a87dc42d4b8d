//! # privfed-client
//!
//! What a device links to take part in a Draw-and-Discard deployment (paper 003,
//! `docs/ALGORITHMS.md` §4): [`client::Client`], an async (reqwest) client of the server's HTTP
//! API (draw an instance, submit an update, read a model's counters; create and delete models
//! with an admin token), and [`loadgen`], `C` simulated devices that draw, take the noisy client
//! step of `privfed_ddml::client` and post, over lean keep-alive connections ([`conn`]).
//!
//! The request bodies and the binary weight format are `privfed_ddml::wire`, shared with the
//! server. This crate does **not** depend on the server's stack: `cargo tree -p privfed-client`
//! lists neither axum, nor redb, nor redis (nor `privfed-server`).
//!
//! ## Example
//! ```no_run
//! # async fn demo() -> Result<(), privfed_client::client::ClientError> {
//! use privfed_client::client::{Client, Submitted};
//!
//! let client = Client::new("http://127.0.0.1:8080")?;
//! let drawn = client.draw("demo").await?;
//! // ... a local step on the device's data (privfed_ddml::client::ClientStep) ...
//! let update = drawn.weights.clone();
//! // The draw's ticket: the server checks the update as a step from the instance drawn, and
//! // applies a retried post once.
//! match client.submit("demo", drawn.ticket.as_deref(), &update).await? {
//!     Submitted::Accepted | Submitted::Replayed => {}
//!     Submitted::Rejected(r) => eprintln!("rejected: {}", r.message),
//! }
//! # Ok(())
//! # }
//! ```

pub mod client;
pub mod conn;
pub mod loadgen;
pub mod secagg;
