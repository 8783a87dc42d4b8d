//! Sets `cfg(has_dp_accounting)` when `python3` imports Google's `dp_accounting`, the oracle of the
//! agreement tests (`privfed_testkit::probe`).

fn main() {
    privfed_testkit::probe::python_module("dp_accounting", "pip install dp-accounting==0.6.0");
}
