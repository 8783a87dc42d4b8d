//! Masks: vectors uniform over Z_{2^b}, expanded from a 256-bit seed by the ChaCha20 stream
//! cipher (RFC 8439; key = the seed, nonce = 0, since every seed masks one vector only).
//!
//! Each coordinate is the low `b` bits of the next little-endian keystream word (4 bytes when
//! b ≤ 32, else 8). Because 2^b divides 2^32 (or 2^64), every residue is reached with the same
//! probability: the mask is exactly uniform given a uniform keystream, and every value,
//! including 2^b − 1, is possible.

use chacha20::ChaCha20;
use chacha20::cipher::{KeyIvInit, StreamCipher};
use zeroize::Zeroize;

/// Keystream bytes produced per call of the cipher (a multiple of its 64-byte block).
const BUFFER: usize = 4096;

/// `2^b − 1`: the mask of the low `b` bits, for `b` in 1..=64.
pub fn modulus_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Whether a mask is added to or subtracted from the accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    /// acc ← acc + mask (mod 2^b).
    Add,
    /// acc ← acc − mask (mod 2^b).
    Subtract,
}

/// Adds (or subtracts) the mask expanded from `seed` to `acc`, coordinate by coordinate, modulo
/// 2^`bits`. `acc`'s entries must already be below 2^`bits`; they stay so.
pub fn apply_mask(acc: &mut [u64], seed: &[u8; 32], bits: u32, sign: Sign) {
    let m = modulus_mask(bits);
    let mut cipher = ChaCha20::new(seed.into(), &[0u8; 12].into());
    let mut buf = [0u8; BUFFER];
    let word = if bits <= 32 { 4 } else { 8 };
    let per_buffer = BUFFER / word;
    for block in acc.chunks_mut(per_buffer) {
        let bytes = &mut buf[..block.len() * word];
        cipher.write_keystream(bytes);
        if word == 4 {
            for (a, w) in block.iter_mut().zip(bytes.chunks_exact(4)) {
                let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64 & m;
                *a = combine(*a, v, sign) & m;
            }
        } else {
            for (a, w) in block.iter_mut().zip(bytes.chunks_exact(8)) {
                let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) & m;
                *a = combine(*a, v, sign) & m;
            }
        }
    }
    buf.zeroize();
}

#[inline(always)]
fn combine(a: u64, v: u64, sign: Sign) -> u64 {
    match sign {
        Sign::Add => a.wrapping_add(v),
        Sign::Subtract => a.wrapping_sub(v),
    }
}

/// The mask itself: `len` coordinates uniform over Z_{2^bits}.
pub fn expand(seed: &[u8; 32], bits: u32, len: usize) -> Vec<u64> {
    let mut v = vec![0u64; len];
    apply_mask(&mut v, seed, bits, Sign::Add);
    v
}

/// Raw keystream throughput reference: writes `bytes` of ChaCha20 keystream (for benchmarks
/// comparing mask expansion with the cipher alone).
pub fn keystream_sink(seed: &[u8; 32], bytes: usize) -> u8 {
    let mut cipher = ChaCha20::new(seed.into(), &[0u8; 12].into());
    let mut buf = [0u8; BUFFER];
    let mut left = bytes;
    let mut x = 0u8;
    while left > 0 {
        let n = left.min(BUFFER);
        cipher.write_keystream(&mut buf[..n]);
        x ^= buf[n - 1];
        left -= n;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_then_subtract_cancels_and_values_stay_in_range() {
        for bits in [1, 2, 7, 31, 32, 33, 61, 62, 63, 64] {
            let m = modulus_mask(bits);
            let mut acc: Vec<u64> = (0..5000u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9) & m)
                .collect();
            let orig = acc.clone();
            apply_mask(&mut acc, &[7u8; 32], bits, Sign::Add);
            assert!(acc.iter().all(|&v| v <= m));
            assert_ne!(acc, orig, "bits {bits}");
            apply_mask(&mut acc, &[7u8; 32], bits, Sign::Subtract);
            assert_eq!(acc, orig, "bits {bits}");
        }
    }

    #[test]
    fn keystream_matches_rfc8439_block() {
        // RFC 8439 §2.4.2 uses nonce 000000000000004a00000000 and counter 1; with nonce 0 and
        // counter 0 the first 64-bit word for the all-zero key is the well-known
        // 76 b8 e0 ad a0 f1 3d 90 (ChaCha20 test vector 1 of RFC 8439 §A.1).
        let v = expand(&[0u8; 32], 64, 1);
        assert_eq!(
            v[0],
            u64::from_le_bytes([0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90])
        );
        let v = expand(&[0u8; 32], 32, 1);
        assert_eq!(v[0], u32::from_le_bytes([0x76, 0xb8, 0xe0, 0xad]) as u64);
    }

    /// Every residue is reachable and equally likely: chi-square over Z_{2^b} for small b, at
    /// α = 1e-6 per width, 2^16·2^b/2^b samples per cell on average.
    #[test]
    fn masks_are_uniform_over_the_whole_ring() {
        for bits in [1u32, 2, 3, 8] {
            let cells = 1usize << bits;
            let n = 256 * cells.max(64);
            let v = expand(&[bits as u8; 32], bits, n);
            let mut counts = vec![0u64; cells];
            for x in v {
                counts[x as usize] += 1;
            }
            assert!(
                counts.iter().all(|&c| c > 0),
                "every value reachable at b = {bits}"
            );
            privfed_testkit::assert_chi_square_gof(
                &counts,
                &vec![1.0 / cells as f64; cells],
                1e-6,
                "mask residues",
            );
        }
        // At b = 62 the top value class is reached too: top 4 bits uniform over 16 classes.
        let v = expand(&[9u8; 32], 62, 64_000);
        let mut counts = vec![0u64; 16];
        for x in v {
            counts[(x >> 58) as usize] += 1;
        }
        privfed_testkit::assert_chi_square_gof(&counts, &[1.0 / 16.0; 16], 1e-6, "b = 62 top bits");
    }
}
