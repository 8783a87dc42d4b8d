//! Batched exact samplers: fill a buffer with standard normals, exponentials, Laplace noise or
//! uniform residues mod `2^b`, consuming the generator's output one 64-bit word at a time in a
//! tight loop.
//!
//! Normals and exponentials use the ziggurat method (Marsaglia & Tsang, "The ziggurat method for
//! generating random variables", J. Stat. Softw. 5(8), 2000) with 256 layers of equal area `v`,
//! built here at first use:
//! * one word gives the layer (8 bits), a sign (1 bit, for normals and Laplace) and a 53-bit
//!   uniform `u ∈ (0, 1)`; `x = u·x_i` is returned at once when it lies inside the next layer's
//!   width (≈ 99% of draws for the normal);
//! * otherwise the draw is in a wedge, accepted by an exact comparison with the density (one more
//!   word), or in the base layer's tail, drawn exactly (Marsaglia's tail method for the normal,
//!   memorylessness for the exponential).
//!
//! The method is exact in real arithmetic. In `f64`, the layer boundaries solve the equal-area
//! recursion to ~1e-13 relative (the top layer's area is checked in tests), and `u` has 53 bits;
//! these are the same approximations as any floating-point ziggurat (rand_distr's included).

use rand::Rng;
use std::sync::OnceLock;

/// Number of ziggurat layers (one byte of each word selects the layer).
const LAYERS: usize = 256;

/// The layer boundaries of a ziggurat for a decreasing density `f` on `[0, ∞)` (unnormalized,
/// `f(0) = 1`).
#[derive(Debug)]
struct Ziggurat {
    /// `x[0] = v/f(r)` (the base layer as a rectangle of area `v`), `x[1] = r`, decreasing to
    /// `x[256] = 0`.
    x: [f64; LAYERS + 1],
    /// `f(x[i])`, with `fx[0] = 0` so the base layer's height range is `[0, f(r)]`.
    fx: [f64; LAYERS + 1],
    /// Tail start `r = x[1]`.
    r: f64,
    /// `±x[i]·2^-52` at index `i + 256·sign` (the fast path's scale, sign included).
    xs: [f64; 2 * LAYERS],
    /// `x[i+1]/x[i]·2^52`: a 52-bit uniform `a + ½` below it lands inside the next layer's width.
    k: [f64; LAYERS],
}

impl Ziggurat {
    /// Builds the table for density `f` (inverse `f_inv`) with tail mass `tail(r) = ∫_r^∞ f`:
    /// finds `r` by bisection so that the 255 rectangles above the base layer, each of area
    /// `v = r·f(r) + tail(r)`, reach exactly `f = 1` at the top.
    fn build(
        f: impl Fn(f64) -> f64,
        f_inv: impl Fn(f64) -> f64,
        tail: impl Fn(f64) -> f64,
    ) -> Self {
        // top(r) = f(x_255) + v/x_255 − 1 (the top layer's height minus what is left), or +∞ if
        // the recursion reaches the top early (r too small: layers too large).
        let run = |r: f64, x: &mut [f64; LAYERS + 1]| -> f64 {
            let v = r * f(r) + tail(r);
            x[0] = v / f(r);
            x[1] = r;
            for i in 1..LAYERS - 1 {
                let y = f(x[i]) + v / x[i];
                if y >= 1.0 {
                    return f64::INFINITY;
                }
                x[i + 1] = f_inv(y);
            }
            f(x[LAYERS - 1]) + v / x[LAYERS - 1] - 1.0
        };
        let mut x = [0.0; LAYERS + 1];
        let (mut lo, mut hi) = (1.0, 20.0);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if run(mid, &mut x) > 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let r = hi;
        run(r, &mut x);
        x[LAYERS] = 0.0;
        let mut fx = [0.0; LAYERS + 1];
        for i in 1..=LAYERS {
            fx[i] = f(x[i]);
        }
        fx[LAYERS] = 1.0;
        let xs = std::array::from_fn(|j| {
            let m = x[j % LAYERS] * TWO_POW_M52;
            if j < LAYERS { m } else { -m }
        });
        let k = std::array::from_fn(|i| x[i + 1] / x[i] * TWO_POW_52);
        Ziggurat { x, fx, r, xs, k }
    }

