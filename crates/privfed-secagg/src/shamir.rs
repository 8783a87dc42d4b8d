//! Shamir secret sharing of 32-byte secrets over the prime field GF(p), p = 2^61 − 1.
//!
//! A secret is cut into five chunks (four of 7 bytes, one of 4), each below 2^56 < p, and every
//! chunk is shared with its own random polynomial of degree t − 1 whose constant term is the
//! chunk. The share of party `x` (its client id, never 0) is the five polynomials evaluated at
//! `x`. Any `t` shares give the polynomials back by Lagrange interpolation at 0; `t − 1` shares
//! are uniformly distributed whatever the secret (each chunk is a perfectly hiding sharing), so
//! they reveal nothing. The field holds 2^61 − 2 distinct non-zero points: far beyond any
//! cohort, unlike byte-wise GF(2^8) sharing (at most 255 parties).

use rand::{CryptoRng, Rng};
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::error::{Result, SecAggError};

/// The field's modulus, the Mersenne prime 2^61 − 1.
pub const P: u64 = (1 << 61) - 1;

/// Field elements per shared secret.
pub const CHUNKS: usize = 5;

/// Byte length of each chunk of the secret (the last one is 4 bytes).
const CHUNK_BYTES: [usize; CHUNKS] = [7, 7, 7, 7, 4];

/// One party's share of one 32-byte secret: the polynomials evaluated at `x`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Zeroize, ZeroizeOnDrop)]
pub struct Share {
    /// The evaluation point (the holder's client id, non-zero).
    pub x: u32,
    /// The five polynomials' values at `x`, each in `[0, p)`.
    pub y: [u64; CHUNKS],
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Share {{ x: {}, y: <redacted> }}", self.x)
    }
}

fn reduce(x: u128) -> u64 {
    // x < 2^122: fold the high bits onto the low ones (2^61 ≡ 1 mod p).
    let lo = (x as u64) & P;
    let hi = (x >> 61) as u64;
    let r = lo + hi;
    // r < 2p, one subtraction suffices.
    if r >= P { r - P } else { r }
}

fn add(a: u64, b: u64) -> u64 {
    let r = a + b;
    if r >= P { r - P } else { r }
}

fn sub(a: u64, b: u64) -> u64 {
    if a >= b { a - b } else { a + P - b }
}

fn mul(a: u64, b: u64) -> u64 {
    reduce(a as u128 * b as u128)
}

fn pow(mut base: u64, mut e: u64) -> u64 {
    let mut acc = 1;
    while e > 0 {
        if e & 1 == 1 {
            acc = mul(acc, base);
        }
        base = mul(base, base);
        e >>= 1;
    }
    acc
}

/// Multiplicative inverse of a non-zero element (Fermat: a^(p−2)).
fn inv(a: u64) -> u64 {
    pow(a, P - 2)
}

/// A uniformly random field element: 61 random bits, rejecting the one value ≥ p.
fn random_element<R: Rng + CryptoRng + ?Sized>(rng: &mut R) -> u64 {
    loop {
        let v = rng.next_u64() >> 3;
        if v < P {
            return v;
        }
    }
}

fn chunks_of(secret: &[u8; 32]) -> Zeroizing<[u64; CHUNKS]> {
    let mut out = Zeroizing::new([0u64; CHUNKS]);
    let mut at = 0;
    for (c, &len) in CHUNK_BYTES.iter().enumerate() {
        let mut word = [0u8; 8];
        word[..len].copy_from_slice(&secret[at..at + len]);
        out[c] = u64::from_le_bytes(word);
        word.zeroize();
        at += len;
    }
    out
}

fn secret_of(chunks: &[u64; CHUNKS]) -> Result<Zeroizing<[u8; 32]>> {
    let mut out = Zeroizing::new([0u8; 32]);
    let mut at = 0;
    for (c, &len) in CHUNK_BYTES.iter().enumerate() {
        if chunks[c] >> (8 * len) != 0 {
            return Err(SecAggError::InconsistentShares(
                "reconstructed value is not an encoded secret".into(),
            ));
        }
        out[at..at + len].copy_from_slice(&chunks[c].to_le_bytes()[..len]);
        at += len;
    }
    Ok(out)
}

