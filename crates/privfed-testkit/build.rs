//! Sets `cfg(has_redis_server)` for the kit's own test of `sys::RedisServer`, with the same
//! probe every crate's `build.rs` uses (the kit cannot be its own build-dependency, so the probe's
//! source is included here).

#[allow(dead_code)]
#[path = "src/probe.rs"]
mod probe;

fn main() {
    probe::redis_server();
}