    /// Area of layer `i` as built (all equal to `v` up to rounding; `i = 0` is the base layer
    /// with its tail).
    #[cfg(test)]
    fn layer_area(&self, i: usize, tail: impl Fn(f64) -> f64) -> f64 {
        if i == 0 {
            self.r * self.fx[1] + tail(self.r)
        } else {
            self.x[i] * (self.fx[i + 1] - self.fx[i])
        }
    }
}

fn normal_density(x: f64) -> f64 {
    (-0.5 * x * x).exp()
}

fn normal_tail(r: f64) -> f64 {
    (std::f64::consts::PI / 2.0).sqrt() * libm::erfc(r / std::f64::consts::SQRT_2)
}

fn normal_table() -> &'static Ziggurat {
    static TABLE: OnceLock<Ziggurat> = OnceLock::new();
    TABLE.get_or_init(|| Ziggurat::build(normal_density, |y| (-2.0 * y.ln()).sqrt(), normal_tail))
}

fn exp_table() -> &'static Ziggurat {
    static TABLE: OnceLock<Ziggurat> = OnceLock::new();
    TABLE.get_or_init(|| Ziggurat::build(|x| (-x).exp(), |y| -y.ln(), |r| (-r).exp()))
}

// The 52- and 53-bit integers are converted through `i64`: exact (they are below 2^53) and one
// instruction on x86-64, where `u64 → f64` is a branchy sequence.

/// `2^-53`.
const TWO_POW_M53: f64 = 1.0 / (1u64 << 53) as f64;
/// `2^-52`.
const TWO_POW_M52: f64 = 1.0 / (1u64 << 52) as f64;
/// `2^52`.
const TWO_POW_52: f64 = (1u64 << 52) as f64;

/// `a + ½` for the 52-bit integer `a` in the top bits of `w`: exact in `f64` (53 bits), in
/// `(0, 2^52)`.
#[inline(always)]
fn half_odd_from(w: u64) -> f64 {
    ((w >> 12) as i64) as f64 + 0.5
}

/// A uniform in the open interval `(0, 1)` from the top 52 bits of `w` (midpoints of the
/// `2^52` cells, exact: never 0 or 1).
#[inline(always)]
fn open01_from(w: u64) -> f64 {
    half_odd_from(w) * TWO_POW_M52
}

/// A uniform in `[0, 1)` from the top 53 bits of `w`.
#[inline(always)]
fn unit_from(w: u64) -> f64 {
    ((w >> 11) as i64) as f64 * TWO_POW_M53
}

/// Applies the sign bit (bit 8 of the layer word).
#[inline(always)]
fn signed(w: u64, x: f64) -> f64 {
    // Branch-free: move bit 8 of `w` into the sign bit of `x` (x ≥ 0).
    f64::from_bits(x.to_bits() | ((w & 0x100) << 55))
}

/// `N(0,1)` conditioned on `X > r`, exactly (Marsaglia 1964): `r + a` with `a ~ Exp(rate r)`,
/// accepted with probability `exp(−a²/2)` (test: `2b > a²`, `b ~ Exp(1)`).
#[inline(never)]
fn normal_tail_draw<R: Rng + ?Sized>(r: f64, rng: &mut R) -> f64 {
    loop {
        let a = -open01_from(rng.next_u64()).ln() / r;
        let b = -open01_from(rng.next_u64()).ln();
        if 2.0 * b > a * a {
            return r + a;
        }
    }
}

/// One standard normal from the layer word `w`: the fast path (inside the next layer's width)
/// inline, everything else in [`normal_slow`], which draws further words from `rng`.
#[inline(always)]
fn normal_from_word<R: Rng + ?Sized>(z: &Ziggurat, w: u64, rng: &mut R) -> f64 {
    let a = half_odd_from(w);
    if a < z.k[(w & 0xff) as usize] {
        a * z.xs[(w & 0x1ff) as usize]
    } else {
        normal_slow(z, w, rng)
    }
}

