//! Arithmetic in `Z_{2^b}` (`b ≤ 62`), held in `u64`: the only thing secure aggregation lets the
//! server see is the sum of the clients' vectors in this ring.

use crate::error::{DistributedError, Result};
use crate::params::MAX_BITS;

fn check_bits(bits: u32) -> Result<()> {
    if (1..=MAX_BITS).contains(&bits) {
        Ok(())
    } else {
        Err(DistributedError::invalid(
            "bits",
            bits as f64,
            format!("must be in 1..={MAX_BITS}"),
        ))
    }
}

/// `2^b − 1`.
fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// `v mod 2^b` in `[0, 2^b)` (two's complement wrap, correct for negative `v`).
pub fn wrap(v: i64, bits: u32) -> u64 {
    (v as u64) & mask(bits)
}

/// The signed representative of `x ∈ [0, 2^b)` in `[−2^{b−1}, 2^{b−1})`.
#[inline(always)]
pub fn to_signed(x: u64, bits: u32) -> i64 {
    // Sign extension of the low `bits` bits (no branch: the sum's signs are random).
    let shift = 64 - bits;
    ((x << shift) as i64) >> shift
}

/// `1.5·2⁵²`: an integer-valued `|r| < 2⁵¹` plus this lands in `[2⁵², 2⁵³)`, where the `f64`'s
/// bits are those of the constant plus `r`, so the conversions below are exact and vectorize
/// (AVX2 has no 64-bit integer ↔ float conversion).
const MAGIC: f64 = 6_755_399_441_055_744.0;

/// `v as f64` for `|v| < 2⁵¹`, exactly.
#[inline(always)]
pub(crate) fn small_i64_to_f64(v: i64) -> f64 {
    f64::from_bits(MAGIC.to_bits().wrapping_add(v as u64)) - MAGIC
}

/// `r as i64` for an integer-valued `|r| < 2⁵¹`, exactly.
#[inline(always)]
pub(crate) fn small_f64_to_i64(r: f64) -> i64 {
    (r + MAGIC).to_bits().wrapping_sub(MAGIC.to_bits()) as i64
}

/// A running sum of vectors in `Z_{2^b}^len` — the in-process stand-in for secure aggregation
/// (the secure-aggregation protocol produces the same value without anyone seeing the summands).
#[derive(Debug, Clone)]
pub struct ModularSum {
    bits: u32,
    acc: Vec<u64>,
    contributions: usize,
}

impl ModularSum {
    /// The zero vector of length `len` in `Z_{2^bits}`.
    pub fn new(bits: u32, len: usize) -> Result<Self> {
        check_bits(bits)?;
        Ok(ModularSum {
            bits,
            acc: vec![0; len],
            contributions: 0,
        })
    }

    /// Adds one client's vector. Untrusted input: the length must match and every entry must be
    /// in `[0, 2^b)`; on error nothing is added.
    pub fn add(&mut self, v: &[u64]) -> Result<()> {
        if v.len() != self.acc.len() {
            return Err(DistributedError::invalid(
                "vector",
                v.len() as f64,
                format!("length must be {}", self.acc.len()),
            ));
        }
        let m = mask(self.bits);
        if let Some(i) = v.iter().position(|&x| x > m) {
            return Err(DistributedError::invalid(
                "vector",
                v[i] as f64,
                format!("entry {i} is not in [0, 2^{})", self.bits),
            ));
        }
        for (a, &x) in self.acc.iter_mut().zip(v) {
            *a = a.wrapping_add(x) & m;
        }
        self.contributions += 1;
        Ok(())
    }

    /// The sum so far.
    pub fn value(&self) -> &[u64] {
        &self.acc
    }

    /// How many vectors were added.
    pub fn contributions(&self) -> usize {
        self.contributions
    }

    /// The bit width.
    pub fn bits(&self) -> u32 {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_and_signed_are_inverse_on_the_signed_range() {
        for bits in [1u32, 2, 8, 16, 31, 32, 62] {
            let half = 1i64 << (bits - 1);
            for v in [-half, -half + 1, -1, 0, 1, half - 1]
                .into_iter()
                .filter(|v| (-half..half).contains(v))
            {
                let w = wrap(v, bits);
                assert!(w < (1u64 << bits));
                assert_eq!(to_signed(w, bits), v, "bits={bits} v={v}");
            }
            // Outside the range: wraps by 2^b.
            assert_eq!(to_signed(wrap(half, bits), bits), -half);
        }
    }

    #[test]
    fn sum_is_the_modular_sum_of_signed_values() {
        let bits = 8;
        let xs: [i64; 5] = [100, 100, -50, 27, -300];
        let mut s = ModularSum::new(bits, 1).unwrap();
        for &x in &xs {
            s.add(&[wrap(x, bits)]).unwrap();
        }
        let total: i64 = xs.iter().sum(); // −123
        assert_eq!(to_signed(s.value()[0], bits), total);
        assert_eq!(s.contributions(), 5);
        // 62 bits: large values wrap correctly.
        let mut s = ModularSum::new(62, 2).unwrap();
        let big = (1i64 << 61) - 1;
        s.add(&[wrap(big, 62), wrap(-big, 62)]).unwrap();
        s.add(&[wrap(1, 62), wrap(-1, 62)]).unwrap();
        assert_eq!(to_signed(s.value()[0], 62), -(1i64 << 61));
        assert_eq!(to_signed(s.value()[1], 62), -big - 1);
    }

    #[test]
    fn untrusted_vectors_are_checked() {
        let mut s = ModularSum::new(4, 3).unwrap();
        assert!(s.add(&[0, 1]).is_err());
        assert!(s.add(&[0, 16, 1]).is_err());
        assert_eq!(s.contributions(), 0);
        assert_eq!(s.value(), &[0, 0, 0]);
        assert!(ModularSum::new(0, 1).is_err());
        assert!(ModularSum::new(63, 1).is_err());
    }
}
