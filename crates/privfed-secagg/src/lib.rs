//! Secure aggregation for privfed: the server learns the sum of the clients' vectors in
//! Z_{2^b}^d and nothing else, even when clients drop out.
//!
//! **Which server that holds against depends on the mode** ([`ThreatModel`]):
//! * [`ThreatModel::HonestButCurious`]: a server that reads everything but relays keys and
//!   reports dropouts truthfully. A server that lies about dropouts, or substitutes keys,
//!   recovers any single client's input ([`adversary`] plays both attacks; the tests show them
//!   succeed).
//! * [`ThreatModel::Active`] with a roster: also a server that lies about dropouts, forwards any
//!   subset of messages and substitutes keys — device-signed round keys ([`identity`]), the whole
//!   key list bound into every derivation, a graph the server cannot place, and a consistency
//!   round ([`Client::new_active`]). Without a roster, the server can still act as any number of
//!   clients (Sybils).
//!
//! This crate is the protocol only, as pure state machines in the style of rustls: no sockets,
//! no files, no clock. Randomness comes in as `rng: &mut R` with `R: Rng + CryptoRng`; deadlines
//! come in as calls to [`Server::close_stage`]. The server's HTTP coordinator lives in
//! `privfed-server`, the device's HTTP client in `privfed-client`.
//!
//! # The protocol (Bonawitz et al. 2017, CCS; SecAgg+ of Bell et al. 2020, CCS)
//! 1. **Advertise keys.** Each client makes two X25519 key pairs (cipher, mask) and sends the
//!    public keys. The server relays each client's neighbours' keys.
//! 2. **Share keys.** Each client draws a 256-bit self-mask seed `b_u`, splits its mask secret
//!    key and `b_u` into Shamir shares (threshold `t`) for its neighbours, and sends each share
//!    pair sealed with ChaCha20-Poly1305 under a key agreed with that neighbour.
//! 3. **Masked input.** Each client sends
//!    `y_u = x_u + PRG(b_u) + Σ_{v∈N(u), v>u} PRG(s_uv) − Σ_{v∈N(u), v<u} PRG(s_uv)  (mod 2^b)`,
//!    where `s_uv` is the pairwise seed both ends derive from X25519 and HKDF, and the sums run
//!    over the neighbours whose shares it received.
//! 4. **Unmasking.** The server tells each survivor which neighbours survived and which dropped
//!    (in the active mode, first a consistency check: survivors sign the set U3, and a client
//!    unmasks only with `t` of its neighbours' signatures on the U3 it signed, deriving the lists
//!    itself); the client returns its shares of the survivors' self-mask seeds and of the
//!    dropped clients' mask keys — never both for one client. The server reconstructs them and
//!    removes every mask: the pairwise masks between survivors cancel in the sum.
//!
//! With [`GraphSpec::Complete`] every client is every other's neighbour (the original
//! protocol); with [`GraphSpec::Harary`] each has `k` neighbours on a random Harary graph
//! (SecAgg+), which makes the cost per client grow with `k` instead of `n`;
//! [`plan_secagg_plus`] finds `k` and `t` for a cohort, a dropout rate and the security and
//! correctness targets.
//!
//! Threat model, parameters and wire format: `docs/SECURE_AGGREGATION.md`.
//!
//! # Example: a round in one process
//! [`local::LocalRound`] runs real clients and a real server, every message encoded as on the
//! wire; here 10 honest-but-curious clients, one of which drops out before sending its masked
//! input.
//! ```
//! use privfed_secagg::local::{LocalRound, plain_sum};
//! use privfed_secagg::{GraphChoice, Stage, round_config};
//! use rand::{SeedableRng, rngs::ChaCha20Rng};
//!
//! let mut rng = ChaCha20Rng::seed_from_u64(1); // a device seeds from the OS
//! let config = round_config(10, 16, 4, 0.1, GraphChoice::Complete, [7; 32])?;
//! let inputs: Vec<Vec<u64>> = (1..=10).map(|i| vec![i, 2 * i, 3 * i, 4 * i]).collect();
//! let mut drop_before = vec![None; 10];
//! drop_before[4] = Some(Stage::MaskedInput); // client 5 goes silent
//! let sum = LocalRound::new(config, inputs.clone(), drop_before)?.run(&mut rng)?;
//! assert_eq!(sum.dropped, vec![5]);
//! assert_eq!(sum.sum, plain_sum(&inputs, &sum.survivors, 16)); // 50, 100, 150, 200
//! assert_eq!(sum.sum[0], 50);
//! # Ok::<(), privfed_secagg::SecAggError>(())
//! ```
//! `examples/secure_sum.rs` runs the actively secure mode with enrolled devices
//! (`cargo run -p privfed-secagg --example secure_sum`).

#![forbid(unsafe_code)]

pub mod adversary;
pub mod client;
pub mod config;
pub mod crypto;
pub mod error;
pub mod identity;
mod ids;
pub mod local;
pub mod mask;
pub mod messages;
pub mod plan;
pub mod policy;
pub mod server;
pub mod shamir;

pub use client::Client;
pub use config::{ClientId, Graph, GraphSpec, PROTOCOL_VERSION, RoundConfig, ThreatModel};
pub use error::{Result, SecAggError};
pub use identity::{Credentials, DeviceKey, Roster, RosterCheck, TrustedRoster};
pub use messages::{ClientMessage, ClientPayload, ServerMessage, ServerPayload, Stage};
pub use plan::{
    GraphChoice, SecAggPlusPlan, plan_active, plan_secagg_plus, round_config, round_config_for,
    round_config_for_colluding,
};
pub use policy::ClientPolicy;
pub use server::{Aggregate, Receipt, RoundStatus, Server};