/// The rare part of a normal draw whose layer word `w` missed the fast path: the base layer's
/// tail, or the wedge test; on rejection, a new layer word from `rng`.
#[cold]
#[inline(never)]
fn normal_slow<R: Rng + ?Sized>(z: &Ziggurat, mut w: u64, rng: &mut R) -> f64 {
    loop {
        let i = (w & 0xff) as usize;
        let a = half_odd_from(w);
        if a < z.k[i] {
            return a * z.xs[(w & 0x1ff) as usize];
        }
        let x = a * z.xs[i];
        if i == 0 {
            return signed(w, normal_tail_draw(z.r, rng));
        }
        // Wedge: is a uniform height in [f(x_i), f(x_{i+1})) under the density?
        let y = z.fx[i] + unit_from(rng.next_u64()) * (z.fx[i + 1] - z.fx[i]);
        if y < normal_density(x) {
            return signed(w, x);
        }
        w = rng.next_u64();
    }
}

/// One standard exponential from the layer word `w` (magnitude; bit 8 of `w` is left for a
/// Laplace sign, independent of the magnitude).
#[inline(always)]
fn exp_from_word<R: Rng + ?Sized>(z: &Ziggurat, w: u64, rng: &mut R) -> f64 {
    let i = (w & 0xff) as usize;
    let x = open01_from(w) * z.x[i];
    if x < z.x[i + 1] {
        x
    } else {
        exp_slow(z, w, rng)
    }
}

/// The rare part of an exponential draw: beyond the base layer the law is `r + Exp(1)`
/// (memorylessness), so the draw restarts shifted by `r`; in a wedge, the exact density test.
#[cold]
#[inline(never)]
fn exp_slow<R: Rng + ?Sized>(z: &Ziggurat, mut w: u64, rng: &mut R) -> f64 {
    let mut shift = 0.0;
    loop {
        let i = (w & 0xff) as usize;
        let x = open01_from(w) * z.x[i];
        if x < z.x[i + 1] {
            return shift + x;
        }
        if i == 0 {
            shift += z.r;
        } else {
            let y = z.fx[i] + unit_from(rng.next_u64()) * (z.fx[i + 1] - z.fx[i]);
            if y < (-x).exp() {
                return shift + x;
            }
        }
        w = rng.next_u64();
    }
}

/// Words drawn per `fill_bytes` call (2 KiB of keystream).
const CHUNK: usize = 256;

/// Calls `f(slot, word)` for every element of `out`, with one fresh generator word per element,
/// taken from bulk `fill_bytes` calls of at most [`CHUNK`] words (exactly as many words as
/// elements, so nothing is drawn and discarded). `f` may draw further words from the generator
/// it is given (the rare slow paths).
#[inline(always)]
fn for_each_word<R: Rng + ?Sized, T>(
    rng: &mut R,
    out: &mut [T],
    mut f: impl FnMut(&mut T, u64, &mut R),
) {
    let mut bytes = [0u8; 8 * CHUNK];
    for chunk in out.chunks_mut(CHUNK) {
        let b = &mut bytes[..8 * chunk.len()];
        rng.fill_bytes(b);
        for (o, c) in chunk.iter_mut().zip(b.chunks_exact(8)) {
            let mut le = [0u8; 8];
            le.copy_from_slice(c);
            f(o, u64::from_le_bytes(le), rng);
        }
    }
}

/// Fills `out` with i.i.d. standard normals (ziggurat; see the [module docs](self)).
pub fn fill_normal<R: Rng + ?Sized>(rng: &mut R, out: &mut [f64]) {
    fill_normal_chunks(rng, out, normal_table(), |_, _| {});
}

/// Fills `out` with i.i.d. standard normals `g` and returns `(⟨g, u⟩, ‖g‖², ‖u‖²)` in the same
/// pass (`u` must be at least as long as `out`; extra entries are ignored). `‖u‖²` lets a caller
/// validate its input without a pass of its own.
pub fn fill_normal_with_dot_and_norms<R: Rng + ?Sized>(
    rng: &mut R,
    u: &[f64],
    out: &mut [f64],
) -> (f64, f64, f64) {
    let n = out.len().min(u.len());
    let (out, u) = (&mut out[..n], &u[..n]);
    let mut sums = [[0.0; LANES]; 3];
    pulp::Arch::new().dispatch(FillDot {
        rng,
        u,
        out,
        sums: &mut sums,
    });
    finish_sums(&sums)
}

