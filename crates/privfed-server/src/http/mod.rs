//! The HTTP kit that the Draw-and-Discard routes ([`crate::ddml`]) and the secure-aggregation
//! routes ([`crate::secagg`]) share: errors and their one mapping to responses ([`error`]),
//! the admin token ([`auth`]), body limits ([`body`]), extractors ([`extract`]), metrics
//! ([`metrics`]), the per-client rate limit ([`ratelimit`]) and the defences' counters and log
//! lines ([`defence`]). Nothing here knows a route's protocol.

pub mod auth;
pub mod body;
pub mod defence;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod ratelimit;
