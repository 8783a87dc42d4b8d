//! Random number generators accepted by the mechanisms, and the one choice of generator for
//! privacy noise (the reasons, with measurements, are in `docs/RANDOMNESS.md`).
//!
//! * Every randomizer takes `rng: &mut R` with `R: Rng + CryptoRng`: a weak generator cannot be
//!   passed by accident.
//! * [`NoiseRng`] is the generator privfed uses for noise. Production code seeds it from the
//!   operating system (`rand::make_rng::<NoiseRng>()`, which needs rand's `sys_rng` feature in the
//!   calling crate; this crate does no I/O); tests and reproducible experiments use the
//!   explicitly named [`seeded_rng_for_experiments`].
//! * Large vectors are drawn in **blocks of [`BLOCK_LEN`] coordinates**, each from its own
//!   [`NoiseRng`] stream: the key is a fresh 256-bit [`StreamKey`] drawn from the caller's
//!   generator, the block index is the ChaCha stream id (nonce). The blocks are independent
//!   pseudorandom streams under the same key, so they can be filled on any number of threads and
//!   the result is bit-for-bit the same for every thread count ([`for_each_block`]).

use rand::{CryptoRng, Rng, SeedableRng};
use std::num::NonZeroUsize;

/// The generator for privacy noise: ChaCha12 (rand 0.10 / the `chacha20` crate, AVX2 or NEON
/// backend chosen at run time). Changing this alias changes the generator everywhere.
pub type NoiseRng = rand::rngs::ChaCha12Rng;

/// The generator used for seeded runs: the same cipher as production noise.
pub type ExperimentRng = NoiseRng;

/// A [`NoiseRng`] seeded from a `u64`, **for tests and reproducible experiments only**: anyone who
/// knows the seed can reproduce the noise and undo the privacy. The `u64` is expanded to a
/// 256-bit key by rand's `seed_from_u64` (a PCG32 stream), so distinct seeds give unrelated
/// streams; the security of the noise rests entirely on the seed being secret, and a 64-bit seed
/// is guessable: never use this for a real release.
pub fn seeded_rng_for_experiments(seed: u64) -> ExperimentRng {
    ExperimentRng::seed_from_u64(seed)
}

/// Number of coordinates drawn from one generator stream when a vector is split across threads.
///
/// Part of the output's definition: changing it changes every seeded vector longer than one
/// block. `2^14` coordinates (128 KiB of `f64`) keep a block in L2 cache while making the
/// per-block cost (one key setup, one thread hand-off) negligible.
pub const BLOCK_LEN: usize = 1 << 14;

/// A 256-bit key from which independent [`NoiseRng`] streams are derived, one per block.
///
/// Drawn fresh from the caller's cryptographically secure generator for every vector, so it is
/// as secret as that generator's state.
#[derive(Clone)]
pub struct StreamKey([u8; 32]);

impl std::fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.write_str("StreamKey(..)")
    }
}

impl StreamKey {
    /// Draws a fresh key from `rng` (32 bytes of its output).
    pub fn draw<R: Rng + CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut key = [0u8; 32];
        rng.fill_bytes(&mut key);
        StreamKey(key)
    }

    /// The key with the given bytes (for tests and known-answer checks).
    pub fn from_bytes(key: [u8; 32]) -> Self {
        StreamKey(key)
    }

    /// The generator of stream `id`: ChaCha keyed with this key, nonce `id`, counter 0.
    pub fn stream(&self, id: u64) -> NoiseRng {
        let mut rng = NoiseRng::from_seed(self.0);
        rng.set_stream(id);
        rng
    }
}

/// How many threads a large draw may use. The output never depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads(NonZeroUsize);

impl Threads {
    /// One thread: everything on the caller's thread.
    pub const ONE: Threads = Threads(NonZeroUsize::MIN);

    /// `n` threads; `0` is read as one.
    pub fn new(n: usize) -> Self {
        Threads(NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN))
    }

    /// The number of threads.
    pub fn get(self) -> usize {
        self.0.get()
    }
}

impl Default for Threads {
    fn default() -> Self {
        Threads::ONE
    }
}