/// [`fill_normal_with_dot_and_norms`]'s pass, compiled for the CPU's widest vectors: with AVX2
/// each sum's four lanes fill one register. Rust never fuses `a·b + c`, so every CPU gets the
/// same bits. A `WithSimd` struct with an `#[inline(always)]` body, not a closure: `pulp` runs a
/// closure through a call LLVM does not inline, which left this loop on SSE (measured, perf).
struct FillDot<'a, R: ?Sized> {
    rng: &'a mut R,
    u: &'a [f64],
    out: &'a mut [f64],
    sums: &'a mut [[f64; LANES]; 3],
}

impl<R: Rng + ?Sized> pulp::WithSimd for FillDot<'_, R> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let FillDot { rng, u, out, sums } = self;
        fill_normal_chunks(
            rng,
            out,
            normal_table(),
            #[inline(always)]
            |start, g| dot_and_norms_into(g, &u[start..start + g.len()], sums),
        );
    }
}

/// `(⟨g, u⟩, ‖g‖², ‖u‖²)` over the common length, with four partial sums per quantity (a
/// single running sum is bound by floating-point add latency, several lanes by throughput).
pub fn dot_and_norms(g: &[f64], u: &[f64]) -> (f64, f64, f64) {
    let mut sums = [[0.0; LANES]; 3];
    dot_and_norms_into(g, u, &mut sums);
    finish_sums(&sums)
}

/// Lanes of the partial sums of [`dot_and_norms_into`].
const LANES: usize = 4;

/// Adds `g[k]·u[k]`, `g[k]²` and `u[k]²` into lane `k mod LANES` of `sums[0]`, `sums[1]`,
/// `sums[2]` (over the common length).
#[inline(always)]
fn dot_and_norms_into(g: &[f64], u: &[f64], sums: &mut [[f64; LANES]; 3]) {
    let n = g.len().min(u.len());
    let (g, u) = (&g[..n], &u[..n]);
    let [dot, gg, uu] = sums;
    let (gc, uc) = (g.chunks_exact(LANES), u.chunks_exact(LANES));
    let (gr, ur) = (gc.remainder(), uc.remainder());
    // ‖u‖² in a loop of its own: together with the others, LLVM pairs lanes of different sums
    // in one register and shuffles (measured ~2× slower).
    for (a, b) in gc.zip(uc.clone()) {
        for k in 0..LANES {
            dot[k] += a[k] * b[k];
            gg[k] += a[k] * a[k];
        }
    }
    for b in uc {
        for k in 0..LANES {
            uu[k] += b[k] * b[k];
        }
    }
    for (k, (&a, &b)) in gr.iter().zip(ur).enumerate() {
        dot[k] += a * b;
        gg[k] += a * a;
        uu[k] += b * b;
    }
}

/// The three totals of [`dot_and_norms_into`]'s lanes (pairwise).
fn finish_sums(sums: &[[f64; LANES]; 3]) -> (f64, f64, f64) {
    let total = |v: &[f64; LANES]| (v[0] + v[1]) + (v[2] + v[3]);
    (total(&sums[0]), total(&sums[1]), total(&sums[2]))
}

/// Fills `out` with standard normals, consuming the generator exactly as [`for_each_word`]
/// would (one word per element in bulk, then each slow path's extra words in element order), in
/// two passes per chunk of [`CHUNK`] words: a branch-free fast pass over every word, then the
/// rare slow paths (≈ 1%). `done(start, chunk)` sees each finished chunk (offset `start` in
/// `out`) while it is still in L1 cache.
#[inline(always)]
fn fill_normal_chunks<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f64],
    z: &Ziggurat,
    mut done: impl FnMut(usize, &[f64]),
) {
    let mut bytes = [0u8; 8 * CHUNK];
    // Indices (within the chunk) of the slow-path words, in order.
    let mut slow = [0u8; CHUNK];
    for (c, chunk) in out.chunks_mut(CHUNK).enumerate() {
        let b = &mut bytes[..8 * chunk.len()];
        rng.fill_bytes(b);
        let mut m = 0usize;
        for (j, (o, w)) in chunk.iter_mut().zip(b.chunks_exact(8)).enumerate() {
            let mut le = [0u8; 8];
            le.copy_from_slice(w);
            let w = u64::from_le_bytes(le);
            let a = half_odd_from(w);
            *o = a * z.xs[(w & 0x1ff) as usize];
            // `j < CHUNK = 256` fits in a byte; the mask only spares a bounds check (m ≤ j).
            slow[m & (CHUNK - 1)] = j as u8;
            m += usize::from(a >= z.k[(w & 0xff) as usize]);
        }
        for &j in &slow[..m.min(CHUNK)] {
            let j = usize::from(j);
            let mut le = [0u8; 8];
            le.copy_from_slice(&b[8 * j..8 * j + 8]);
            chunk[j] = normal_slow(z, u64::from_le_bytes(le), rng);
        }
        done(c * CHUNK, chunk);
    }
}

