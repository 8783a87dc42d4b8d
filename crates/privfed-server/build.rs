//! Sets `cfg(has_redis_server)` for the Redis integration tests (`privfed_testkit::probe`).

fn main() {
    privfed_testkit::probe::redis_server();
}
