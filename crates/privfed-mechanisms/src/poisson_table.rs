//! A table sampler for Poisson(λ): Walker's alias method over the body of the pmf, in integer
//! arithmetic, and inversion in the tails. It draws what [`skellam::Poisson`](crate::skellam::Poisson)
//! draws, with one 64-bit word and one table read per draw instead of PTRS's rejection loop.
//!
//! **What it samples, exactly.** Let `p̃_k` be the pmf as computed here: `exp` of Loader's
//! [`ln_poisson_pmf`] (full relative accuracy), and in the tails the recurrences
//! `p̃_{k+1} = p̃_k·λ/(k+1)` and `p̃_{k−1} = p̃_k·k/λ`, re-anchored on Loader's value every
//! [`REANCHOR`] steps. With `S = Σ_k p̃_k` (every `k` whose `p̃_k` does not underflow):
//! * the **body** `[lo, hi]` is the run of outcomes with `p̃_k ≥ 2⁻²⁴` around the mode. Outcome `k`
//!   of the body gets the integer weight `w_k ≈ 2⁶⁴·p̃_k/S` (the `f64` product, rounded: relative
//!   error `≤ 2⁻⁵³`) and is drawn with probability exactly `w_k / 2⁶⁴` (Walker's alias table built
//!   with integer arithmetic, so no probability is rounded after this step:
//!   `alias_table_is_exact` checks every column);
//! * the **tails** together get `w_T ≈ 2⁶⁴·T̃/S` (`T̃` their computed mass), and the few units
//!   by which the weights miss `2⁶⁴` go to the mode (relatively `< 10⁻¹²` there). Within the
//!   tails outcome `k` is drawn with probability `p̃_k / T̃` by inversion: a uniform times `T̃`,
//!   walked outward from the body's edge. Outcomes whose
//!   `p̃_k` underflows `f64` (beyond ~37 standard deviations) are never drawn, as with any `f64`
//!   sampler.
//!
//! So every outcome's probability is within a relative `~10⁻¹²` of the Poisson pmf (the test
//! `realized_pmf_matches_the_poisson_pmf` measures it); a privacy loss computed from the exact pmf
//! moves by at most that much.
//!
//! **Cost.** Building the table evaluates the pmf once per body outcome and walks both tails to
//! underflow (0.8 ms at λ = 332,374, the benchmark's); a draw is one `u64`, a shift and a mask,
//! one table read and one compare (2^21 draws: 12 ms against PTRS's 52 ms, `bench_encode`). The
//! body spans about ±4 standard deviations; tables are built for `λ` in
//! [`TABLE_MIN_MEAN`]`..=`[`TABLE_MAX_MEAN`] (at most [`MAX_COLUMNS`] columns of 16 bytes).

use privfed_special::{NeumaierSum, ln_poisson_pmf};
use rand::{Rng, RngExt};

/// Smallest mean for which a table is built (below it `e^{−λ}` is within `10⁻³` of 1 and the
/// multiplication method costs about one uniform).
pub const TABLE_MIN_MEAN: f64 = 1e-3;

/// Largest mean for which a table is built: its body then has about 30,000 outcomes.
pub const TABLE_MAX_MEAN: f64 = 1.2e7;

/// Most columns of a table (a power of two: the top bits of a word pick a column).
pub const MAX_COLUMNS: usize = 1 << 15;

/// Body outcomes have `p̃_k ≥ 2⁻²⁴`, so their integer weights are at least `2⁴⁰`.
const BODY_MIN_PMF: f64 = 1.0 / 16_777_216.0;

/// The tail recurrences take Loader's value afresh every this many steps, so their relative error
/// stays at a few hundred ulps.
pub const REANCHOR: u64 = 64;

/// One column of the alias table: its own outcome (the column index) is kept when the word's low
/// bits are below `thr`, otherwise `alias` is returned.
#[derive(Debug, Clone, Copy, Default)]
struct Column {
    thr: u64,
    alias: u32,
}

