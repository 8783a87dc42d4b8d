//! What the store's measurement examples share: positional arguments with defaults, and a
//! uniquely named scratch path.

use std::path::PathBuf;

/// The `n`-th command-line argument as a number, or `default` when it is absent.
pub fn arg(n: usize, default: usize) -> Result<usize, Box<dyn std::error::Error>> {
    Ok(match std::env::args().nth(n) {
        Some(s) => s.parse()?,
        None => default,
    })
}

/// `privfed-{what}-{pid}-{random}` inside the directory given as argument `n` (default: the
/// system temp dir); nothing is created.
pub fn scratch(n: usize, what: &str) -> PathBuf {
    std::env::args()
        .nth(n)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!(
            "privfed-{what}-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ))
}
