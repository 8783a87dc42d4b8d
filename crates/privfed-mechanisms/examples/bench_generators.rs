//! Measures candidate generators for privacy noise on this machine: bytes per second and the cost
//! of 10^6 standard normals (the floor of PrivUnit2 at d = 10^6), per generator.
//!
//! ```sh
//! cargo run --release -p privfed-mechanisms --example bench_generators
//! ```
//!
//! Not a test: the numbers go to `docs/RANDOMNESS.md` and `BENCHMARKS.md`.

use aes::cipher::{KeyIvInit, StreamCipher};
use privfed_mechanisms::batch::fill_normal;
use privfed_mechanisms::rng::NoiseRng;
use rand::rngs::{ChaCha8Rng, ChaCha12Rng, ChaCha20Rng};
use rand::{Rng, SeedableRng, TryCryptoRng, TryRng};
use rand_distr::{Distribution, StandardNormal};
use std::convert::Infallible;
use std::time::Instant;

/// AES-128 in counter mode (RustCrypto `aes` + `ctr`, AES-NI/VAES chosen at run time) as a
/// buffered generator, for this measurement only (privfed's `NoiseRng` is AES-256-CTR).
struct AesCtrRng {
    cipher: ctr::Ctr64LE<aes::Aes128>,
    buf: Box<[u8; 4096]>,
    pos: usize,
}

impl AesCtrRng {
    fn new(key: [u8; 16]) -> Self {
        AesCtrRng {
            cipher: ctr::Ctr64LE::<aes::Aes128>::new(&key.into(), &[0u8; 16].into()),
            buf: Box::new([0u8; 4096]),
            pos: 4096,
        }
    }
    fn refill(&mut self) {
        self.buf.fill(0);
        self.cipher.apply_keystream(&mut self.buf[..]);
        self.pos = 0;
    }
}

impl TryRng for AesCtrRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.try_next_u64()? as u32)
    }
    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        if self.pos + 8 > self.buf.len() {
            self.refill();
        }
        let w = u64::from_le_bytes(
            self.buf[self.pos..self.pos + 8]
                .try_into()
                .unwrap_or([0; 8]),
        );
        self.pos += 8;
        Ok(w)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.fill(0);
        self.cipher.apply_keystream(dst);
        Ok(())
    }
}
impl TryCryptoRng for AesCtrRng {}

/// Median over `reps` runs of `f`, in seconds.
fn median(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

fn row<R: Rng>(name: &str, rng: &mut R, reps: usize) {
    const N: usize = 1_000_000;
    let mut bytes = vec![0u8; 8 * N];
    let t_fill = median(reps, || rng.fill_bytes(&mut bytes));
    let mut words = vec![0u64; N];
    let t_word = median(reps, || words.iter_mut().for_each(|w| *w = rng.next_u64()));
    let mut out = vec![0.0; N];
    let t_norm = median(reps, || fill_normal(rng, &mut out));
    let t_rd = median(reps, || {
        out.iter_mut()
            .for_each(|o| *o = StandardNormal.sample(&mut *rng))
    });
    println!(
        "{name:<28} {:>9.3} {:>11.3} {:>13.3} {:>13.3}",
        t_fill * 1e9 / (8 * N) as f64,
        t_word * 1e9 / N as f64,
        t_norm * 1e3,
        t_rd * 1e3
    );
    std::hint::black_box((&bytes, &words, &out));
}

fn cipher_row<C: StreamCipher>(name: &str, c: &mut C, reps: usize) {
    let mut bytes = vec![0u8; 8_000_000];
    let t = median(reps, || c.apply_keystream(&mut bytes));
    println!("{name:<28} {:>9.3}", t * 1e9 / bytes.len() as f64);
    std::hint::black_box(&bytes);
}

fn main() {
    let reps = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(21);
    // `bench_generators REPS normals:GEN` draws only normals with one generator (for `perf stat`).
    if let Some(only) = std::env::args().nth(2) {
        let mut out = vec![0.0; 1_000_000];
        let seed = [7u8; 32];
        let t = match only.as_str() {
            "normals:chacha8" => median(reps, || {
                fill_normal(&mut ChaCha8Rng::from_seed(seed), &mut out)
            }),
            "normals:chacha12" => median(reps, || {
                fill_normal(&mut ChaCha12Rng::from_seed(seed), &mut out)
            }),
            "normals:chacha20" => median(reps, || {
                fill_normal(&mut ChaCha20Rng::from_seed(seed), &mut out)
            }),
            "normals:aes" => median(reps, || {
                fill_normal(&mut AesCtrRng::new([7u8; 16]), &mut out)
            }),
            "normals:noise" => median(reps, || {
                fill_normal(&mut NoiseRng::from_seed(seed), &mut out)
            }),
            "rand_distr:chacha20" => {
                let mut rng = ChaCha20Rng::from_seed(seed);
                median(reps, || {
                    out.iter_mut()
                        .for_each(|o| *o = StandardNormal.sample(&mut rng))
                })
            }
            "rand_distr:chacha8" => {
                let mut rng = ChaCha8Rng::from_seed(seed);
                median(reps, || {
                    out.iter_mut()
                        .for_each(|o| *o = StandardNormal.sample(&mut rng))
                })
            }
            other => panic!("unknown case {other}"),
        };
        println!("{only}: {:.3} ms per 10^6", t * 1e3);
        std::hint::black_box(&out);
        return;
    }
    println!("median of {reps} runs; 10^6 draws per run");
    println!(
        "{:<28} {:>9} {:>11} {:>13} {:>13}",
        "generator", "ns/byte", "ns/next_u64", "ms/1e6 normal", "ms rand_distr"
    );
    let seed = [7u8; 32];
    row(
        "ChaCha8Rng (rand 0.10)",
        &mut ChaCha8Rng::from_seed(seed),
        reps,
    );
    row(
        "ChaCha12Rng (rand 0.10)",
        &mut ChaCha12Rng::from_seed(seed),
        reps,
    );
    row(
        "ChaCha20Rng (rand 0.10)",
        &mut ChaCha20Rng::from_seed(seed),
        reps,
    );
    row(
        "AES-128-CTR (aes+ctr)",
        &mut AesCtrRng::new([7u8; 16]),
        reps,
    );
    row(
        "AES-256-CTR (NoiseRng)",
        &mut NoiseRng::from_seed(seed),
        reps,
    );
    println!("stream ciphers, keystream into an 8 MB buffer:");
    let (k, n) = ([7u8; 32], [0u8; 12]);
    cipher_row(
        "chacha20::ChaCha8",
        &mut chacha20::ChaCha8::new(&k.into(), &n.into()),
        reps,
    );
    cipher_row(
        "chacha20::ChaCha12",
        &mut chacha20::ChaCha12::new(&k.into(), &n.into()),
        reps,
    );
    cipher_row(
        "chacha20::ChaCha20",
        &mut chacha20::ChaCha20::new(&k.into(), &n.into()),
        reps,
    );
    let mut aes = ctr::Ctr64LE::<aes::Aes128>::new(&[7u8; 16].into(), &[0u8; 16].into());
    cipher_row("AES-128-CTR (aes+ctr)", &mut aes, reps);
    let mut aes = ctr::Ctr64BE::<aes::Aes256>::new(&seed.into(), &[0u8; 16].into());
    cipher_row("AES-256-CTR (aes+ctr)", &mut aes, reps);
}
