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
//! A device's round trip: draw an instance, take a step on the device's data, submit it with
//! the draw's ticket. (The hidden lines start a `privfed-server` on a loopback port and create
//! the model, as an operator would with `privfed serve`.)
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("privfed-client-doctest-{}", std::process::id()));
//! # let store = privfed_server::EmbeddedStore::create(&dir)?;
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}", listener.local_addr()?);
//! # let state = std::sync::Arc::new(privfed_server::AppState::new(store, "token"));
//! # let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! # let server = tokio::spawn(privfed_server::serve(listener, state, async { let _ = stopped.await; }));
//! # Client::new(&url)?.with_admin_token("token").create_model(&privfed_ddml::wire::CreateModel {
//! #     name: "demo".into(), dim: 3, k: 4, init_std: None, spam_sigmas: None,
//! #     spam_max_outside_fraction: None,
//! #     update_guard: Some(privfed_ddml::guard::UpdateGuard::Off(privfed_ddml::guard::GuardOff::Off)),
//! # }).await?;
//! use privfed_client::client::{Client, Submitted};
//!
//! let client = Client::new(&url)?; // e.g. "http://127.0.0.1:8080"
//! let drawn = client.draw("demo").await?;
//! // ... a local step on the device's data (privfed_ddml::client::ClientStep) ...
//! let update: Vec<f32> = drawn.weights.iter().map(|w| w + 0.01).collect();
//! // The draw's ticket: the server checks the update as a step from the instance drawn, and
//! // applies a retried post once.
//! match client.submit("demo", drawn.ticket.as_deref(), &update).await? {
//!     Submitted::Accepted | Submitted::Replayed => {}
//!     Submitted::Rejected(r) => eprintln!("rejected: {}", r.message),
//! }
//! assert_eq!(client.model("demo").await?.updates_accepted, 1);
//! # let _ = stop.send(());
//! # server.await??;
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok(())
//! # }
//! ```
//! `examples/device.rs` runs 200 devices with the noisy Draw-and-Discard step against a server
//! that checks every update (`cargo run -p privfed-client --example device`).

pub mod client;
pub mod conn;
pub mod loadgen;
pub mod secagg;
