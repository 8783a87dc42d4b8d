//! Shamir secret sharing of 32-byte secrets over the prime field GF(p), p = 2^61 − 1.
//!
//! A secret is cut into five chunks (four of 7 bytes, one of 4), each below 2^56 < p, and every
//! chunk is shared with its own random polynomial of degree t − 1 whose constant term is the
//! chunk. The share of party `x` (its client id, never 0) is the five polynomials evaluated at
//! `x`. Any `t` shares give the polynomials back by Lagrange interpolation at 0; `t − 1` shares
//! are uniformly distributed whatever the secret (each chunk is a perfectly hiding sharing), so
//! they reveal nothing. The field holds 2^61 − 2 distinct non-zero points: far beyond any
//! cohort, unlike byte-wise GF(2^8) sharing (at most 255 parties).
//!
//! [`decode`] reconstructs and traces wrong shares to their senders (Berlekamp–Welch: `w` wrong
//! shares need `t + 2w` shares; the exact guarantee is on the function); [`combine`] only
//! detects a wrong share among up to [`VERIFIED_EXTRA_SHARES`] extra ones.

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

/// A secret reconstructed by [`decode`], with the points whose shares were rejected.
pub struct Decoded {
    /// The secret.
    pub secret: Zeroizing<[u8; 32]>,
    /// The evaluation points (the senders' client ids) whose shares were rejected — off the
    /// decoded polynomial in at least one chunk, or not field elements — increasing; empty when
    /// every share was consistent.
    pub rejected: Vec<u32>,
    /// Chunks that needed Berlekamp–Welch decoding: 0 when every share was consistent, so an
    /// honest reconstruction costs one consistency check (`O(n·t)` per chunk) and nothing more.
    pub decoded_chunks: usize,
}

