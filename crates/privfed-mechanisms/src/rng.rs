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
//!   generator, the block index is the stream id (the counter block's upper half). The blocks are independent
//!   pseudorandom streams under the same key, so they can be filled on any number of threads and
//!   the result is bit-for-bit the same for every thread count ([`for_each_block`]).

use aes::cipher::{BlockCipherEncrypt, KeyInit};
use rand::{CryptoRng, Rng, SeedableRng, TryCryptoRng, TryRng};
use std::convert::Infallible;
use std::num::NonZeroUsize;
use zeroize::Zeroize;

/// The generator for privacy noise. Changing this alias changes the generator everywhere (and
/// every seeded output).
pub type NoiseRng = AesCtrRng;

/// Bytes of keystream buffered for word-at-a-time draws (256 AES blocks; 1 KiB cost 20% more per
/// word in the per-call overhead of the cipher, measured with `bench_encode`).
const BUF_LEN: usize = 4096;
const BUF_BLOCKS: usize = BUF_LEN / 16;

/// AES-256 in counter mode as a cryptographically secure generator: the keystream of AES-256
/// under a 256-bit key, with 128-bit counter blocks `stream id (64 bits, big-endian) ‖ block
/// counter (64 bits, big-endian, from 0)` — the construction of NIST SP 800-90A's CTR_DRBG
/// core, without its reseeding layer (keys are fresh per vector, see [`StreamKey`]).
///
/// * `from_seed(key)` is stream 0; [`set_stream`](Self::set_stream) selects another stream
///   (`2^64` streams of `2^64` blocks each per key).
/// * Words are little-endian readings of the keystream in order; `fill_bytes` copies it.
/// * AES-NI / VAES (x86) or the ARMv8 cryptography extensions are used when the CPU has them
///   (detected at run time); otherwise RustCrypto's constant-time bitsliced software AES. The
///   output is the same either way.
/// * The key, the expanded key schedule and buffered keystream are zeroized on drop.
pub struct AesCtrRng {
    key: [u8; 32],
    stream: u64,
    cipher: aes::Aes256,
    /// Counter of the next block to encrypt.
    counter: u64,
    buf: [aes::Block; BUF_BLOCKS],
    /// Next unread byte of `buf` (`BUF_LEN` when empty).
    pos: usize,
}

impl AesCtrRng {
    /// The generator of stream `id` under `key`.
    pub fn with_stream(key: [u8; 32], id: u64) -> Self {
        AesCtrRng {
            cipher: aes::Aes256::new(&key.into()),
            key,
            stream: id,
            counter: 0,
            buf: [aes::Block::default(); BUF_BLOCKS],
            pos: BUF_LEN,
        }
    }

    /// Restarts at the beginning of stream `id` (discarding anything buffered).
    pub fn set_stream(&mut self, id: u64) {
        *self = AesCtrRng::with_stream(self.key, id);
    }

    /// The keystream of the next `blocks.len()` counter blocks, in place: counter mode written
    /// out (the blocks `id ‖ counter`, encrypted as one batch so the cipher's parallel path runs
    /// over all of them; the `ctr` crate's per-call block generation cost a third as much again
    /// as the encryption, perf). After `2⁶⁴` blocks (`2⁶⁸` bytes) a stream would repeat; nothing
    /// draws that much.
    fn keystream_blocks(
        cipher: &aes::Aes256,
        stream: u64,
        counter: &mut u64,
        blocks: &mut [aes::Block],
    ) {
        let id = stream.to_be_bytes();
        for b in blocks.iter_mut() {
            b[..8].copy_from_slice(&id);
            b[8..].copy_from_slice(&counter.to_be_bytes());
            *counter = counter.wrapping_add(1);
        }
        cipher.encrypt_blocks(blocks);
    }

    fn refill(&mut self) {
        Self::keystream_blocks(&self.cipher, self.stream, &mut self.counter, &mut self.buf);
        self.pos = 0;
    }