/// Runs `f(block, stream, chunk)` for every block of [`BLOCK_LEN`] entries of `out` (the last
/// one may be shorter), with `stream = key.stream(block)`, on up to `threads` threads, and
/// returns the per-block results **in block order**.
///
/// Each block sees only its own stream, so the contents of `out` and the returned values are
/// identical for every thread count. Callers that reduce the results (sums) must do so in the
/// returned order to keep that property.
pub fn for_each_block<T, O, F>(key: &StreamKey, out: &mut [T], threads: Threads, f: F) -> Vec<O>
where
    T: Send,
    O: Send,
    F: Fn(usize, &mut NoiseRng, &mut [T]) -> O + Sync,
{
    for_each_chunk(out, threads, |b, chunk| {
        f(b, &mut key.stream(b as u64), chunk)
    })
}

/// Runs `f(block, chunk)` for every block of [`BLOCK_LEN`] entries of `out` on up to `threads`
/// threads (contiguous runs of whole blocks per thread; one thread runs inline) and returns the
/// results in block order. For the deterministic passes that need no randomness.
pub fn for_each_chunk<T, O, F>(out: &mut [T], threads: Threads, f: F) -> Vec<O>
where
    T: Send,
    O: Send,
    F: Fn(usize, &mut [T]) -> O + Sync,
{
    let blocks = out.len().div_ceil(BLOCK_LEN);
    let threads = threads.get().min(blocks).max(1);
    if threads == 1 {
        return out
            .chunks_mut(BLOCK_LEN)
            .enumerate()
            .map(|(b, chunk)| f(b, chunk))
            .collect();
    }
    let per_thread = blocks.div_ceil(threads);
    let f = &f;
    let run_of = move |t: usize, run: &mut [T]| -> Vec<O> {
        run.chunks_mut(BLOCK_LEN)
            .enumerate()
            .map(|(i, chunk)| f(t * per_thread + i, chunk))
            .collect()
    };
    std::thread::scope(|s| {
        let mut runs = out.chunks_mut(per_thread * BLOCK_LEN);
        let first = runs.next();
        // The other runs on spawned threads, the first on the caller's (one spawn fewer).
        let handles: Vec<_> = runs
            .enumerate()
            .map(|(t, run)| s.spawn(move || run_of(t + 1, run)))
            .collect();
        let mut results = first.map(|run| run_of(0, run)).unwrap_or_default();
        for h in handles {
            // A panic in a worker is a bug in `f`, not an input error: re-raise it here.
            results.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        results
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn streams_differ_and_are_reproducible() {
        let key = StreamKey::from_bytes([7u8; 32]);
        let a: [u64; 4] = key.stream(0).random();
        let b: [u64; 4] = key.stream(1).random();
        let a2: [u64; 4] = key.stream(0).random();
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_eq!(format!("{key:?}"), "StreamKey(..)");
    }

    #[test]
    fn blocks_are_identical_for_every_thread_count() {
        let key = StreamKey::draw(&mut seeded_rng_for_experiments(3));
        // Lengths: below one block, exactly two blocks, and a ragged tail.
        for len in [100, 2 * BLOCK_LEN, 5 * BLOCK_LEN + 17] {
            let fill = |b: usize, rng: &mut NoiseRng, chunk: &mut [u64]| {
                chunk.iter_mut().for_each(|v| *v = rng.next_u64());
                (b, chunk.len())
            };
            let mut one = vec![0u64; len];
            let r1 = for_each_block(&key, &mut one, Threads::ONE, fill);
            for t in [2, 3, 8] {
                let mut many = vec![0u64; len];
                let rt = for_each_block(&key, &mut many, Threads::new(t), fill);
                assert_eq!(one, many, "len {len}, {t} threads");
                assert_eq!(r1, rt);
            }
            // Results come in block order and cover the vector.
            assert!(r1.iter().enumerate().all(|(i, &(b, _))| i == b));
            assert_eq!(r1.iter().map(|&(_, n)| n).sum::<usize>(), len);
        }
        assert_eq!(Threads::new(0), Threads::ONE);
    }
}