/// Reconstructs the secret from `n ≥ threshold` shares, **checking every share**, and, when some
/// are wrong, finding and excluding them by Berlekamp–Welch decoding: the shares of one chunk
/// are a Reed–Solomon codeword of length `n` and dimension `t` over GF(p) (Berlekamp & Welch,
/// US patent 4,633,470, 1986; Gemmell & Sudan, *Highly resilient correctors for polynomials*,
/// IPL 1992). A share's point is its sender's client id, so a wrong share is traced to its
/// sender.
///
/// Let `e = ⌊(n − t)/2⌋` and `w` the number of senders whose share is wrong (in any chunk, or
/// not a field element). The exact guarantee:
/// * `w ≤ e` (i.e. `n ≥ t + 2w`): the right secret, and `rejected` is exactly the `w` senders;
/// * `e < w ≤ n − t − e`: [`SecAggError::UntraceableShares`], never a wrong secret. (A wrong
///   output polynomial `P' ≠ P` would agree with at least `n − e` shares, since at most `e` are
///   rejected in total, and with at most `t − 1` right ones, so at least `n − t − e + 1` shares
///   would be wrong.) When `n − t` is odd this covers `w = e + 1`; when it is even it does not;
/// * `w ≥ n − t − e + 1`: senders who choose their values together can make the shares decode
///   to another secret, naming `e` honest senders as wrong — `P' = P + c·Π_{i∈S}(x − x_i)` for
///   `t − 1` honest points `S`, which each liar computes from its own share alone. No decoder
///   can tell this from `e` liars: that is the unique-decoding limit, not a property of this
///   one. With `n = t` nothing is checked (exactly as [`combine`]).
///
/// Cost: one consistency check of every share against the polynomial of the first `t`
/// (`O(n·t)` per chunk). Only when it fails, per chunk, `E` (monic, degree `e'`) and `Q`
/// (degree `< t + e'`) with `Q(x_i) = y_i·E(x_i)` are solved for by Gaussian elimination over
/// GF(p) (`O(n³)`), with `e'` the radius left after malformed shares (`e' = ⌊(n − f − t)/2⌋`
/// for `f` of them), and the chunk's polynomial is `Q/E`.
pub fn decode(shares: &[Share], threshold: usize) -> Result<Decoded> {
    if threshold == 0 || shares.len() < threshold {
        return Err(SecAggError::Aborted(format!(
            "{} shares, the threshold is {threshold}",
            shares.len()
        )));
    }
    check_points(shares.iter().map(|s| s.x))?;
    let n = shares.len();
    let e = (n - threshold) / 2;
    let untraceable = |why: String| {
        SecAggError::UntraceableShares(format!(
            "{why}; {n} shares for threshold {threshold} trace at most {e} wrong ones (w wrong \
             shares need t + 2w)"
        ))
    };
    // Shares whose values are not field elements are known to be wrong: erasures.
    let (valid, malformed): (Vec<&Share>, Vec<&Share>) =
        shares.iter().partition(|s| s.y.iter().all(|&v| v < P));
    let mut rejected: std::collections::BTreeSet<u32> = malformed.iter().map(|s| s.x).collect();
    if rejected.len() > e || valid.len() < threshold {
        return Err(untraceable(format!(
            "{} shares are not field elements",
            rejected.len()
        )));
    }
    let xs: Vec<u64> = valid.iter().map(|s| s.x as u64).collect();
    let basis = Interpolator::new(xs[..threshold].to_vec());
    let consistent = valid[threshold..].iter().all(|extra| {
        let l = basis.basis_at(extra.x as u64);
        (0..CHUNKS).all(|c| {
            valid[..threshold]
                .iter()
                .zip(&l)
                .fold(0, |acc, (s, &li)| add(acc, mul(li, s.y[c])))
                == extra.y[c]
        })
    });
    if consistent {
        let first: Vec<Share> = valid[..threshold].iter().map(|&s| s.clone()).collect();
        return Ok(Decoded {
            secret: combine(&first, threshold)?,
            rejected: rejected.into_iter().collect(),
            decoded_chunks: 0,
        });
    }
    let radius = (valid.len() - threshold) / 2;
    if radius == 0 {
        return Err(untraceable("the shares are inconsistent".into()));
    }
    let mut chunks = Zeroizing::new([0u64; CHUNKS]);
    for c in 0..CHUNKS {
        let ys: Vec<u64> = valid.iter().map(|s| s.y[c]).collect();
        let poly = berlekamp_welch(&xs, &ys, threshold, radius).ok_or_else(|| {
            untraceable(format!(
                "no polynomial of degree < {threshold} agrees with all but {radius} of them"
            ))
        })?;
        for (&x, &y) in xs.iter().zip(&ys) {
            if eval(&poly, x) != y {
                rejected.insert(x as u32);
            }
        }
        chunks[c] = poly[0];
    }
    if rejected.len() > e {
        return Err(untraceable(format!(
            "{} senders' shares are off the decoded polynomials",
            rejected.len()
        )));
    }
    Ok(Decoded {
        secret: secret_of(&chunks)?,
        rejected: rejected.into_iter().collect(),
        decoded_chunks: CHUNKS,
    })
}

/// `p(x)` by Horner's rule (coefficients from the constant term up).
fn eval(p: &[u64], x: u64) -> u64 {
    p.iter().rev().fold(0, |acc, &c| add(mul(acc, x), c))
}

/// Berlekamp–Welch: the polynomial of degree `< t` through all but at most `e` of the points,
/// if `Q = P·E` can be solved for and divides exactly; `None` otherwise.
fn berlekamp_welch(xs: &[u64], ys: &[u64], t: usize, e: usize) -> Option<Vec<u64>> {
    let n = xs.len();
    // Unknowns: q_0..q_{t+e−1}, then E's lower coefficients e_0..e_{e−1} (E monic of degree e).
    // Row i: Σ_j q_j x^j − y·Σ_k e_k x^k = y·x^e.
    let cols = t + 2 * e;
    let mut m: Vec<Vec<u64>> = Vec::with_capacity(n);
    for (&x, &y) in xs.iter().zip(ys) {
        let mut row = vec![0u64; cols + 1];
        let mut xp = 1;
        for j in 0..t + e {
            row[j] = xp;
            if j < e {
                row[t + e + j] = sub(0, mul(y, xp));
            }
            xp = mul(xp, x);
        }
        // xp is now x^{t+e}; the right-hand side needs x^e.
        row[cols] = mul(y, pow(x, e as u64));
        m.push(row);
    }
    let solution = solve(m, cols)?;
    let q = &solution[..t + e];
    let mut big_e = solution[t + e..].to_vec();
    big_e.push(1);
    divide_exact(q, &big_e)
}