/// Splits `secret` into one share per evaluation point in `xs` (distinct, non-zero), any
/// `threshold` of which reconstruct it.
pub fn split<R: Rng + CryptoRng + ?Sized>(
    secret: &[u8; 32],
    threshold: usize,
    xs: &[u32],
    rng: &mut R,
) -> Result<Vec<Share>> {
    if threshold == 0 || threshold > xs.len() {
        return Err(SecAggError::config(
            "threshold",
            threshold,
            format!("must be in 1..={} (the number of shares)", xs.len()),
        ));
    }
    check_points(xs.iter().copied())?;
    let secret_chunks = chunks_of(secret);
    // coefficients[c][j]: coefficient of x^j of chunk c's polynomial; j = 0 is the chunk.
    let mut coefficients = Zeroizing::new(vec![[0u64; CHUNKS]; threshold]);
    coefficients[0] = *secret_chunks;
    for row in coefficients.iter_mut().skip(1) {
        for v in row.iter_mut() {
            *v = random_element(rng);
        }
    }
    Ok(xs
        .iter()
        .map(|&x| {
            let x = x as u64;
            let mut y = [0u64; CHUNKS];
            // Horner's rule from the highest degree.
            for row in coefficients.iter().rev() {
                for c in 0..CHUNKS {
                    y[c] = add(mul(y[c], x), row[c]);
                }
            }
            Share { x: x as u32, y }
        })
        .collect())
}

fn check_points(xs: impl Iterator<Item = u32>) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for x in xs {
        if x == 0 {
            return Err(SecAggError::config(
                "x",
                0,
                "evaluation points must be non-zero",
            ));
        }
        if !seen.insert(x) {
            return Err(SecAggError::InconsistentShares(format!(
                "two shares at the same point {x}"
            )));
        }
    }
    Ok(())
}

/// Interpolation through fixed points `xs`: the barycentric weights
/// `w_i = 1 / Π_{j≠i} (x_i − x_j)`, computed once in O(t²), after which the Lagrange basis at
/// any point costs O(t) (one batched inversion).
struct Interpolator {
    xs: Vec<u64>,
    weights: Vec<u64>,
}

impl Interpolator {
    fn new(xs: Vec<u64>) -> Self {
        let dens: Vec<u64> = xs
            .iter()
            .enumerate()
            .map(|(i, &xi)| {
                xs.iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .fold(1, |acc, (_, &xj)| mul(acc, sub(xi, xj)))
            })
            .collect();
        let weights = batch_inverse(&dens);
        Interpolator { xs, weights }
    }

    /// ℓ_i(z) for every i, at a point `z` that is not one of the `xs`:
    /// `ℓ_i(z) = w_i · Π_j (z − x_j) / (z − x_i)`.
    fn basis_at(&self, z: u64) -> Vec<u64> {
        let diffs: Vec<u64> = self.xs.iter().map(|&x| sub(z, x)).collect();
        let total = diffs.iter().fold(1, |acc, &d| mul(acc, d));
        batch_inverse(&diffs)
            .into_iter()
            .zip(&self.weights)
            .map(|(inv_d, &w)| mul(mul(w, total), inv_d))
            .collect()
    }
}

/// Inverses of non-zero elements with one field inversion (Montgomery's trick).
fn batch_inverse(values: &[u64]) -> Vec<u64> {
    let mut prefix = Vec::with_capacity(values.len());
    let mut acc = 1;
    for &v in values {
        prefix.push(acc);
        acc = mul(acc, v);
    }
    let mut inv_acc = inv(acc);
    let mut out = vec![0; values.len()];
    for i in (0..values.len()).rev() {
        out[i] = mul(inv_acc, prefix[i]);
        inv_acc = mul(inv_acc, values[i]);
    }
    out
}

/// How many shares beyond the threshold [`combine`] checks against the polynomial of the first
/// `threshold` (each costs O(t); the reconstruction itself uses exactly `threshold` shares).
pub const VERIFIED_EXTRA_SHARES: usize = 16;