/// One standard normal draw (the same ziggurat as [`fill_normal`]).
pub fn normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let w = rng.next_u64();
    normal_from_word(normal_table(), w, rng)
}

/// Fills `out` with i.i.d. standard exponentials (ziggurat).
pub fn fill_exp<R: Rng + ?Sized>(rng: &mut R, out: &mut [f64]) {
    let z = exp_table();
    for_each_word(rng, out, |o, w, rng| *o = exp_from_word(z, w, rng));
}

/// One standard exponential draw (the same ziggurat as [`fill_exp`]).
pub fn exp1<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let w = rng.next_u64();
    exp_from_word(exp_table(), w, rng)
}

/// One Laplace draw with scale `b`: `±b·E`, `E` standard exponential, the sign from bit 8 of
/// the exponential's first word (one 64-bit word per draw on the fast path).
pub fn laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    let w = rng.next_u64();
    signed(w, scale * exp_from_word(exp_table(), w, rng))
}

/// Writes `out[i] = x[i] + Lap(scale)` with i.i.d. Laplace noise (`x` must be at least as long
/// as `out`; extra entries are ignored; `scale ≥ 0`).
pub fn add_laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64, x: &[f64], out: &mut [f64]) {
    let z = exp_table();
    let n = out.len().min(x.len());
    let out = &mut out[..n];
    for_each_word(rng, out, |o, w, rng| {
        *o = signed(w, scale * exp_from_word(z, w, rng))
    });
    for (o, &xi) in out.iter_mut().zip(x) {
        *o += xi;
    }
}