/// A solution of the linear system `m` (`cols` unknowns, the last column the right-hand side)
/// over GF(p), free variables set to 0; `None` if inconsistent.
fn solve(mut m: Vec<Vec<u64>>, cols: usize) -> Option<Vec<u64>> {
    let rows = m.len();
    let mut pivots = Vec::new();
    let mut r = 0;
    for c in 0..cols {
        let Some(p) = (r..rows).find(|&i| m[i][c] != 0) else {
            continue;
        };
        m.swap(r, p);
        let inv_p = inv(m[r][c]);
        for v in m[r].iter_mut() {
            *v = mul(*v, inv_p);
        }
        let pivot_row = m[r].clone();
        for (i, row) in m.iter_mut().enumerate() {
            if i != r && row[c] != 0 {
                let f = row[c];
                for (v, &pv) in row.iter_mut().zip(&pivot_row) {
                    *v = sub(*v, mul(f, pv));
                }
            }
        }
        pivots.push(c);
        r += 1;
        if r == rows {
            break;
        }
    }
    if m[r..].iter().any(|row| row[cols] != 0) {
        return None;
    }
    let mut x = vec![0u64; cols];
    for (i, &c) in pivots.iter().enumerate() {
        x[c] = m[i][cols];
    }
    Some(x)
}