/// Reconstructs the secret from at least `threshold` shares with distinct points. The first
/// `threshold` shares determine the polynomials; up to [`VERIFIED_EXTRA_SHARES`] further shares
/// must lie on them, or the shares are reported inconsistent (a corrupted or substituted share).
pub fn combine(shares: &[Share], threshold: usize) -> Result<Zeroizing<[u8; 32]>> {
    if threshold == 0 || shares.len() < threshold {
        return Err(SecAggError::Aborted(format!(
            "{} shares, the threshold is {threshold}",
            shares.len()
        )));
    }
    check_points(shares.iter().map(|s| s.x))?;
    if let Some(s) = shares.iter().find(|s| s.y.iter().any(|&v| v >= P)) {
        return Err(SecAggError::InconsistentShares(format!(
            "share at {} is not a field element",
            s.x
        )));
    }
    let basis = Interpolator::new(shares[..threshold].iter().map(|s| s.x as u64).collect());
    let evaluate = |l: &[u64], c: usize| {
        shares[..threshold]
            .iter()
            .zip(l)
            .fold(0, |acc, (s, &li)| add(acc, mul(li, s.y[c])))
    };
    let at_zero = basis.basis_at(0);
    let mut chunks = Zeroizing::new([0u64; CHUNKS]);
    for (c, chunk) in chunks.iter_mut().enumerate() {
        *chunk = evaluate(&at_zero, c);
    }
    for extra in shares[threshold..].iter().take(VERIFIED_EXTRA_SHARES) {
        let l = basis.basis_at(extra.x as u64);
        if (0..CHUNKS).any(|c| evaluate(&l, c) != extra.y[c]) {
            return Err(SecAggError::InconsistentShares(format!(
                "share at {} does not lie on the polynomial of the others",
                extra.x
            )));
        }
    }
    secret_of(&chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};

    fn rng(seed: u64) -> ChaCha20Rng {
        ChaCha20Rng::seed_from_u64(seed)
    }

    #[test]
    fn field_arithmetic_against_u128() {
        let mut r = rng(1);
        for _ in 0..10_000 {
            let a = random_element(&mut r);
            let b = random_element(&mut r);
            assert_eq!(mul(a, b) as u128, (a as u128 * b as u128) % P as u128);
            assert_eq!(add(a, b) as u128, (a as u128 + b as u128) % P as u128);
            assert_eq!(
                sub(a, b) as u128,
                (a as u128 + P as u128 - b as u128) % P as u128
            );
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
            }
        }
        assert_eq!(mul(P - 1, P - 1), 1);
    }

    #[test]
    fn any_t_of_n_reconstruct() {
        let mut r = rng(2);
        for (t, n) in [(1, 1), (1, 5), (3, 5), (5, 5), (7, 20), (51, 100)] {
            let mut secret = [0u8; 32];
            r.fill(&mut secret[..]);
            let xs: Vec<u32> = (1..=n).map(|i| i * 7 + 3).collect();
            let shares = split(&secret, t, &xs, &mut r).unwrap();
            for _ in 0..20 {
                // A random subset of size between t and n, in random order.
                let mut pick = shares.clone();
                for i in (1..pick.len()).rev() {
                    let j = r.random_range(0..=i);
                    pick.swap(i, j);
                }
                let k = r.random_range(t..=n as usize);
                pick.truncate(k);
                assert_eq!(*combine(&pick, t).unwrap(), secret, "t={t} n={n} k={k}");
            }
        }
    }

    #[test]
    fn fewer_than_t_shares_are_refused() {
        let mut r = rng(3);
        let shares = split(&[9u8; 32], 4, &[1, 2, 3, 4, 5], &mut r).unwrap();
        assert!(matches!(
            combine(&shares[..3], 4),
            Err(SecAggError::Aborted(_))
        ));
    }

    #[test]
    fn a_corrupted_share_is_detected_when_there_are_extra_shares() {
        let mut r = rng(4);
        let mut shares = split(&[5u8; 32], 3, &[1, 2, 3, 4], &mut r).unwrap();
        shares[3].y[2] = add(shares[3].y[2], 1);
        assert!(matches!(
            combine(&shares, 3),
            Err(SecAggError::InconsistentShares(_))
        ));
        shares[0].y[0] = P; // not a field element
        assert!(matches!(
            combine(&shares, 3),
            Err(SecAggError::InconsistentShares(_))
        ));
    }

    #[test]
    fn duplicate_or_zero_points_are_refused() {
        let mut r = rng(5);
        assert!(split(&[1u8; 32], 2, &[1, 1, 2], &mut r).is_err());
        assert!(split(&[1u8; 32], 2, &[0, 1, 2], &mut r).is_err());
        assert!(split(&[1u8; 32], 4, &[1, 2, 3], &mut r).is_err());
        assert!(split(&[1u8; 32], 0, &[1, 2, 3], &mut r).is_err());
        let shares = split(&[1u8; 32], 2, &[1, 2, 3], &mut r).unwrap();
        let dup = vec![shares[0].clone(), shares[0].clone()];
        assert!(combine(&dup, 2).is_err());
    }

    /// t − 1 shares reveal nothing: the joint distribution of the t − 1 = 2 shares' values is
    /// uniform on GF(p)² whatever the secret. Chi-square of the pair of top-two-bit bins (16
    /// cells) against uniform, for an all-zero and an all-0xff secret, at α = 1e-6 per test.
    #[test]
    fn t_minus_one_shares_are_uniform_whatever_the_secret() {
        let mut r = rng(6);
        for secret in [[0u8; 32], [0xffu8; 32]] {
            for chunk in [0, CHUNKS - 1] {
                let mut counts = vec![0u64; 16];
                for _ in 0..32_000 {
                    let shares = split(&secret, 3, &[1, 2, 3, 4], &mut r).unwrap();
                    // The top two bits of a uniform element of [0, p) are uniform to 2^-59.
                    let a = (shares[0].y[chunk] >> 59) as usize;
                    let b = (shares[1].y[chunk] >> 59) as usize;
                    counts[a * 4 + b] += 1;
                }
                privfed_testkit::assert_chi_square_gof(
                    &counts,
                    &[1.0 / 16.0; 16],
                    1e-6,
                    "two of three-threshold shares",
                );
            }
        }
    }
}