/// Fills `out` with i.i.d. uniform residues mod `2^bits` (`1 ≤ bits ≤ 64`; other values are
/// clamped into that range): the low `bits` bits of one 64-bit word each, exactly uniform because
/// `2^bits` divides `2^64`.
pub fn fill_uniform_mod_pow2<R: Rng + ?Sized>(rng: &mut R, bits: u32, out: &mut [u64]) {
    let bits = bits.clamp(1, 64);
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    for_each_word(rng, out, |o, w, _| *o = w & mask);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{NoiseRng, StreamKey, Threads, for_each_block, seeded_rng_for_experiments};
    use crate::special::{norm_cdf, norm_quantile, norm_sf};
    use privfed_testkit::{assert_chi_square_gof, assert_ks_fits};

    #[test]
    fn tables_have_equal_layer_areas() {
        // Every layer (base with tail included) must have the same area v, to ~1e-12 relative:
        // this is what makes the uniform layer choice exact. Known tail starts (Marsaglia &
        // Tsang 2000, 256 layers): r = 3.6541528853610088 (normal), 7.69711747013104972 (exp).
        for (z, tail, r_ref) in [
            (
                normal_table(),
                normal_tail as fn(f64) -> f64,
                3.654_152_885_361_009,
            ),
            (exp_table(), |r: f64| (-r).exp(), 7.697_117_470_131_05),
        ] {
            assert!((z.r - r_ref).abs() < 1e-12 * r_ref, "r = {}", z.r);
            let v = z.layer_area(0, tail);
            for i in 1..LAYERS {
                let a = z.layer_area(i, tail);
                assert!((a / v - 1.0).abs() < 1e-10, "layer {i}: {a} vs {v}");
            }
            assert!(z.x.windows(2).all(|w| w[0] > w[1]));
        }
    }

    /// Equiprobable bins of N(0,1) plus explicit far-tail bins.
    fn normal_bins() -> Vec<f64> {
        let mut edges: Vec<f64> = (1..200).map(|k| norm_quantile(k as f64 / 200.0)).collect();
        // Tail edges around the ziggurat's base layer r = 3.654 and beyond.
        for t in [3.0, 3.5, 3.654_152_885_361_009, 4.0, 4.5] {
            edges.push(t);
            edges.push(-t);
        }
        edges.sort_by(f64::total_cmp);
        edges.dedup();
        edges
    }

    fn chi_square_normal(xs: &[f64], what: &str) {
        let edges = normal_bins();
        let mut counts = vec![0u64; edges.len() + 1];
        for &x in xs {
            counts[edges.partition_point(|&e| e <= x)] += 1;
        }
        let mut probs = Vec::with_capacity(counts.len());
        let mut prev = 0.0;
        for &e in &edges {
            let c = if e < 0.0 {
                norm_cdf(e)
            } else {
                1.0 - norm_sf(e)
            };
            probs.push(c - prev);
            prev = c;
        }
        probs.push(norm_sf(*edges.last().unwrap()));
        assert_chi_square_gof(&counts, &probs, 1e-6, what);
    }

    #[test]
    fn normals_pass_ks_and_chi_square() {
        // 2·10^6 draws: KS and a 209-bin chi-square (equiprobable bins plus tail bins at the
        // ziggurat's tail start), α = 1e-6 each.
        let mut rng = seeded_rng_for_experiments(41);
        let mut xs = vec![0.0; 2_000_000];
        fill_normal(&mut rng, &mut xs);
        chi_square_normal(&xs, "batched normals");
        assert_ks_fits(&mut xs, norm_cdf, 1e-6, "batched normals");
    }

    #[test]
    fn tail_sampler_is_the_truncated_normal() {
        // The base layer's tail sampler on its own, 300,000 draws: KS against N(0,1) given
        // X > r, at r = 3.654 (the table's) and r = 6 (α = 1e-6 each).
        let mut rng = seeded_rng_for_experiments(46);
        for r in [normal_table().r, 6.0] {
            let mut xs: Vec<f64> = (0..300_000)
                .map(|_| normal_tail_draw(r, &mut rng))
                .collect();
            let sf_r = norm_sf(r);
            assert_ks_fits(
                &mut xs,
                |x| 1.0 - norm_sf(x) / sf_r,
                1e-6,
                &format!("tail r={r}"),
            );
        }
    }

    #[test]
    fn normal_far_tail_is_exact() {
        // Conditioned on |X| > 4, the law is the normal tail: KS against it (α = 1e-6) on the
        // draws beyond 4 from 3·10^7 normals (~1900 expected), then the tail frequency itself
        // (binomial z-test, α = 1e-6).
        let mut rng = seeded_rng_for_experiments(42);
        let n = 30_000_000usize;
        let mut buf = vec![0.0; 1 << 16];
        let mut tail = Vec::new();
        let mut drawn = 0;
        while drawn < n {
            fill_normal(&mut rng, &mut buf);
            tail.extend(buf.iter().filter(|x| x.abs() > 4.0).map(|x| x.abs()));
            drawn += buf.len();
        }
        let p = 2.0 * norm_sf(4.0);
        let freq = tail.len() as f64 / drawn as f64;
        let z = privfed_testkit::z_mean_known_variance(freq, drawn, p, p * (1.0 - p));
        privfed_testkit::assert_z(z, 1e-6, "P(|X| > 4)");
        let sf4 = norm_sf(4.0);
        assert_ks_fits(
            &mut tail,
            |x| 1.0 - norm_sf(x) / sf4,
            1e-6,
            "|X| given |X| > 4",
        );
    }

    #[test]
    fn exponential_and_laplace_pass_ks() {
        let mut rng = seeded_rng_for_experiments(43);
        let mut xs = vec![0.0; 1_000_000];
        fill_exp(&mut rng, &mut xs);
        assert_ks_fits(
            &mut xs,
            |x: f64| -(-x).exp_m1(),
            1e-6,
            "batched exponentials",
        );
        // The exponential tail beyond the base layer (r ≈ 7.7): memorylessness, KS on x − 8.
        let mut far: Vec<f64> = Vec::new();
        let mut buf = vec![0.0; 1 << 16];
        for _ in 0..200 {
            fill_exp(&mut rng, &mut buf);
            far.extend(buf.iter().filter(|&&x| x > 8.0).map(|x| x - 8.0));
        }
        assert!(far.len() > 3000, "{}", far.len());
        assert_ks_fits(
            &mut far,
            |x: f64| -(-x).exp_m1(),
            1e-6,
            "exponential beyond 8",
        );
        let scale = 2.5;
        let mut ys: Vec<f64> = (0..1_000_000).map(|_| laplace(&mut rng, scale)).collect();
        let cdf = |x: f64| {
            if x < 0.0 {
                0.5 * (x / scale).exp()
            } else {
                1.0 - 0.5 * (-x / scale).exp()
            }
        };
        assert_ks_fits(&mut ys, cdf, 1e-6, "batched Laplace");
    }

    #[test]
    fn uniform_residues_are_uniform() {
        // Chi-square over all 2^b residues (b = 1, 4, 10) and over the top 4 bits for b = 64;
        // α = 1e-6 each.
        let mut rng = seeded_rng_for_experiments(44);
        for bits in [1u32, 4, 10] {
            let mut v = vec![0u64; 1 << 20];
            fill_uniform_mod_pow2(&mut rng, bits, &mut v);
            let mut counts = vec![0u64; 1 << bits];
            for &x in &v {
                counts[x as usize] += 1;
            }
            let probs = vec![1.0 / (1u64 << bits) as f64; 1 << bits];
            assert_chi_square_gof(&counts, &probs, 1e-6, &format!("mod 2^{bits}"));
        }
        let mut v = vec![0u64; 1 << 16];
        fill_uniform_mod_pow2(&mut rng, 64, &mut v);
        let mut counts = vec![0u64; 16];
        v.iter().for_each(|&x| counts[(x >> 60) as usize] += 1);
        assert_chi_square_gof(&counts, &[1.0 / 16.0; 16], 1e-6, "mod 2^64, top bits");
        let mut w = vec![0u64; 1000];
        fill_uniform_mod_pow2(&mut rng, 0, &mut w);
        assert!(w.iter().all(|&x| x < 2), "bits clamp to at least 1");
    }

    #[test]
    fn two_pass_fill_consumes_the_generator_like_one_draw_at_a_time() {
        // The chunked fast pass + deferred slow paths must give exactly what drawing element by
        // element (fast path, else slow path at once) gives, including the words the slow paths
        // take, and leave the generator at the same position (fails if the slow paths run out
        // of order).
        let z = normal_table();
        for len in [1, 255, 256, 257, 5000] {
            let mut a = seeded_rng_for_experiments(len as u64);
            let mut b = a.clone();
            let mut two_pass = vec![0.0; len];
            fill_normal(&mut a, &mut two_pass);
            let mut one_by_one = vec![0.0; len];
            for_each_word(&mut b, &mut one_by_one, |o, w, rng| {
                *o = normal_from_word(z, w, rng)
            });
            assert_eq!(two_pass, one_by_one, "len {len}");
            assert_eq!(a.next_u64(), b.next_u64(), "len {len}");
        }
        // 5000 draws include slow paths (≈ 1%), so the deferred branch is exercised.
        let mut rng = seeded_rng_for_experiments(5000);
        let mut bytes = [0u8; 8];
        let misses = (0..5000)
            .filter(|_| {
                rng.fill_bytes(&mut bytes);
                let w = u64::from_le_bytes(bytes);
                half_odd_from(w) >= z.k[(w & 0xff) as usize]
            })
            .count();
        assert!(misses > 10, "{misses}");
    }

    #[test]
    fn block_parallel_normals_match_and_pass_ks() {
        // Normals drawn per block stream: identical for 1 and 2 threads, and the whole vector
        // (many streams under one key) passes KS at α = 1e-6.
        let key = StreamKey::draw(&mut seeded_rng_for_experiments(45));
        let n = 40 * crate::rng::BLOCK_LEN + 5;
        let fill = |_: usize, rng: &mut NoiseRng, chunk: &mut [f64]| fill_normal(rng, chunk);
        let mut a = vec![0.0; n];
        let mut b = vec![0.0; n];
        for_each_block(&key, &mut a, Threads::ONE, fill);
        for_each_block(&key, &mut b, Threads::new(2), fill);
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        chi_square_normal(&a, "block-parallel normals");
        assert_ks_fits(&mut a, norm_cdf, 1e-6, "block-parallel normals");
    }
}