    fn buffered(&self) -> &[u8] {
        aes::Block::slice_as_flattened(&self.buf)
    }

    /// The next `N` keystream bytes.
    #[inline]
    fn take<const N: usize>(&mut self) -> [u8; N] {
        if self.pos + N > BUF_LEN {
            // Bytes left over (only after mixed 4- and 8-byte reads) are skipped.
            self.refill();
        }
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buffered()[self.pos..self.pos + N]);
        self.pos += N;
        out
    }
}

impl Clone for AesCtrRng {
    /// The same generator at the same position.
    fn clone(&self) -> Self {
        let mut c = AesCtrRng::with_stream(self.key, self.stream);
        c.counter = self.counter;
        c.buf = self.buf;
        c.pos = self.pos;
        c
    }
}

impl std::fmt::Debug for AesCtrRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material or keystream.
        f.write_str("AesCtrRng(..)")
    }
}

impl Drop for AesCtrRng {
    fn drop(&mut self) {
        self.key.zeroize();
        aes::Block::slice_as_flattened_mut(&mut self.buf).zeroize();
    }
}

impl TryRng for AesCtrRng {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(u32::from_le_bytes(self.take::<4>()))
    }

    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(u64::from_le_bytes(self.take::<8>()))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        // Buffered bytes first, then whole blocks of keystream straight into `dst`, then the
        // start of a fresh buffer for a partial last block: the keystream in order either way.
        let n = dst.len().min(BUF_LEN - self.pos);
        let (head, tail) = dst.split_at_mut(n);
        head.copy_from_slice(&self.buffered()[self.pos..self.pos + n]);
        self.pos += n;
        if !tail.is_empty() {
            let (blocks, rest) = aes::Block::slice_as_chunks_mut(tail);
            Self::keystream_blocks(&self.cipher, self.stream, &mut self.counter, blocks);
            if !rest.is_empty() {
                self.refill();
                let r = rest.len();
                rest.copy_from_slice(&self.buffered()[..r]);
                self.pos = r;
            }
        }
        Ok(())
    }
}

impl TryCryptoRng for AesCtrRng {}

impl SeedableRng for AesCtrRng {
    type Seed = [u8; 32];