/// `a / b` when `b` (monic) divides `a` exactly; `None` if a remainder is left.
fn divide_exact(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let db = b.len() - 1;
    if a.len() <= db {
        return a.iter().all(|&v| v == 0).then(Vec::new);
    }
    let mut rem = a.to_vec();
    let mut quot = vec![0u64; a.len() - db];
    for i in (0..quot.len()).rev() {
        let coef = rem[i + db];
        quot[i] = coef;
        if coef != 0 {
            for (j, &bj) in b.iter().enumerate() {
                rem[i + j] = sub(rem[i + j], mul(coef, bj));
            }
        }
    }
    rem[..db].iter().all(|&v| v == 0).then_some(quot)
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

    /// `n` shares of a random secret at distinct random points, the secret and the points.
    fn random_sharing(r: &mut ChaCha20Rng, t: usize, n: usize) -> ([u8; 32], Vec<Share>) {
        let mut secret = [0u8; 32];
        r.fill(&mut secret[..]);
        let mut points = std::collections::BTreeSet::new();
        while points.len() < n {
            points.insert(r.random_range(1..=u32::MAX));
        }
        let mut xs: Vec<u32> = points.into_iter().collect();
        for i in (1..xs.len()).rev() {
            xs.swap(i, r.random_range(0..=i));
        }
        let shares = split(&secret, t, &xs, r).unwrap();
        (secret, shares)
    }

    /// Property test of [`decode`]'s guarantee at a fixed seed: random secrets, `t ∈ 1..=8`,
    /// `n ∈ t+1..=t+12`, `w` senders with wrong shares (random positions; random values in a
    /// random non-empty set of chunks, or a value that is not a field element). `w ≤ e`: the
    /// right secret and exactly the wrong senders; `w > e`: `UntraceableShares`. Random wrong
    /// values lie on another polynomial with at least `t + e` others only with probability
    /// below `n^(t+e)/p` per chunk (≈ 2^-61 per coincidence), so the test cannot flake; it fails
    /// if the decoder accepts a wrong secret, misses or frames a sender, or runs when not needed.
    #[test]
    fn decode_traces_up_to_e_wrong_shares_and_refuses_more() {
        let mut r = rng(9);
        let (mut traced, mut refused) = (0, 0);
        for _ in 0..600 {
            let t = r.random_range(1..=8usize);
            // n = t shares carry no redundancy: nothing can be checked (as with `combine`).
            let n = t + r.random_range(1..=12usize);
            let e = (n - t) / 2;
            let (secret, mut shares) = random_sharing(&mut r, t, n);
            let w = r.random_range(0..=n);
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                order.swap(i, r.random_range(0..=i));
            }
            let liars = &order[..w];
            for &i in liars {
                if r.random_range(0..8) == 0 {
                    shares[i].y[r.random_range(0..CHUNKS)] = P + r.random_range(0..8);
                    continue;
                }
                let mask = r.random_range(1..(1u32 << CHUNKS));
                for c in (0..CHUNKS).filter(|c| mask >> c & 1 == 1) {
                    shares[i].y[c] = add(shares[i].y[c], 1 + random_element(&mut r) % (P - 1));
                }
            }
            let mut want: Vec<u32> = liars.iter().map(|&i| shares[i].x).collect();
            want.sort_unstable();
            match decode(&shares, t) {
                Ok(d) => {
                    assert!(w <= e, "t {t} n {n}: {w} wrong shares accepted");
                    assert_eq!(*d.secret, secret, "t {t} n {n} w {w}");
                    assert_eq!(d.rejected, want, "t {t} n {n} w {w}");
                    let any_off_field = liars.iter().any(|&i| shares[i].y.iter().any(|&v| v >= P));
                    let only_malformed = liars.iter().all(|&i| shares[i].y.iter().any(|&v| v >= P));
                    assert_eq!(d.decoded_chunks == 0, only_malformed, "t {t} n {n} w {w}");
                    traced += usize::from(w > 0 && !any_off_field);
                }
                Err(SecAggError::UntraceableShares(_)) => {
                    assert!(w > e, "t {t} n {n}: {w} ≤ {e} wrong shares not traced");
                    refused += 1;
                }
                Err(other) => panic!("t {t} n {n} w {w}: {other}"),
            }
        }
        // Both branches were exercised many times.
        assert!(
            traced > 50 && refused > 50,
            "{traced} traced, {refused} refused"
        );
    }

    /// The limit, played by colluding senders: each adds `D(x) = c·Π_{i∈S}(x − x_i)` to its own
    /// share, for `t − 1` honest points `S` (no honest value needed), so the shares lie on
    /// `P + D`, whose constant term is the secret's chunk plus `D(0) = 1`. With `n − t` even,
    /// `e + 1 = n − t − e + 1` such liars make the decoder output the shifted secret and name
    /// `e` honest senders (no decoder can do better); with `n − t` odd the same `e + 1` liars
    /// are refused (`e + 1 ≤ n − t − e`), and so is every smaller coalition that is not ≤ e.
    #[test]
    fn colluders_beyond_the_margin_are_the_unique_decoding_limit() {
        let mut r = rng(10);
        for (t, n) in [(1, 3), (3, 7), (4, 10), (5, 8), (3, 8), (6, 13)] {
            let e = (n - t) / 2;
            let (secret, mut shares) = random_sharing(&mut r, t, n);
            let mut shifted = secret;
            // The first chunk is bytes 0..7, little-endian: +1 is +1 on byte 0 unless it carries.
            shifted[0] = shifted[0].wrapping_add(1);
            if shifted[0] == 0 {
                continue;
            }
            let liars = e + 1;
            // S: t − 1 honest points (the last ones); D(0) = c·Π(−x_i) = 1.
            let s_points: Vec<u64> = shares[n - (t - 1)..].iter().map(|s| s.x as u64).collect();
            let at_zero = s_points.iter().fold(1, |acc, &x| mul(acc, sub(0, x)));
            let c = inv(at_zero);
            for share in shares.iter_mut().take(liars) {
                let x = share.x as u64;
                let d = s_points.iter().fold(c, |acc, &xi| mul(acc, sub(x, xi)));
                share.y[0] = add(share.y[0], d);
            }
            let out = decode(&shares, t);
            if (n - t) % 2 == 0 {
                let d = out.expect("e + 1 colluders decode");
                assert_eq!(*d.secret, shifted, "t {t} n {n}");
                assert_eq!(d.rejected.len(), e, "t {t} n {n}");
                assert!(
                    d.rejected
                        .iter()
                        .all(|x| !shares[..liars].iter().any(|s| s.x == *x))
                );
            } else {
                assert!(
                    matches!(out, Err(SecAggError::UntraceableShares(_))),
                    "t {t} n {n}"
                );
            }
        }
    }
}
