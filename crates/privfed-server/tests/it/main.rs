//! The server's integration tests, in one test binary (one link instead of one per file):
//! * [`api`]: the router in-process with the real embedded store, every route and error code;
//! * [`socket`]: over a real socket with the embedded store (concurrency, durability);
//! * [`redis`]: the Redis store against a real `redis-server`;
//! * [`replacement`]: both stores overwrite a uniformly random instance;
//! * [`limits`]: timeouts, the connection cap, shutdown, bounded reads and validation limits.
//!
//! Tests that need `redis-server` are ignored, with the reason "redis-server not on PATH", when
//! the build script did not find it (and the build fails under `CI` instead).

mod api;
mod common;
mod limits;
mod redis;
mod replacement;
mod socket;