/// The alias-table sampler for one Poisson mean (see the module docs for what it draws).
#[derive(Debug, Clone)]
pub struct PoissonTable {
    lambda: f64,
    /// First outcome of the body.
    lo: u64,
    /// Number of body outcomes; index `body_len` is the tails' column.
    body_len: u32,
    /// `64 − log2(columns)`: the top bits of a word select the column.
    shift: u32,
    /// Low bits of a word compared with a column's threshold.
    mask: u64,
    cols: Vec<Column>,
    /// The tails' computed masses `Σ p̃_k` above `hi` and below `lo`.
    upper_mass: f64,
    lower_mass: f64,
}

/// `p̃` one step outward: the recurrence, or Loader's value at re-anchoring steps.
fn step_up(lambda: f64, k_next: u64, p: f64) -> f64 {
    if k_next.is_multiple_of(REANCHOR) {
        ln_poisson_pmf(k_next, lambda).exp()
    } else {
        p * lambda / k_next as f64
    }
}

fn step_down(lambda: f64, k_next: u64, p: f64) -> f64 {
    if k_next.is_multiple_of(REANCHOR) {
        ln_poisson_pmf(k_next, lambda).exp()
    } else {
        // p̃_{k−1} = p̃_k · k / λ with k = k_next + 1.
        p * (k_next + 1) as f64 / lambda
    }
}

fn pmf(k: u64, lambda: f64) -> f64 {
    ln_poisson_pmf(k, lambda).exp()
}

impl PoissonTable {
    /// The table for `λ`, or `None` outside [`TABLE_MIN_MEAN`]`..=`[`TABLE_MAX_MEAN`] (or NaN).
    pub fn new(lambda: f64) -> Option<Self> {
        if !(TABLE_MIN_MEAN..=TABLE_MAX_MEAN).contains(&lambda) {
            return None;
        }
        // The mode is ⌊λ⌋; grow the body outward while the pmf stays above the threshold.
        let mode = lambda.floor() as u64;
        let mut below = Vec::new();
        let mut lo = mode;
        while lo > 0 {
            let p = pmf(lo - 1, lambda);
            if p < BODY_MIN_PMF {
                break;
            }
            below.push(p);
            lo -= 1;
        }
        let mut body: std::collections::VecDeque<f64> = below.into_iter().rev().collect();
        body.push_back(pmf(mode, lambda));
        let mut hi = mode;
        loop {
            let p = pmf(hi + 1, lambda);
            if p < BODY_MIN_PMF {
                break;
            }
            body.push_back(p);
            hi += 1;
        }
        let tail_masses = |lo: u64, hi: u64| {
            let upper = Self::tail_mass(lambda, hi + 1, true);
            let lower = if lo == 0 {
                0.0
            } else {
                Self::tail_mass(lambda, lo - 1, false)
            };
            (upper, lower)
        };
        // The tails' integer weight must be large too (≥ 2⁴⁰, relative rounding ≤ 2⁻⁴¹): when
        // they hold less than 2⁻²⁴ (tiny λ), the body's smaller edge moves into its tail.
        let (mut upper_mass, mut lower_mass) = tail_masses(lo, hi);
        while upper_mass + lower_mass < BODY_MIN_PMF && hi > lo {
            if lo > 0 && body.front() < body.back() {
                lo += 1;
                body.pop_front();
            } else {
                hi -= 1;
                body.pop_back();
            }
            (upper_mass, lower_mass) = tail_masses(lo, hi);
        }
        let body = Vec::from(body);
        let body_len = body.len();
        let columns = (body_len + 1).next_power_of_two().max(2);
        if columns > MAX_COLUMNS {
            return None;
        }
        // Normalize by everything computed, body and tails, so the two agree to f64 rounding.
        let mut total = NeumaierSum::default();
        for &p in body.iter().chain([&upper_mass, &lower_mass]) {
            total.add(p);
        }
        let total = total.value();
        const TWO64: f64 = 18_446_744_073_709_551_616.0;
        let mut weights: Vec<u128> = body
            .iter()
            .map(|&p| (p / total * TWO64).round() as u128)
            .collect();
        // The tails' weight from their own mass (an f64 product has 53 bits: a residual of the
        // body's roundings, up to ~2¹⁰ units, would be large against a tail mass of 10⁻¹⁰); the
        // residual goes to the mode, where it is relatively smallest.
        let tail_weight = ((upper_mass + lower_mass) / total * TWO64).round() as u128;
        let body_weight: u128 = weights.iter().sum();
        let residual = (1i128 << 64) - (body_weight + tail_weight) as i128;
        let (mode_idx, &mode_weight) = weights.iter().enumerate().max_by_key(|&(_, w)| *w)?;
        if residual.unsigned_abs() > mode_weight >> 36 {
            return None;
        }
        weights[mode_idx] = (mode_weight as i128 + residual) as u128;
        weights.push(tail_weight);
        weights.resize(columns, 0);
        let bits = columns.trailing_zeros();
        let shift = 64 - bits;
        let capacity = 1u128 << shift;
        let cols = alias_columns(&weights, capacity)?;
        Some(PoissonTable {
            lambda,
            lo,
            body_len: body_len as u32,
            shift,
            mask: (capacity - 1) as u64,
            cols,
            upper_mass,
            lower_mass,
        })
    }

