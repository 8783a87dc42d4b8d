//! Sets `cfg(has_shared_data)` when the team's shared datasets are beside the repository, so the
//! tests on MNIST and Adult run (`privfed_testkit::probe`).

fn main() {
    privfed_testkit::probe::shared_data(&["mnist", "adult"]);
}