    fn from_seed(seed: [u8; 32]) -> Self {
        AesCtrRng::with_stream(seed, 0)
    }
}

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

    /// The generator of stream `id` under this key (counter 0).
    pub fn stream(&self, id: u64) -> NoiseRng {
        NoiseRng::with_stream(self.0, id)
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
///
/// Several threads come from a persistent pool of exactly that many workers, built on first use
/// and kept for the process (a thread spawned per call cost ~75 µs on the 2-core test machine);
/// if a pool cannot be built, scoped threads are spawned instead. Either way the same runs of
/// blocks are computed, so the results do not depend on it.
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
    if let Some(pool) = pool(threads) {
        use rayon::prelude::*;
        let runs: Vec<Vec<O>> = pool.install(|| {
            out.par_chunks_mut(per_thread * BLOCK_LEN)
                .enumerate()
                .map(|(t, run)| run_of(t, run))
                .collect()
        });
        return runs.into_iter().flatten().collect();
    }
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

/// The persistent pool of `threads` workers (built on first use; `None` if the operating system
/// refused the threads).
fn pool(threads: usize) -> Option<std::sync::Arc<rayon::ThreadPool>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .ok()?;
    if let Some(p) = pools.get(&threads) {
        return Some(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("privfed-noise-{i}"))
            .build()
            .ok()?,
    );
    pools.insert(threads, p.clone());
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    /// `AES-256_K(block)` for the FIPS-197 C.3 key `00 01 … 1f`, computed with OpenSSL 3.0
    /// (`openssl enc -aes-256-ctr -K 0001…1f -iv 0011223344556677 0000000000000000` on 48 zero
    /// bytes): the keystream of stream `0x0011223344556677` from counter 0.
    const KAT_STREAM: u64 = 0x0011_2233_4455_6677;
    const KAT: &str = "ed3eb1123cbcb8ad0164e6c3eb0dc53ec9942f30306784d0e9ea87ffd1d33a8234ff0b13560333adb82ad98a0b3cef3a";

    fn kat_key() -> [u8; 32] {
        std::array::from_fn(|i| i as u8)
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn keystream_matches_openssl_aes_256_ctr() {
        // Whole, split at odd offsets, and through words: the same keystream in order.
        let mut a = AesCtrRng::with_stream(kat_key(), KAT_STREAM);
        let mut out = [0u8; 48];
        a.fill_bytes(&mut out);
        assert_eq!(hex(&out), KAT);
        let mut b = AesCtrRng::from_seed(kat_key());
        b.set_stream(KAT_STREAM);
        let mut out = [0u8; 48];
        let (x, rest) = out.split_at_mut(5);
        b.fill_bytes(x);
        let (y, z) = rest.split_at_mut(20);
        b.fill_bytes(y);
        b.fill_bytes(z);
        assert_eq!(hex(&out), KAT);
        let mut c = AesCtrRng::with_stream(kat_key(), KAT_STREAM);
        let words: Vec<u8> = (0..6).flat_map(|_| c.next_u64().to_le_bytes()).collect();
        assert_eq!(hex(&words), KAT);
        // A word read after a partial fill continues from the buffer, in order.
        let mut d = AesCtrRng::with_stream(kat_key(), KAT_STREAM);
        let w0 = d.next_u64();
        let mut mid = [0u8; 8];
        d.fill_bytes(&mut mid);
        assert_eq!(hex(&w0.to_le_bytes()), KAT[..16]);
        assert_eq!(hex(&mid), KAT[16..32]);
        assert_eq!(hex(&d.next_u32().to_le_bytes()), KAT[32..40]);
    }

    /// Far past the KAT's three blocks (several buffers, a direct fill with a partial last
    /// block, words after it) against RustCrypto's own counter mode, `ctr::Ctr64BE<Aes256>`
    /// (the implementation this generator used before writing counter mode out).
    #[test]
    fn long_keystream_matches_the_ctr_crate() {
        use aes::cipher::{KeyIvInit, StreamCipher};
        let key = [0x5au8; 32];
        let mut iv = [0u8; 16];
        iv[..8].copy_from_slice(&77u64.to_be_bytes());
        let mut want = vec![0u8; 3 * BUF_LEN + 1000];
        ctr::Ctr64BE::<aes::Aes256>::new(&key.into(), &iv.into()).apply_keystream(&mut want);
        let mut g = AesCtrRng::with_stream(key, 77);
        let mut got = Vec::new();
        got.extend((0..700).flat_map(|_| g.next_u64().to_le_bytes()));
        let mut direct = vec![0u8; BUF_LEN + 4093];
        g.fill_bytes(&mut direct);
        got.extend(&direct);
        while got.len() < want.len() {
            got.extend(g.next_u64().to_le_bytes());
        }
        got.truncate(want.len());
        assert!(got == want, "keystream differs from ctr::Ctr64BE");
    }

    #[test]
    fn long_fills_cross_the_buffer_and_match_words() {
        // Words straddling many refills equal one long fill of the same stream.
        let mut a = AesCtrRng::with_stream([9u8; 32], 5);
        let mut b = a.clone();
        let mut long = vec![0u8; 8 * 1000 + 24];
        a.fill_bytes(&mut long);
        let words: Vec<u8> = (0..1003).flat_map(|_| b.next_u64().to_le_bytes()).collect();
        assert_eq!(long, words);
        assert_eq!(format!("{a:?}"), "AesCtrRng(..)");
        // A clone taken mid-block (after a 3-byte fill) continues exactly like the original.
        a.fill_bytes(&mut [0u8; 3]);
        let mut c = a.clone();
        let (x, y): (Vec<u64>, Vec<u64>) = (0..300).map(|_| (a.next_u64(), c.next_u64())).unzip();
        assert_eq!(x, y);
    }

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