    /// `Σ p̃_k` walking outward from `start` until `p̃` underflows (or `k = 0` going down).
    fn tail_mass(lambda: f64, start: u64, up: bool) -> f64 {
        let mut k = start;
        let mut p = pmf(k, lambda);
        let mut sum = NeumaierSum::default();
        while p >= f64::MIN_POSITIVE {
            sum.add(p);
            if up {
                k += 1;
                p = step_up(lambda, k, p);
            } else {
                if k == 0 {
                    break;
                }
                k -= 1;
                p = step_down(lambda, k, p);
            }
        }
        sum.value()
    }

    /// The mean `λ`.
    pub fn mean(&self) -> f64 {
        self.lambda
    }

    /// Number of outcomes drawn from the alias table (the rest come from the tails).
    pub fn body(&self) -> std::ops::RangeInclusive<u64> {
        self.lo..=self.lo + u64::from(self.body_len) - 1
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let r = rng.next_u64();
        let col = (r >> self.shift) as usize;
        let c = self.cols[col];
        // `col` if the low bits are below the threshold, else `alias`, as a conditional move: a
        // plain `if` (and even a mask-and-xor) compiled to a jump that mispredicted (perf).
        let idx = std::hint::select_unpredictable(r & self.mask < c.thr, col as u32, c.alias);
        if idx < self.body_len {
            self.lo + u64::from(idx)
        } else {
            self.sample_tail(rng)
        }
    }

    /// A draw from the tails, `P(k) = p̃_k / T̃`, by inversion outward from the body's edges;
    /// a uniform that lands past the last representable term (rounding) is drawn again.
    #[cold]
    fn sample_tail<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let hi = self.lo + u64::from(self.body_len) - 1;
        loop {
            let mut u = rng.random::<f64>() * (self.upper_mass + self.lower_mass);
            if self.lower_mass == 0.0 || u < self.upper_mass {
                let mut k = hi + 1;
                let mut p = pmf(k, self.lambda);
                while p >= f64::MIN_POSITIVE {
                    if u < p {
                        return k;
                    }
                    u -= p;
                    k += 1;
                    p = step_up(self.lambda, k, p);
                }
            } else {
                u -= self.upper_mass;
                let mut k = self.lo - 1;
                let mut p = pmf(k, self.lambda);
                while p >= f64::MIN_POSITIVE {
                    if u < p {
                        return k;
                    }
                    u -= p;
                    if k == 0 {
                        break;
                    }
                    k -= 1;
                    p = step_down(self.lambda, k, p);
                }
            }
        }
    }

    /// The probabilities with which [`sample`](Self::sample) returns each of `ks`, computed from
    /// the table's integer weights and the tails' recurrence (for tests and audits).
    pub fn realized_pmf(&self, ks: &[u64]) -> Vec<f64> {
        const TWO64: f64 = 18_446_744_073_709_551_616.0;
        let capacity = 1u128 << self.shift;
        // Each outcome index's weight: its own column's share plus what other columns alias to it.
        let mut weight = vec![0u128; self.cols.len()];
        for (i, c) in self.cols.iter().enumerate() {
            weight[i] += u128::from(c.thr);
            weight[c.alias as usize] += capacity - u128::from(c.thr);
        }
        let tail =
            weight[self.body_len as usize] as f64 / TWO64 / (self.upper_mass + self.lower_mass);
        let (lo, hi) = (self.lo, *self.body().end());
        // The tails' p̃ out to the farthest k asked for, by the sampler's own recurrence.
        let max_k = ks.iter().copied().max().unwrap_or(0);
        let min_k = ks.iter().copied().min().unwrap_or(0);
        let mut upper = Vec::new();
        if max_k > hi {
            let mut p = pmf(hi + 1, self.lambda);
            upper.push(p);
            for k in hi + 2..=max_k {
                p = step_up(self.lambda, k, p);
                upper.push(p);
            }
        }
        let mut lower = Vec::new();
        if min_k < lo {
            let mut p = pmf(lo - 1, self.lambda);
            lower.push(p);
            for k in (min_k..lo - 1).rev() {
                p = step_down(self.lambda, k, p);
                lower.push(p);
            }
        }
        let tail_p = |p: f64| if p < f64::MIN_POSITIVE { 0.0 } else { tail * p };
        ks.iter()
            .map(|&k| {
                if k > hi {
                    tail_p(upper[(k - hi - 1) as usize])
                } else if k < lo {
                    tail_p(lower[(lo - 1 - k) as usize])
                } else {
                    weight[(k - lo) as usize] as f64 / TWO64
                }
            })
            .collect()
    }
}

