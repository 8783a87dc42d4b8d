//! The server's integration tests, in one test binary (one link instead of one per file):
//! * [`api`]: the router in-process with the real embedded store, every route and error code;
//! * [`socket`]: over a real socket with the embedded store (concurrency, durability);
//! * [`redis`]: the Redis store against a real `redis-server`;
//! * [`redis_durability`]: Redis persistence checks, kill -9 of Redis under load, outages;
//! * [`replacement`]: both stores overwrite a uniformly random instance;
//! * [`decisions`]: the same log of the engine's decisions, persisted by both stores, gives the
//!   same model;
//! * [`ticket_rules`]: the Redis store's ticket script answers as the Rust rule does, case by
//!   case;
//! * [`group_commit`]: when the embedded store's group commit starts (`CommitPacing`);
//! * [`journal`]: the embedded store's update journal: checkpoints, recovery from a crash copy,
//!   a lost journal;
//! * [`identity`]: model identity under races, tickets, quarantine, failing closed;
//! * [`refusals`]: the `reason` of a refused ticket's 409 and a refused update's 422, the same
//!   from both stores;
//! * [`hostile`]: anonymous clients: a draw flood against honest tickets, updates refused before
//!   their body is read;
//! * [`stall`]: a frozen data directory turns writes and `/healthz` to 503, and the server
//!   recovers when the disk does;
//! * [`limits`]: timeouts, the connection cap, shutdown, bounded reads and validation limits;
//! * [`secagg`]: secure-aggregation rounds over a real socket with the embedded round store;
//! * [`secagg_store`]: the `RoundStore` contract against both stores, and the Redis round
//!   store's prefixes, outages and durability;
//! * [`secagg_redis`]: several server processes serving one round from one Redis.
//!
//! Tests that need `redis-server` are ignored, with the reason "redis-server not on PATH", when
//! the build script did not find it (and the build fails under `CI` instead).

mod api;
mod common;
mod decisions;
mod group_commit;
mod hostile;
mod identity;
mod journal;
mod limits;
mod redis;
mod redis_durability;
mod refusals;
mod replacement;
mod secagg;
mod secagg_redis;
mod secagg_store;
mod serving;
mod socket;
mod stall;
mod ticket_rules;
