//! Generators for the bindings: OS-seeded by default, explicitly seeded for experiments.
//!
//! `seed=None` draws a 256-bit key from the operating system (getrandom). `seed=` accepts an
//! `int` in `[0, 2^64)` (expanded exactly as the Rust API's `seeded_rng_for_experiments`, so a
//! Python run and a Rust run with the same seed draw the same noise), 32 `bytes`, or a `str` of
//! 64 hex digits (a full 256-bit key). Seeds are for experiments: anyone who knows one can undo
//! the privacy.

use crate::errors::invalid;
use privfed_mechanisms::rng::{NoiseRng, seeded_rng_for_experiments};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString};
use rand::{Rng, SeedableRng};
use std::sync::Mutex;
use zeroize::Zeroizing;

/// A fresh key from the operating system.
pub fn os_key() -> PyResult<Zeroizing<[u8; 32]>> {
    let mut k = Zeroizing::new([0u8; 32]);
    getrandom::fill(k.as_mut()).map_err(|e| {
        pyo3::exceptions::PyOSError::new_err(format!(
            "the operating system's random generator failed: {e}"
        ))
    })?;
    Ok(k)
}

/// Parses 64 hex digits (an optional `0x` prefix allowed).
pub(crate) fn hex_key(s: &str) -> Option<[u8; 32]> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() != 64 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut b = [0u8; 32];
    for (i, out) in b.iter_mut().enumerate() {
        *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(b)
}

/// The generator for `seed` (see the module docs).
pub fn rng_from_seed(seed: Option<&Bound<'_, PyAny>>) -> PyResult<NoiseRng> {
    let Some(seed) = seed.filter(|s| !s.is_none()) else {
        return Ok(NoiseRng::from_seed(*os_key()?));
    };
    if seed.is_instance_of::<PyInt>() {
        let v: u64 = seed.extract().map_err(|_| {
            invalid(
                "seed",
                "an int seed must lie in [0, 2**64); for a 256-bit seed pass 32 bytes or 64 hex digits",
            )
        })?;
        return Ok(seeded_rng_for_experiments(v));
    }
    if let Ok(b) = seed.cast::<PyBytes>() {
        let bytes = b.as_bytes();
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| invalid("seed", format!("expected 32 bytes, got {}", bytes.len())))?;
        return Ok(NoiseRng::from_seed(key));
    }
    if let Ok(s) = seed.cast::<PyString>() {
        let s = s.to_cow()?;
        return hex_key(&s)
            .map(NoiseRng::from_seed)
            .ok_or_else(|| invalid("seed", format!("expected 64 hex digits, got {s:?}")));
    }
    Err(invalid(
        "seed",
        format!(
            "expected None, an int, 32 bytes or 64 hex digits; got {}",
            seed.get_type().name()?
        ),
    ))
}

/// A generator shared by the calls on one Python object. Each call forks a child generator
/// keyed by 256 bits drawn from the parent under the lock, so calls from several Python threads
/// run in parallel and a seeded object gives the same outputs for the same sequence of calls.
pub struct SharedRng(Mutex<NoiseRng>);

impl SharedRng {
    /// From a `seed=` argument.
    pub fn new(seed: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self(Mutex::new(rng_from_seed(seed)?)))
    }

    /// A child generator for one call.
    pub fn fork(&self) -> NoiseRng {
        let mut key = Zeroizing::new([0u8; 32]);
        // A poisoned lock only means another call panicked while drawing 32 bytes; the
        // generator's state is still valid.
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.fill_bytes(key.as_mut());
        NoiseRng::from_seed(*key)
    }
}

/// The cores the OS reports, read once: `available_parallelism` reads cgroup files on Linux
/// (measured: ~40 µs per call, 5× a whole d = 1000 PrivUnit2 privatization).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The number of threads for `threads=None` (every core the OS reports) or a given count.
pub fn threads(threads: Option<usize>) -> PyResult<privfed_mechanisms::rng::Threads> {
    match threads {
        None => Ok(privfed_mechanisms::rng::Threads::new(cores())),
        Some(0) => Err(invalid("threads", "must be at least 1 (None: every core)")),
        Some(n) => Ok(privfed_mechanisms::rng::Threads::new(n)),
    }
}