/// Walker's alias table (Vose's construction) for integer `weights` summing to
/// `weights.len() · capacity`, in exact integer arithmetic. `None` if the sum is wrong.
fn alias_columns(weights: &[u128], capacity: u128) -> Option<Vec<Column>> {
    let total: u128 = weights.iter().sum();
    if total != weights.len() as u128 * capacity {
        return None;
    }
    let mut w = weights.to_vec();
    let mut cols = vec![Column::default(); w.len()];
    let (mut small, mut large): (Vec<usize>, Vec<usize>) =
        (0..w.len()).partition(|&i| w[i] < capacity);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        cols[s] = Column {
            thr: w[s] as u64,
            alias: l as u32,
        };
        // Column s is filled up to capacity by outcome l.
        w[l] -= capacity - w[s];
        if w[l] < capacity {
            large.pop();
            small.push(l);
        }
    }
    // What is left has weight exactly `capacity` (integer arithmetic: nothing to round).
    for i in small.into_iter().chain(large) {
        if w[i] != capacity {
            return None;
        }
        cols[i] = Column {
            thr: u64::try_from(capacity).ok()?,
            alias: i as u32,
        };
    }
    Some(cols)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::assert_chi_square_gof;

    const MEANS: [f64; 8] = [1e-3, 0.7, 9.5, 37.5, 1000.0, 332_374.5, 4e6, TABLE_MAX_MEAN];

    /// Each outcome's weight, reassembled from the columns (its own share plus what other columns
    /// alias to it), equals the integer weight it was given, and the weights sum to `2⁶⁴`.
    #[test]
    fn alias_table_is_exact() {
        let weights: Vec<u128> = vec![5, 0, 17, 3, 7, 0, 0, 0];
        let capacity = 4u128;
        let cols = alias_columns(&weights, capacity).unwrap();
        for (idx, &want) in weights.iter().enumerate() {
            let got: u128 = cols
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let own = if i == idx { u128::from(c.thr) } else { 0 };
                    let aliased = if c.alias as usize == idx {
                        capacity - u128::from(c.thr)
                    } else {
                        0
                    };
                    own + aliased
                })
                .sum();
            assert_eq!(got, want, "outcome {idx}");
        }
        assert!(alias_columns(&[1, 2], 4).is_none(), "wrong total");
        // And the tables: every outcome, body and tails out to underflow, sums to 1.
        for &lambda in &MEANS {
            let t = PoissonTable::new(lambda).unwrap();
            let sd = lambda.sqrt();
            let ks: Vec<u64> = (0..=(lambda + 40.0 * sd) as u64 + 200).collect();
            let total: f64 = t.realized_pmf(&ks).iter().sum();
            assert!((total - 1.0).abs() < 1e-13, "λ = {lambda}: {total}");
        }
    }

    /// Every outcome's probability as the table draws it, against Loader's pmf: within 1e-11
    /// relative in the body and both tails (out to 12 standard deviations), for means from 10⁻³
    /// to the largest tabled.
    #[test]
    fn realized_pmf_matches_the_poisson_pmf() {
        for &lambda in &MEANS {
            let t = PoissonTable::new(lambda).unwrap();
            let sd = lambda.sqrt();
            let from = (lambda - 12.0 * sd).max(0.0) as u64;
            let to = (lambda + 12.0 * sd).ceil() as u64 + 12;
            let step = ((to - from) / 3000).max(1);
            let mut ks: Vec<u64> = (from..=to).step_by(step as usize).collect();
            // Both tails' first outcomes, and the mode (which absorbs the weights' residual).
            ks.extend([t.body().start().saturating_sub(1), t.body().end() + 1]);
            ks.push(lambda.floor() as u64);
            let got = t.realized_pmf(&ks);
            let mut worst = 0.0f64;
            for (&k, &g) in ks.iter().zip(&got) {
                let want = pmf(k, lambda);
                if want > 1e-280 {
                    worst = worst.max((g / want - 1.0).abs());
                }
            }
            assert!(
                worst < 1e-11,
                "λ = {lambda}: worst relative error {worst:e}"
            );
        }
    }

    #[test]
    fn out_of_range_means_build_no_table() {
        for bad in [
            0.0,
            1e-4,
            TABLE_MAX_MEAN * 1.01,
            f64::NAN,
            f64::INFINITY,
            -1.0,
        ] {
            assert!(PoissonTable::new(bad).is_none(), "{bad}");
        }
    }

    /// Draws against the exact pmf: chi-square at α = 1e-6 per mean, window of ±7 standard
    /// deviations plus one cell for the rest.
    #[test]
    fn draws_match_the_pmf() {
        let mut rng = seeded_rng_for_experiments(303);
        for &lambda in &MEANS {
            let t = PoissonTable::new(lambda).unwrap();
            let n = 400_000;
            let sd = lambda.sqrt();
            let lo = (lambda - 7.0 * sd).floor().max(0.0) as u64;
            let hi = (lambda + 7.0 * sd).ceil() as u64 + 3;
            let mut counts = vec![0u64; (hi - lo + 2) as usize];
            let outside = counts.len() - 1;
            for _ in 0..n {
                let k = t.sample(&mut rng);
                let i = if (lo..=hi).contains(&k) {
                    (k - lo) as usize
                } else {
                    outside
                };
                counts[i] += 1;
            }
            let mut probs: Vec<f64> = (lo..=hi).map(|k| pmf(k, lambda)).collect();
            probs.push((1.0 - probs.iter().sum::<f64>()).max(0.0));
            assert_chi_square_gof(&counts, &probs, 1e-6, &format!("table Poisson({lambda})"));
        }
    }

    /// The tails alone: draws from `sample_tail` against `p̃_k / T̃` restricted to the tails
    /// (chi-square at α = 1e-6), at a mean with both tails and one with only the upper.
    #[test]
    fn tail_draws_match_the_conditional_pmf() {
        let mut rng = seeded_rng_for_experiments(404);
        for &lambda in &[0.7, 1000.0, 332_374.5] {
            let t = PoissonTable::new(lambda).unwrap();
            let (blo, bhi) = (*t.body().start(), *t.body().end());
            let sd = lambda.sqrt();
            let from = (lambda - 9.0 * sd).max(0.0) as u64;
            let to = (lambda + 9.0 * sd) as u64 + 20;
            let cells: Vec<u64> = (from..blo).chain(bhi + 1..=to).collect();
            let mass = t.upper_mass + t.lower_mass;
            let mut probs: Vec<f64> = cells.iter().map(|&k| pmf(k, lambda) / mass).collect();
            probs.push((1.0 - probs.iter().sum::<f64>()).max(0.0));
            let mut counts = vec![0u64; probs.len()];
            for _ in 0..200_000 {
                let k = t.sample_tail(&mut rng);
                assert!(!t.body().contains(&k), "tail draw {k} inside the body");
                let i = cells.iter().position(|&c| c == k).unwrap_or(cells.len());
                counts[i] += 1;
            }
            assert_chi_square_gof(
                &counts,
                &probs,
                1e-6,
                &format!("tails of Poisson({lambda})"),
            );
        }
    }
}
