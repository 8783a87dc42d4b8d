//! Sets `cfg(has_shared_data)` (MNIST and Adult beside the repository) and `cfg(has_redis_server)`
//! (the multi-process secure-aggregation tests start their own) for the integration tests
//! (`privfed_testkit::probe`).

fn main() {
    privfed_testkit::probe::shared_data(&["mnist", "adult"]);
    privfed_testkit::probe::redis_server();
}
