//! Where the tests find the team's shared datasets.

use std::path::PathBuf;

/// The team's shared datasets beside the repository (`shared/data`, with `mnist/`, `adult/` and
/// `tinyshakespeare/`), as the test suites find them. The tests that read them run only with
/// their crate's `cfg(has_shared_data)` (set by the crate's `build.rs` when the directory is
/// there, and always under `CI`, so a missing copy fails them there instead of skipping).
pub fn shared_data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data")
}
