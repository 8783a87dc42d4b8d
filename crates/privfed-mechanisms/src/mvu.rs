//! The MVU mechanism family (paper 004 Alg. 1, §3.4, §4.1–4.2; `docs/ALGORITHMS.md` §3.2–3.4).
//!
//! * [`MvuDesign`]: a validated, serde (de)serializable design — input bits `b_in`, output bits
//!   `b_out`, the budget ε, the privacy constraint ([`DpConstraint`]: ε-LDP or ε-metric-DP with
//!   `dist(i,i') = |i/(B_in−1) − i'/(B_in−1)|^p`), the row-stochastic matrix `P ∈ R^{B_in×B_out}`
//!   (rows = inputs) and the alphabet `a ∈ R^{B_out}`, satisfying
//!   (1a) `Σ_j P_ij = 1`, (1b) `P_ij ≥ 0`, (1c) `P_i'j e^{−ε·dist} ≤ P_ij ≤ P_i'j e^{ε·dist}`,
//!   (1d) `Σ_j a_j P_ij = i/(B_in − 1)`. Designs are produced by the designer in the
//!   `privfed-compression` crate; devices load them.
//! * [`Mvu`]: the mechanism that uses a design on inputs `[lo, hi]`: dither `x` to the input grid
//!   (index `i`), draw `j` from row `P_i`, send `j` (`b_out` bits); the server decodes
//!   `lo + (hi − lo)·a_j`.
//! * [`MvuVector`]: the vector mechanism of Lemma 6 on an `ℓp` ball, with conditional dithering.
//!
//! ## Exact privacy over continuous inputs
//! Given `x = g_i + λ(g_{i+1} − g_i)` the output law is the mixture `(1−λ)P_i + λP_{i+1}` of two
//! rows. For any output `j` and inputs `x, x'`: `P(j|x) ≤ max_k P_kj ≤ e^{ε*}·min_k P_kj ≤
//! e^{ε*}·P(j|x')` with `ε* = max_j max_{k,k'} ln(P_kj/P_k'j)`, and the bound is attained at two
//! grid points. So the exact ε over the whole interval is the largest log ratio of the rows: grid
//! points suffice. The guarantee is computed from the probabilities the sampler realizes (each
//! row is stored as integer weights summing to `2^64`, sampled exactly with one 64-bit word), not
//! from the requested ε.
//!
//! Metric DP holds for inputs **on the input grid** (the paper's setting): for `p = 1` and
//! continuous inputs the log-probabilities are Lipschitz with constant
//! `max (ratio − 1)/h ≥ ε` inside a cell, and for `p = 2` no finite constant exists (the log
//! ratio is linear in `|x − x'|` near a point, the metric quadratic). [`MvuVector`] therefore
//! applies the metric guarantee to the *dithered* vector, whose norm is bounded by conditional
//! dithering.
//!
//! ## Exact variance
//! With `v_i = Σ_j P_ij (a_j − g_i)²` (grid in `[0, 1]`, `h = 1/(B_in − 1)`) and exact
//! unbiasedness, `Var(x) = (hi − lo)²·((1−λ)v_i + λv_{i+1} + λ(1−λ)h²)` (law of total variance over
//! the dithering), concave on each cell; the worst case is the exact maximum over the cells.
//! The realized rows satisfy (1d) to the design's residual (≤ 1e-9 by validation) plus the
//! `2^{-64}` rounding of the weights.

use crate::dither::{
    conditional_dither_vector_indices, grid_point, interval_value, locate, lp_norm, mix_rows,
    round_index, uniform_grid_worst_case,
};
use crate::domain::check_range;
use crate::error::{Result, check_positive};
use crate::{CryptoRng, Domain, Guarantee, LocalRandomizer, MechanismError, Rng, check_out_len};
use serde::{Deserialize, Serialize};

/// Largest accepted number of input or output bits (`2^10 = 1024` levels).
pub const MAX_DESIGN_BITS: u32 = 10;

/// Tolerance of the feasibility checks (1a) and (1d) on a loaded design.
pub const FEASIBILITY_TOLERANCE: f64 = 1e-9;

/// The privacy constraint (1c) of a design.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DpConstraint {
    /// ε-local DP: `P_ij ≤ e^ε P_i'j` for all inputs `i, i'` (paper 004 (1c)).
    Ldp,
    /// ε-metric DP (paper 004 §4.1, eq. (3)): `P_ij ≤ e^{ε·dist(i,i')} P_i'j` with
    /// `dist(i, i') = |i − i'|^power/(B_in − 1)^power`.
    Metric {
        /// The power `p` of the distance (1 or 2: the `ℓ1` / `ℓ2` metric of §4.2).
        power: u32,
    },
}

impl DpConstraint {
    /// `dist(i, i')` on the input grid with `n` levels (1 for [`DpConstraint::Ldp`], `i ≠ i'`).
    pub fn dist(&self, i: usize, i2: usize, n: usize) -> f64 {
        match *self {
            DpConstraint::Ldp => {
                if i == i2 {
                    0.0
                } else {
                    1.0
                }
            }
            DpConstraint::Metric { power } => {
                let d = i.abs_diff(i2) as f64 / (n - 1) as f64;
                d.powi(power as i32)
            }
        }
    }
}

/// The largest violations of (1a)–(1d) by a design (all zero for an exactly feasible one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Violations {
    /// `max_i |Σ_j P_ij − 1|` (1a).
    pub row_sum: f64,
    /// `max(0, −min P_ij)` (1b).
    pub negativity: f64,
    /// `max(0, max_{i,i',j} ln(P_ij/P_i'j) − ε·dist(i,i'))` (1c), in log units (∞ when an entry
    /// is zero while another in its column is not).
    pub dp: f64,
    /// `max_i |Σ_j a_j P_ij − i/(B_in − 1)|` (1d).
    pub unbiasedness: f64,
}

impl Violations {
    /// The largest of the four.
    pub fn max(&self) -> f64 {
        self.row_sum
            .max(self.negativity)
            .max(self.dp)
            .max(self.unbiasedness)
    }
}

/// A validated MVU design (paper 004 Alg. 1 offline phase): see the [module docs](self).
///
/// Serializes as `{input_bits, output_bits, epsilon, constraint, p, alphabet}`; deserializing
/// validates exactly like [`MvuDesign::new`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawDesign")]
pub struct MvuDesign {
    input_bits: u32,
    output_bits: u32,
    epsilon: f64,
    constraint: DpConstraint,
    /// Rows = inputs.
    p: Vec<Vec<f64>>,
    alphabet: Vec<f64>,
}

#[derive(Deserialize)]
struct RawDesign {
    input_bits: u32,
    output_bits: u32,
    epsilon: f64,
    constraint: DpConstraint,
    p: Vec<Vec<f64>>,
    alphabet: Vec<f64>,
}

impl TryFrom<RawDesign> for MvuDesign {
    type Error = MechanismError;
    fn try_from(r: RawDesign) -> Result<MvuDesign> {
        MvuDesign::new(
            r.input_bits,
            r.output_bits,
            r.epsilon,
            r.constraint,
            r.p,
            r.alphabet,
        )
    }
}

/// Largest `f(ln(P_ij/P_i'j), dist(i,i'))` over `i ≠ i'` and `j` (exact in `f64` logs), for an
/// `f` non-decreasing in its first argument (so for ε-LDP, where every distance is 1, only each
/// column's largest and smallest entries matter); `∞` if a column mixes zero and non-zero
/// entries; `−∞` if there is no pair. Columns that are entirely zero are never output.
fn max_over_log_ratios(
    rows: &[Vec<f64>],
    constraint: DpConstraint,
    f: impl Fn(f64, f64) -> f64,
) -> f64 {
    let n = rows.len();
    let m = rows.first().map_or(0, Vec::len);
    let mut worst = f64::NEG_INFINITY;
    for j in 0..m {
        let all_zero = rows.iter().all(|r| r[j] == 0.0);
        if all_zero {
            continue;
        }
        if rows.iter().any(|r| r[j] <= 0.0) {
            return f64::INFINITY;
        }
        match constraint {
            DpConstraint::Ldp => {
                let (mut mx, mut mn) = (0.0f64, f64::INFINITY);
                for r in rows {
                    mx = mx.max(r[j]);
                    mn = mn.min(r[j]);
                }
                if n > 1 {
                    worst = worst.max(f(mx.ln() - mn.ln(), 1.0));
                }
            }
            DpConstraint::Metric { .. } => {
                for i in 0..n {
                    for i2 in 0..n {
                        if i != i2 {
                            let l = rows[i][j].ln() - rows[i2][j].ln();
                            worst = worst.max(f(l, constraint.dist(i, i2, n)));
                        }
                    }
                }
            }
        }
    }
    worst
}

/// Largest `ln(P_ij/P_i'j)/dist(i,i')` over `i ≠ i'` and `j` (exact in `f64` logs), at least 0;
/// `∞` if a column mixes zero and non-zero entries: the exact ε of the rows.
pub(crate) fn max_scaled_log_ratio(rows: &[Vec<f64>], constraint: DpConstraint) -> f64 {
    max_over_log_ratios(rows, constraint, |l, d| l / d).max(0.0)
}

/// Largest `ln(P_ij/P_i'j) − ε·dist(i,i')` over `i ≠ i'` and `j`: how far the rows are from
/// satisfying the constraint (1c) with budget `epsilon` (≤ 0 when they do; `∞` if a column
/// mixes zero and non-zero entries; `−∞` for fewer than two rows). Designers use it to check a
/// candidate.
pub fn max_log_ratio_excess(rows: &[Vec<f64>], constraint: DpConstraint, epsilon: f64) -> f64 {
    max_over_log_ratios(rows, constraint, |l, d| l - epsilon * d)
}

/// `v_i = Σ_j P_ij (a_j − i/(n − 1))²` for the `n` rows (input levels on `[0, 1]`): the
/// per-input variances whose mean is the objective (2) divided by `B_in`.
pub fn row_variances(rows: &[Vec<f64>], alphabet: &[f64]) -> Vec<f64> {
    let n = rows.len();
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let x = i as f64 / (n - 1) as f64;
            row.iter()
                .zip(alphabet)
                .map(|(p, a)| p * (a - x) * (a - x))
                .sum()
        })
        .collect()
}

impl MvuDesign {
    /// Builds and validates a design. Checks: `input_bits, output_bits ∈ 1..=MAX_DESIGN_BITS`;
    /// ε finite and positive; a metric power of 1 or 2; `P` of shape `B_in × B_out` and `a` of
    /// length `B_out`, all finite; (1b) `P_ij ≥ 0` exactly; (1a) and (1d) to
    /// [`FEASIBILITY_TOLERANCE`]; (1c): the exact ([`MvuDesign::exact_epsilon`]) ε at most
    /// `ε·(1 + 1e-9)`. The guarantee of a mechanism built on the design is recomputed exactly.
    pub fn new(
        input_bits: u32,
        output_bits: u32,
        epsilon: f64,
        constraint: DpConstraint,
        p: Vec<Vec<f64>>,
        alphabet: Vec<f64>,
    ) -> Result<MvuDesign> {
        for (name, b) in [("input_bits", input_bits), ("output_bits", output_bits)] {
            if !(1..=MAX_DESIGN_BITS).contains(&b) {
                return Err(MechanismError::invalid(
                    name,
                    f64::from(b),
                    format!("must be in 1..={MAX_DESIGN_BITS}"),
                ));
            }
        }
        check_positive("epsilon", epsilon)?;
        if let DpConstraint::Metric { power } = constraint
            && !(power == 1 || power == 2)
        {
            return Err(MechanismError::invalid(
                "power",
                f64::from(power),
                "the metric power must be 1 or 2",
            ));
        }
        let (n, m) = (1usize << input_bits, 1usize << output_bits);
        if p.len() != n || p.iter().any(|r| r.len() != m) {
            return Err(MechanismError::invalid(
                "p",
                p.len() as f64,
                format!("must be a {n} × {m} matrix (rows = inputs)"),
            ));
        }
        if alphabet.len() != m {
            return Err(MechanismError::invalid(
                "alphabet",
                alphabet.len() as f64,
                format!("must have {m} letters"),
            ));
        }
        if let Some(v) = p.iter().flatten().chain(&alphabet).find(|v| !v.is_finite()) {
            return Err(MechanismError::invalid(
                "p",
                *v,
                "all entries must be finite",
            ));
        }
        let d = MvuDesign {
            input_bits,
            output_bits,
            epsilon,
            constraint,
            p,
            alphabet,
        };
        let v = d.violations();
        if v.negativity > 0.0 {
            return Err(MechanismError::invalid(
                "p",
                -v.negativity,
                "probabilities must be >= 0 (1b)",
            ));
        }
        if v.row_sum > FEASIBILITY_TOLERANCE {
            return Err(MechanismError::invalid(
                "p",
                v.row_sum,
                "rows must sum to 1 (1a) within 1e-9",
            ));
        }
        if v.unbiasedness > FEASIBILITY_TOLERANCE {
            return Err(MechanismError::invalid(
                "alphabet",
                v.unbiasedness,
                "the design must be unbiased (1d) within 1e-9",
            ));
        }
        let exact = d.exact_epsilon();
        if exact.is_nan() || exact > epsilon * (1.0 + 1e-9) {
            return Err(MechanismError::invalid(
                "epsilon",
                epsilon,
                format!("the rows of P need ε = {exact} (1c)"),
            ));
        }
        Ok(d)
    }

    /// Input bits `b_in` (`B_in = 2^{b_in}` input levels).
    pub fn input_bits(&self) -> u32 {
        self.input_bits
    }
    /// Output bits `b_out` (`B_out = 2^{b_out}` letters).
    pub fn output_bits(&self) -> u32 {
        self.output_bits
    }
    /// The budget ε the design was made for (an upper bound on [`exact_epsilon`](Self::exact_epsilon)).
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }
    /// The privacy constraint (1c).
    pub fn constraint(&self) -> DpConstraint {
        self.constraint
    }
    /// `P` (rows = inputs).
    pub fn p(&self) -> &[Vec<f64>] {
        &self.p
    }
    /// The alphabet `a` (decoded values on `[0, 1]`).
    pub fn alphabet(&self) -> &[f64] {
        &self.alphabet
    }
    /// `B_in`.
    pub fn num_inputs(&self) -> usize {
        1 << self.input_bits
    }
    /// `B_out`.
    pub fn num_outputs(&self) -> usize {
        1 << self.output_bits
    }

    /// The input grid point `x_i = i/(B_in − 1)`.
    pub fn input_point(&self, i: usize) -> f64 {
        i as f64 / (self.num_inputs() - 1) as f64
    }

    /// The exact ε of the constraint: `max_{i≠i',j} ln(P_ij/P_i'j)/dist(i,i')` (for
    /// [`DpConstraint::Ldp`] the largest log ratio of the rows, the ε-LDP of the mechanism over
    /// continuous inputs; for metric DP the metric ε on the grid).
    pub fn exact_epsilon(&self) -> f64 {
        max_scaled_log_ratio(&self.p, self.constraint)
    }

    /// The exact ε-LDP of the mechanism (the largest log ratio of the rows, whatever the
    /// constraint it was designed for).
    pub fn ldp_epsilon(&self) -> f64 {
        max_scaled_log_ratio(&self.p, DpConstraint::Ldp)
    }

    /// `v_i = Σ_j P_ij (a_j − x_i)²` for every input level `i` (on the `[0, 1]` scale).
    pub fn grid_variances(&self) -> Vec<f64> {
        row_variances(&self.p, &self.alphabet)
    }

    /// The objective (2) divided by `B_in`: the average over the input grid of
    /// `E[(a_J − x_i)²]` (on `[0, 1]`).
    pub fn variance(&self) -> f64 {
        let v = self.grid_variances();
        v.iter().sum::<f64>() / v.len() as f64
    }

    /// The exact worst case over continuous `x ∈ [0, 1]` (with dithering) of `E[(a_J − x)²]`:
    /// the maximum over cells of `(1−λ)v_i + λv_{i+1} + λ(1−λ)h²`.
    pub fn worst_case_variance(&self) -> f64 {
        let h = 1.0 / (self.num_inputs() - 1) as f64;
        uniform_grid_worst_case(&self.grid_variances(), h)
    }

    /// The same mechanism on a finer input grid of `input_bits ≥ self.input_bits()` bits: row `i`
    /// is the output law of dithering the fine point `i/(B' − 1)` to this design's grid,
    /// `(1−λ)P_k + λP_{k+1}` (so a device that dithers to the fine grid and draws from the refined
    /// row sends `j` with the same law as one that dithers its fine point to this grid). Same
    /// alphabet and constraint kind; exactly unbiased (mixtures of unbiased rows).
    ///
    /// The budget of the result is its exact ε ([`exact_epsilon`](Self::exact_epsilon),
    /// recomputed from the new rows, never assumed). For ε-LDP it is at most this design's. For
    /// ε-metric DP with `p = 1` it is at most `(B_in − 1)·max(P_ij/P_i'j − 1)` over adjacent levels
    /// `i, i'` of this design — the Lipschitz constant of the log-probabilities over continuous
    /// inputs, `≤ (B_in − 1)(e^{ε/(B_in − 1)} − 1)` — because a fine step of width
    /// `1/(B' − 1)` moves `λ` by at most `(B_in − 1)/(B' − 1)` and `|d ln((1−λ)a + λb)/dλ| ≤
    /// |b − a|/min(a, b)`. For `p = 2` the metric ε grows with the refinement (module docs: no
    /// finite constant over continuous inputs).
    ///
    /// Errors if `input_bits` is below this design's or above [`MAX_DESIGN_BITS`].
    pub fn refine(&self, input_bits: u32) -> Result<MvuDesign> {
        if !(self.input_bits..=MAX_DESIGN_BITS).contains(&input_bits) {
            return Err(MechanismError::invalid(
                "input_bits",
                f64::from(input_bits),
                format!(
                    "must be in {}..={MAX_DESIGN_BITS} (at least the design's input bits)",
                    self.input_bits
                ),
            ));
        }
        let fine = 1usize << input_bits;
        let rows = (0..fine)
            .map(|i| {
                let (k, lam) = locate(i as f64 / (fine - 1) as f64, self.num_inputs(), 0.0, 1.0)?;
                Ok(mix_rows(&self.p[k], &self.p[k + 1], lam))
            })
            .collect::<Result<Vec<_>>>()?;
        let epsilon = max_scaled_log_ratio(&rows, self.constraint);
        MvuDesign::new(
            input_bits,
            self.output_bits,
            epsilon,
            self.constraint,
            rows,
            self.alphabet.clone(),
        )
    }

    /// The largest violations of (1a)–(1d) (see [`Violations`]).
    pub fn violations(&self) -> Violations {
        let mut row_sum = 0.0f64;
        let mut negativity = 0.0f64;
        let mut unbiasedness = 0.0f64;
        for (i, row) in self.p.iter().enumerate() {
            row_sum = row_sum.max((row.iter().sum::<f64>() - 1.0).abs());
            negativity = negativity.max(row.iter().fold(0.0f64, |m, &v| m.max(-v)));
            let mean: f64 = row.iter().zip(&self.alphabet).map(|(p, a)| p * a).sum();
            unbiasedness = unbiasedness.max((mean - self.input_point(i)).abs());
        }
        let dp = if negativity > 0.0 {
            f64::INFINITY
        } else {
            let n = self.num_inputs();
            let mut worst = 0.0f64;
            for j in 0..self.num_outputs() {
                if self.p.iter().all(|r| r[j] == 0.0) {
                    continue;
                }
                for i in 0..n {
                    for i2 in 0..n {
                        if i == i2 {
                            continue;
                        }
                        let (a, b) = (self.p[i][j], self.p[i2][j]);
                        let excess = if a > 0.0 && b > 0.0 {
                            a.ln() - b.ln() - self.epsilon * self.constraint.dist(i, i2, n)
                        } else if a > 0.0 {
                            f64::INFINITY
                        } else {
                            0.0
                        };
                        worst = worst.max(excess);
                    }
                }
            }
            worst
        };
        Violations {
            row_sum,
            negativity,
            dp,
            unbiasedness,
        }
    }
}

/// The MVU mechanism on `[lo, hi]` (paper 004 Alg. 1 online phase) using an [`MvuDesign`].
/// Name `"mvu"`. See the [module docs](self) for its exact ε and variance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mvu {
    design: MvuDesign,
    lo: f64,
    hi: f64,
    /// Cumulative integer weights per row; the last is `2^64` (realized `P(j|i) = w_ij/2^64`).
    #[serde(skip)]
    cumulative: Vec<Vec<u128>>,
    /// Realized probabilities `w_ij/2^64`.
    #[serde(skip)]
    realized: Vec<Vec<f64>>,
    #[serde(skip)]
    grid_var: Vec<f64>,
    #[serde(skip)]
    epsilon: f64,
    #[serde(skip)]
    worst_case: f64,
}

const TWO_64: u128 = 1u128 << 64;

/// Integer weights of a row (normalized), summing exactly to `2^64`.
fn integer_weights(row: &[f64]) -> Vec<u128> {
    let s: f64 = row.iter().sum();
    let scale = 2f64.powi(64);
    let mut w: Vec<u128> = row
        .iter()
        .map(|&p| (p / s * scale).round().max(0.0) as u128)
        .collect();
    let total: u128 = w.iter().sum();
    let big = (0..w.len()).max_by_key(|&j| w[j]).unwrap_or(0);
    if total > TWO_64 {
        w[big] -= total - TWO_64;
    } else {
        w[big] += TWO_64 - total;
    }
    w
}

impl Mvu {
    /// The mechanism using `design` on inputs `[lo, hi]` (mapped affinely to the design's
    /// `[0, 1]`). Errors if the range is invalid, or if rounding the rows to `2^{-64}` would make a
    /// positive probability zero (entries below ~`5e-20`).
    pub fn new(design: MvuDesign, lo: f64, hi: f64) -> Result<Mvu> {
        check_range(lo, hi)?;
        let weights: Vec<Vec<u128>> = design.p.iter().map(|r| integer_weights(r)).collect();
        for (row, w) in design.p.iter().zip(&weights) {
            if row.iter().zip(w).any(|(&p, &wi)| p > 0.0 && wi == 0) {
                return Err(MechanismError::invalid(
                    "p",
                    row.iter()
                        .cloned()
                        .fold(f64::INFINITY, |m, v| if v > 0.0 { m.min(v) } else { m }),
                    "positive probabilities below 2^-64 cannot be sampled",
                ));
            }
        }
        let scale = 2f64.powi(-64);
        let realized: Vec<Vec<f64>> = weights
            .iter()
            .map(|w| w.iter().map(|&v| v as f64 * scale).collect())
            .collect();
        let cumulative = weights
            .iter()
            .map(|w| {
                let mut c = 0u128;
                w.iter()
                    .map(|&v| {
                        c += v;
                        c
                    })
                    .collect()
            })
            .collect();
        let epsilon = max_scaled_log_ratio(&realized, DpConstraint::Ldp);
        let grid_var = row_variances(&realized, &design.alphabet);
        let h = 1.0 / (design.num_inputs() - 1) as f64;
        let worst01 = uniform_grid_worst_case(&grid_var, h);
        let worst_case = worst01 * (hi - lo) * (hi - lo);
        if !(epsilon.is_finite() && worst_case.is_finite()) {
            return Err(MechanismError::Numerical(format!(
                "the design's realized ε ({epsilon}) or variance ({worst_case}) is not finite"
            )));
        }
        Ok(Mvu {
            design,
            lo,
            hi,
            cumulative,
            realized,
            grid_var,
            epsilon,
            worst_case,
        })
    }

    /// The design.
    pub fn design(&self) -> &MvuDesign {
        &self.design
    }

    /// The probabilities the sampler realizes, `w_ij/2^64` (rows = input levels).
    pub fn realized_p(&self) -> &[Vec<f64>] {
        &self.realized
    }

    /// The realized metric ε on the grid, `max ln(P_ij/P_i'j)/dist(i,i')`, for the design's
    /// constraint (equal to the LDP ε for [`DpConstraint::Ldp`]).
    pub fn metric_epsilon(&self) -> f64 {
        max_scaled_log_ratio(&self.realized, self.design.constraint)
    }

    fn levels(&self) -> usize {
        self.design.num_inputs()
    }

    /// Draws `j` from the realized row `i` (one 64-bit word; exact).
    pub fn sample_row<R: Rng + ?Sized>(&self, i: usize, rng: &mut R) -> usize {
        let r = u128::from(rng.next_u64());
        let c = &self.cumulative[i];
        c.partition_point(|&v| v <= r).min(c.len() - 1)
    }

    /// What a device sends: `j ∈ 0..B_out` (dither `x` to the input grid, draw from the row).
    pub fn encode<R: Rng + CryptoRng + ?Sized>(&self, x: f64, rng: &mut R) -> Result<usize> {
        let (i, lam) = locate(x, self.levels(), self.lo, self.hi)?;
        Ok(self.sample_row(round_index(i, lam, rng), rng))
    }

    /// The server's estimate `lo + (hi − lo)·a_j`; errors if `j ≥ B_out`.
    pub fn decode(&self, j: usize) -> Result<f64> {
        let a = self.design.alphabet.get(j).ok_or_else(|| {
            MechanismError::invalid(
                "index",
                j as f64,
                format!("must be < {}", self.design.num_outputs()),
            )
        })?;
        Ok(self.lo + (self.hi - self.lo) * a)
    }

    /// The exact distribution of [`encode`](Self::encode) at `x`: `(1−λ)P_i + λP_{i+1}`
    /// (realized probabilities).
    pub fn pmf(&self, x: f64) -> Result<Vec<f64>> {
        let (i, lam) = locate(x, self.levels(), self.lo, self.hi)?;
        Ok(mix_rows(&self.realized[i], &self.realized[i + 1], lam))
    }

    /// Exact `E[(x̂ − x)²]` at `x`: `(hi−lo)²((1−λ)v_i + λv_{i+1} + λ(1−λ)h²)`.
    pub fn variance_scalar(&self, x: f64) -> Result<f64> {
        let (i, lam) = locate(x, self.levels(), self.lo, self.hi)?;
        let h = 1.0 / (self.levels() - 1) as f64;
        let w = self.hi - self.lo;
        Ok(w * w * interval_value(self.grid_var[i], self.grid_var[i + 1], h, lam))
    }
}

impl LocalRandomizer for Mvu {
    fn name(&self) -> &'static str {
        "mvu"
    }

    fn domain(&self) -> Domain {
        Domain::Interval {
            lo: self.lo,
            hi: self.hi,
        }
    }

    /// `Pure { ε = max_j ln(max_i w_ij / min_i w_ij) }` over the realized weights (module docs:
    /// grid points suffice for continuous inputs).
    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.epsilon,
        }
    }

    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain().check(x)?;
        self.variance_scalar(x[0])
    }

    fn worst_case_variance(&self) -> f64 {
        self.worst_case
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        check_out_len(out, 1)?;
        self.domain().check(x)?;
        out[0] = self.decode(self.encode(x[0], rng)?)?;
        Ok(())
    }
}

/// Largest number of outcomes `B_out^d` for which [`MvuVector::pmf`] enumerates the exact law.
pub const MAX_VECTOR_PMF_OUTCOMES: usize = 4096;

/// The vector MVU mechanism of paper 004 §4.2 (Lemma 6) on the `ℓp` ball of radius `radius`
/// (`p = 1` or `2`) in `d` dimensions.
///
/// Coordinates lie in `[−radius, radius]`; each is mapped to `y = (x + radius)/(2·radius)`,
/// the vector is **conditionally dithered** ([`crate::dither::conditional_dither_vector_indices`])
/// so that the dithered vector has `ℓp` norm at most `dither_bound` (≥ `radius`), then every
/// coordinate goes through the scalar metric-DP design with power `p`.
///
/// **Privacy.** Two dithered vectors in the ball of radius `R = dither_bound` differ by at most
/// `2R` in `ℓp`, i.e. `R/radius` after rescaling, so
/// `Σ_l dist(i_l, i'_l) ≤ (R/radius)^p` and the output ratio is at most
/// `exp(ε_metric·(R/radius)^p)` (Lemma 6), with `ε_metric` the realized metric ε of the design.
/// The output law given `x` is a mixture over dithered vectors, which does not increase the ratio:
/// [`MvuVector::epsilon`] is this computed bound.
///
/// **Bias.** Unbiased when the bound is never active; otherwise conditional dithering adds a bias
/// of order `P(‖Dither(x)‖_p > R)` (see [`crate::dither`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MvuVector {
    scalar: Mvu,
    dim: usize,
    p: u32,
    radius: f64,
    dither_bound: f64,
    max_draws: usize,
}

impl MvuVector {
    /// Builds the vector mechanism. The design must be a metric design with power `p`;
    /// `radius > 0`, `dither_bound ≥ radius`, `dim ≥ 1`, `max_draws ≥ 1` (rejection-sampling cap).
    pub fn new(
        design: MvuDesign,
        dim: usize,
        radius: f64,
        dither_bound: f64,
        max_draws: usize,
    ) -> Result<MvuVector> {
        let p = match design.constraint() {
            DpConstraint::Metric { power } => power,
            DpConstraint::Ldp => {
                return Err(MechanismError::invalid(
                    "constraint",
                    0.0,
                    "the vector mechanism needs a metric-DP design (Lemma 6)",
                ));
            }
        };
        check_positive("radius", radius)?;
        check_positive("dither_bound", dither_bound)?;
        if dither_bound < radius {
            return Err(MechanismError::invalid(
                "dither_bound",
                dither_bound,
                format!("must be >= radius = {radius}"),
            ));
        }
        if dim == 0 {
            return Err(MechanismError::invalid("dim", 0.0, "must be >= 1"));
        }
        if max_draws == 0 {
            return Err(MechanismError::invalid("max_draws", 0.0, "must be >= 1"));
        }
        let scalar = Mvu::new(design, -radius, radius)?;
        Ok(MvuVector {
            scalar,
            dim,
            p,
            radius,
            dither_bound,
            max_draws,
        })
    }

    /// The scalar mechanism applied to each coordinate (on `[−radius, radius]`).
    pub fn scalar(&self) -> &Mvu {
        &self.scalar
    }

    /// The input domain: the `ℓp` ball of radius `radius`.
    pub fn domain(&self) -> Domain {
        if self.p == 1 {
            Domain::L1Ball {
                dim: self.dim,
                radius: self.radius,
            }
        } else {
            Domain::L2Ball {
                dim: self.dim,
                radius: self.radius,
            }
        }
    }

    /// The bound `R` on the dithered vector's `ℓp` norm.
    pub fn dither_bound(&self) -> f64 {
        self.dither_bound
    }

    /// The ε-LDP bound of Lemma 6: `ε_metric·(dither_bound/radius)^p` (struct docs).
    pub fn epsilon(&self) -> f64 {
        self.scalar.metric_epsilon() * (self.dither_bound / self.radius).powi(self.p as i32)
    }

    /// The ε for neighbouring inputs whose *dithered* vectors differ by at most `distance` in
    /// `ℓp` (original units): `ε_metric·(distance/(2·radius))^p` (e.g. the add/remove setting,
    /// where the paper accounts with the rescaled sensitivity 1/2).
    pub fn epsilon_for_distance(&self, distance: f64) -> f64 {
        self.scalar.metric_epsilon() * (distance / (2.0 * self.radius)).powi(self.p as i32)
    }

    /// The exact law of the released letters at `x`, marginal over the dither: outcome
    /// `o = Σ_l j_l·B_out^l` (coordinate 0 the least significant digit, `j_l` the letter of
    /// coordinate `l`) has probability
    /// `P(o | x) = Σ_v w(v | x)·Π_l P_{v_l j_l}` over the dithered index vectors `v` with
    /// `‖g(v)‖_p ≤ dither_bound`, where `w(v | x) = Π_l λ_l^{[v_l = i_l + 1]}(1 − λ_l)^{[v_l = i_l]}`
    /// renormalized over the accepted `v` (conditional dithering is rejection sampling: the law
    /// given acceptance; `max_draws` only adds the chance of an error). Realized rows.
    ///
    /// Conditioned on `v` (the device's own randomness) the ratio of two outputs can reach
    /// [`MvuVector::epsilon`]; an observer who does not see `v` sees this mixture, whose largest
    /// ratio can be smaller (`docs/AUDIT.md`, "Vector MVU"). Errors when `B_out^d` exceeds
    /// [`MAX_VECTOR_PMF_OUTCOMES`], when `x` is outside the domain, or when no dithered vector of
    /// `x` is accepted ([`MechanismError::Infeasible`]: the mechanism cannot run at `x`).
    pub fn pmf(&self, x: &[f64]) -> Result<Vec<f64>> {
        self.domain().check(x)?;
        let b_out = self.scalar.design().num_outputs();
        let total = (0..self.dim)
            .try_fold(1usize, |acc, _| {
                acc.checked_mul(b_out)
                    .filter(|&t| t <= MAX_VECTOR_PMF_OUTCOMES)
            })
            .ok_or_else(|| {
                MechanismError::invalid(
                    "dim",
                    self.dim as f64,
                    format!(
                        "the exact law has {b_out}^dim outcomes; at most \
                         {MAX_VECTOR_PMF_OUTCOMES} are enumerated"
                    ),
                )
            })?;
        if self.dim > 12 {
            return Err(MechanismError::invalid(
                "dim",
                self.dim as f64,
                "the exact law enumerates 2^dim dither patterns; at most dim = 12",
            ));
        }
        let levels = self.scalar.levels();
        let (lo, hi) = (-self.radius, self.radius);
        let cells = x
            .iter()
            .map(|&v| locate(v, levels, lo, hi))
            .collect::<Result<Vec<_>>>()?;
        let rows = self.scalar.realized_p();
        let mut law = vec![0.0; total];
        let mut mass = 0.0;
        let mut idx = vec![0usize; self.dim];
        let mut vals = vec![0.0; self.dim];
        for mask in 0u32..(1u32 << self.dim) {
            let mut w = 1.0;
            for (l, &(i, lam)) in cells.iter().enumerate() {
                let up = (mask >> l) & 1 == 1;
                w *= if up { lam } else { 1.0 - lam };
                idx[l] = (i + usize::from(up)).min(levels - 1);
                vals[l] = grid_point(idx[l], levels, lo, hi);
            }
            if w == 0.0 || lp_norm(&vals, self.p) > self.dither_bound {
                continue;
            }
            mass += w;
            for (o, q) in law.iter_mut().enumerate() {
                let mut rem = o;
                let mut prob = w;
                for &i in &idx {
                    prob *= rows[i][rem % b_out];
                    rem /= b_out;
                }
                *q += prob;
            }
        }
        if mass <= 0.0 {
            return Err(MechanismError::Infeasible(format!(
                "conditional dithering: no dithered vector of the input has ℓ{} norm ≤ {}",
                self.p, self.dither_bound
            )));
        }
        law.iter_mut().for_each(|q| *q /= mass);
        Ok(law)
    }

    /// Privatizes `x` (in the domain) into `out`; returns the number of dithering draws.
    pub fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<usize> {
        self.domain().check(x)?;
        check_out_len(out, self.dim)?;
        let mut idx = vec![0usize; self.dim];
        let draws = conditional_dither_vector_indices(
            x,
            self.scalar.design().input_bits(),
            -self.radius,
            self.radius,
            self.p,
            self.dither_bound,
            self.max_draws,
            &mut idx,
            rng,
        )?;
        for (o, &i) in out.iter_mut().zip(&idx) {
            *o = self.scalar.decode(self.scalar.sample_row(i, rng))?;
        }
        Ok(draws)
    }

    /// Privatizes `x` into a new vector.
    pub fn privatize<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        rng: &mut R,
    ) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.dim];
        self.privatize_into(x, &mut out, rng)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid_rr::GridRr;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{
        assert_chi_square_gof, assert_unbiased_with_variance, assert_z, z_mean_known_variance,
    };

    /// The unbiased gRR design on `b` bits (P = RR matrix, alphabet from GridRr on [0,1]).
    pub(crate) fn grr_design(eps: f64, bits: u32) -> MvuDesign {
        let g = GridRr::unbiased_grr(eps, bits, 0.0, 1.0).unwrap();
        let k = g.num_points();
        let p: Vec<Vec<f64>> = (0..k)
            .map(|i| {
                (0..k)
                    .map(|j| {
                        if i == j {
                            g.keep_probability()
                        } else {
                            g.other_probability()
                        }
                    })
                    .collect()
            })
            .collect();
        MvuDesign::new(bits, bits, eps, DpConstraint::Ldp, p, g.alphabet().to_vec()).unwrap()
    }

    /// The excess and the exact ε agree: excess(ε) ≤ 0 exactly when ε ≥ the exact ε, and for
    /// ε-LDP excess(ε) = exact ε − ε; checked against a brute-force double loop on random rows.
    #[test]
    fn log_ratio_excess_matches_brute_force() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(11);
        for c in [
            DpConstraint::Ldp,
            DpConstraint::Metric { power: 1 },
            DpConstraint::Metric { power: 2 },
        ] {
            for _ in 0..20 {
                let (n, m) = (rng.random_range(2..7usize), rng.random_range(1..5usize));
                let rows: Vec<Vec<f64>> = (0..n)
                    .map(|_| (0..m).map(|_| rng.random_range(0.01..1.0)).collect())
                    .collect();
                let eps = rng.random_range(0.1..3.0);
                let mut brute = f64::NEG_INFINITY;
                let mut brute_scaled = 0.0f64;
                #[allow(clippy::needless_range_loop)] // i, k index rows; j the column
                for j in 0..m {
                    for i in 0..n {
                        for k in 0..n {
                            if i != k {
                                let l = rows[i][j].ln() - rows[k][j].ln();
                                brute = brute.max(l - eps * c.dist(i, k, n));
                                brute_scaled = brute_scaled.max(l / c.dist(i, k, n));
                            }
                        }
                    }
                }
                let got = max_log_ratio_excess(&rows, c, eps);
                assert!((got - brute).abs() < 1e-12, "{c:?}: {got} vs {brute}");
                let exact = max_scaled_log_ratio(&rows, c);
                assert!((exact - brute_scaled).abs() < 1e-12);
                assert!(max_log_ratio_excess(&rows, c, exact * (1.0 + 1e-12)) <= 1e-12);
                if c == DpConstraint::Ldp {
                    assert!((got - (exact - eps)).abs() < 1e-12);
                }
            }
        }
        let mixed = vec![vec![0.0, 1.0], vec![0.5, 0.5]];
        assert_eq!(
            max_log_ratio_excess(&mixed, DpConstraint::Ldp, 1.0),
            f64::INFINITY
        );
    }

    #[test]
    fn grr_design_matches_grid_rr() {
        for (eps, bits) in [(1.0, 3), (5.0, 2), (0.5, 1)] {
            let d = grr_design(eps, bits);
            assert!((d.exact_epsilon() - eps).abs() < 1e-12);
            assert!(d.violations().max() < 1e-12);
            let g = GridRr::unbiased_grr(eps, bits, -1.0, 2.0).unwrap();
            let m = Mvu::new(d, -1.0, 2.0).unwrap();
            assert!((m.guarantee().epsilon() - eps).abs() < 1e-12);
            for x in [-1.0, -0.3, 0.77, 2.0] {
                let (a, b) = (m.variance_at(&[x]).unwrap(), g.variance_at(&[x]).unwrap());
                assert!((a - b).abs() < 1e-10 * b, "{a} vs {b}");
            }
            assert!(
                (m.worst_case_variance() - g.worst_case_variance()).abs()
                    < 1e-10 * g.worst_case_variance()
            );
        }
    }

    /// A non-trivial feasible design: gRR on 2 bits composed with 3-bit dithering (8 inputs).
    fn dithered_design() -> MvuDesign {
        let g = GridRr::unbiased_grr(2.0, 2, 0.0, 1.0).unwrap();
        let p: Vec<Vec<f64>> = (0..8).map(|i| g.pmf(i as f64 / 7.0).unwrap()).collect();
        MvuDesign::new(3, 2, 2.0, DpConstraint::Ldp, p, g.alphabet().to_vec()).unwrap()
    }

    #[test]
    fn pmf_ratios_unbiasedness_and_variance_are_exact() {
        let m = Mvu::new(dithered_design(), -1.0, 1.0).unwrap();
        let eps = m.guarantee().epsilon();
        assert!(eps <= 2.0 + 1e-12 && eps > 2.0 - 1e-9, "{eps}");
        let mut rng = seeded_rng_for_experiments(8);
        let mut xs: Vec<f64> = (0..8).map(|i| -1.0 + 2.0 * i as f64 / 7.0).collect();
        for _ in 0..40 {
            xs.push(rand::RngExt::random::<f64>(&mut rng) * 2.0 - 1.0);
        }
        let pmfs: Vec<Vec<f64>> = xs.iter().map(|&x| m.pmf(x).unwrap()).collect();
        let mut max_ratio = 0.0f64;
        for p1 in &pmfs {
            for p2 in &pmfs {
                for (a, b) in p1.iter().zip(p2) {
                    max_ratio = max_ratio.max(a / b);
                }
            }
        }
        assert!(max_ratio <= eps.exp() * (1.0 + 1e-12));
        assert!(max_ratio >= eps.exp() * (1.0 - 1e-12));
        for (&x, pmf) in xs.iter().zip(&pmfs) {
            let alpha: Vec<f64> = (0..4).map(|j| m.decode(j).unwrap()).collect();
            let mean: f64 = pmf.iter().zip(&alpha).map(|(p, a)| p * a).sum();
            assert!((mean - x).abs() < 1e-12, "x={x} mean={mean}");
            let var: f64 = pmf
                .iter()
                .zip(&alpha)
                .map(|(p, a)| p * (a - x).powi(2))
                .sum();
            let v = m.variance_at(&[x]).unwrap();
            assert!((var - v).abs() < 1e-10 * v);
            assert!(v <= m.worst_case_variance() * (1.0 + 1e-12));
        }
    }

    #[test]
    fn monte_carlo_unbiased_with_predicted_variance() {
        // Two-sided z-tests at α = 6e-7 each (|z| < 4.99): the mean error against 0 with the
        // exact variance, and the mean squared error against the exact variance with its standard
        // error from the sample (the empirical fourth moment); 3 inputs, FPR ≤ 3.6e-6.
        let m = Mvu::new(dithered_design(), -1.0, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(9);
        let n = 400_000;
        for x in [-0.9, 0.1, 0.6] {
            let v = m.variance_at(&[x]).unwrap();
            let errors: Vec<f64> = (0..n)
                .map(|_| m.privatize(&[x], &mut rng).unwrap()[0] - x)
                .collect();
            assert_unbiased_with_variance(&errors, v, 6e-7, &format!("x = {x}"));
        }
    }

    #[test]
    fn sampler_matches_rows_chi_square() {
        // Pearson chi-square against each row at α = 3e-7 (3 dof: critical value 33.4), 8 rows.
        let m = Mvu::new(dithered_design(), 0.0, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(10);
        let n = 200_000;
        for i in 0..8 {
            let mut c = [0u64; 4];
            for _ in 0..n {
                c[m.sample_row(i, &mut rng)] += 1;
            }
            assert_chi_square_gof(&c, &m.realized_p()[i], 3e-7, &format!("row {i}"));
        }
    }

    #[test]
    fn serde_round_trip_and_validation() {
        let d = dithered_design();
        let s = serde_json::to_string(&d).unwrap();
        let back: MvuDesign = serde_json::from_str(&s).unwrap();
        assert_eq!(back, d);
        // Tampering is caught on load.
        let mut v: serde_json::Value = serde_json::from_str(&s).unwrap();
        v["epsilon"] = serde_json::json!(1.5);
        assert!(serde_json::from_value::<MvuDesign>(v.clone()).is_err());
        v["epsilon"] = serde_json::json!(2.0);
        v["alphabet"][0] = serde_json::json!(0.0);
        assert!(serde_json::from_value::<MvuDesign>(v.clone()).is_err());
        let p = d.p().to_vec();
        let a = d.alphabet().to_vec();
        let mut bad = p.clone();
        bad[0][0] += 1e-6;
        assert!(MvuDesign::new(3, 2, 2.0, DpConstraint::Ldp, bad, a.clone()).is_err());
        let mut bad = p.clone();
        bad[0][0] = -0.0 - 1e-300;
        assert!(MvuDesign::new(3, 2, 2.0, DpConstraint::Ldp, bad, a.clone()).is_err());
        assert!(MvuDesign::new(3, 3, 2.0, DpConstraint::Ldp, p.clone(), a.clone()).is_err());
        assert!(MvuDesign::new(0, 2, 2.0, DpConstraint::Ldp, p.clone(), a.clone()).is_err());
        assert!(MvuDesign::new(3, 2, f64::NAN, DpConstraint::Ldp, p.clone(), a.clone()).is_err());
        assert!(
            MvuDesign::new(
                3,
                2,
                2.0,
                DpConstraint::Metric { power: 3 },
                p.clone(),
                a.clone()
            )
            .is_err()
        );
        let mut bad = p.clone();
        bad[1][1] = f64::NAN;
        assert!(MvuDesign::new(3, 2, 2.0, DpConstraint::Ldp, bad, a).is_err());
        let m = Mvu::new(d, 0.0, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(0);
        assert!(m.privatize(&[1.5], &mut rng).is_err());
        assert!(m.privatize(&[f64::NAN], &mut rng).is_err());
        assert!(m.decode(4).is_err());
        assert_eq!(m.name(), "mvu");
    }

    #[test]
    fn metric_epsilon_and_vector_bound() {
        // gRR with 3 bits at ε = 1 is ε-LDP, hence (ε/dist_min)-metric... check the metric ε
        // directly: ln ratio / dist with dist = |i−i'|/7; the largest is at adjacent points.
        let d = grr_design(1.0, 3);
        let p = d.p().to_vec();
        let metric = MvuDesign::new(
            3,
            3,
            7.0,
            DpConstraint::Metric { power: 1 },
            p,
            d.alphabet().to_vec(),
        )
        .unwrap();
        assert!((metric.exact_epsilon() - 7.0).abs() < 1e-12);
        let v = MvuVector::new(metric, 4, 1.0, 1.0, 100).unwrap();
        assert!((v.epsilon() - 7.0).abs() < 1e-9);
        assert!((v.epsilon_for_distance(1.0) - 3.5).abs() < 1e-9);
        let mut rng = seeded_rng_for_experiments(1);
        let out = v.privatize(&[0.1, -0.2, 0.3, 0.0], &mut rng).unwrap();
        assert_eq!(out.len(), 4);
        assert!(v.privatize(&[0.6, -0.6, 0.0, 0.0], &mut rng).is_err());
        assert!(MvuVector::new(grr_design(1.0, 3), 4, 1.0, 1.0, 10).is_err());
    }

    #[test]
    fn vector_epsilon_bounds_the_exact_product_ratio() {
        // 2 bits, gRR rows at ε_l = 0.7 read as an ℓ1 metric design: metric ε = 3·0.7.
        let metric = l1_metric_from_grr(0.7, 2);
        for bound in [1.0, 1.5, 2.0] {
            let v = MvuVector::new(metric.clone(), 2, 1.0, bound, 10).unwrap();
            let exact = exact_vector_log_ratio(&v, bound);
            assert!(
                exact <= v.epsilon() + 1e-12,
                "R={bound}: exact {exact} > {}",
                v.epsilon()
            );
            assert!(exact > 0.0);
        }
    }

    /// The exact ε of a 2-coordinate [`MvuVector`] on `[−1, 1]²` whose dithered vectors have
    /// `‖·‖₁ ≤ bound`: the largest `Σ_l max_j ln(P_{i_l j}/P_{i'_l j})` over pairs of grid vectors
    /// in the ball (the product mechanism's largest log ratio; realized rows).
    fn exact_vector_log_ratio(v: &MvuVector, bound: f64) -> f64 {
        let rows = v.scalar().realized_p();
        let n = rows.len();
        let grid: Vec<f64> = (0..n)
            .map(|i| -1.0 + 2.0 * i as f64 / (n - 1) as f64)
            .collect();
        let lr = |i: usize, k: usize| {
            rows[i]
                .iter()
                .zip(&rows[k])
                .map(|(a, b)| a.ln() - b.ln())
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let mut inside = vec![];
        for a in 0..n {
            for b in 0..n {
                if f64::abs(grid[a]) + f64::abs(grid[b]) <= bound + 1e-12 {
                    inside.push((a, b));
                }
            }
        }
        let mut exact = 0.0f64;
        for &(a, b) in &inside {
            for &(c, d) in &inside {
                exact = exact.max(lr(a, c) + lr(b, d));
            }
        }
        exact
    }

    /// The `bits`-bit gRR rows at ε_l read as an ℓ1 metric design (metric ε = (B − 1)·ε_l,
    /// attained by adjacent levels).
    fn l1_metric_from_grr(eps_l: f64, bits: u32) -> MvuDesign {
        let g = grr_design(eps_l, bits);
        let n = g.num_inputs() as f64 - 1.0;
        MvuDesign::new(
            bits,
            bits,
            eps_l * n * (1.0 + 1e-12),
            DpConstraint::Metric { power: 1 },
            g.p().to_vec(),
            g.alphabet().to_vec(),
        )
        .unwrap()
    }

    #[test]
    fn refine_keeps_the_law_and_bounds_the_metric_epsilon() {
        let d = l1_metric_from_grr(0.7, 2);
        let coarse = d.exact_epsilon();
        assert!((coarse - 2.1).abs() < 1e-12, "{coarse}");
        // 4 bits: 16 levels, every 5th is a level of the 4-level design.
        let f = d.refine(4).unwrap();
        assert_eq!((f.num_inputs(), f.num_outputs()), (16, 4));
        assert!(f.violations().unbiasedness < 1e-12);
        assert_eq!(f.alphabet(), d.alphabet());
        // Rows by hand: fine level 5k + r is (1 − r/5)·P_k + (r/5)·P_{k+1}.
        for i in 0..16usize {
            let (k, r) = (i / 5, (i % 5) as f64 / 5.0);
            for j in 0..4 {
                let want = if r == 0.0 {
                    d.p()[k][j]
                } else {
                    (1.0 - r) * d.p()[k][j] + r * d.p()[k + 1][j]
                };
                assert!((f.p()[i][j] - want).abs() < 1e-15, "row {i}");
            }
        }
        // The metric ε is computed from the rows: at least the coarse one (the coarse levels are
        // fine levels at the same distance), at most the Lipschitz bound 3·(max ratio − 1).
        let fine = f.exact_epsilon();
        assert_eq!(f.epsilon(), fine);
        let mut lip = 0.0f64;
        for k in 0..3 {
            for j in 0..4 {
                let (a, b) = (d.p()[k][j], d.p()[k + 1][j]);
                lip = lip.max(a.max(b) / a.min(b) - 1.0);
            }
        }
        let lip = 3.0 * lip;
        assert!(
            fine >= coarse - 1e-12 && fine <= lip + 1e-12,
            "{coarse} {fine} {lip}"
        );
        // Here the steepest fine step is the last fifth of a cell on the diagonal letter:
        // 15·ln(0.2·e^0.7 + 0.8).
        let want = 15.0 * (0.2 * 0.7f64.exp() + 0.8).ln();
        assert!((fine - want).abs() < 1e-9, "{fine} vs {want}");
        // Same bits: the same rows; invalid bits are errors.
        let same = d.refine(2).unwrap();
        for (r, s) in same.p().iter().zip(d.p()) {
            for (x, y) in r.iter().zip(s) {
                assert!((x - y).abs() < 1e-15);
            }
        }
        assert!(d.refine(1).is_err());
        assert!(d.refine(MAX_DESIGN_BITS + 1).is_err());
        // LDP: mixtures never increase the largest ratio.
        let g = grr_design(1.5, 3);
        assert!(g.refine(6).unwrap().exact_epsilon() <= g.exact_epsilon() + 1e-12);
    }

    #[test]
    fn refined_vector_epsilon_bounds_the_exact_product_ratio() {
        // d = 2 on the refined 16-level grid: the exact largest log ratio of the product
        // mechanism over all pairs of grid vectors with ‖·‖₁ ≤ R is at most MvuVector::epsilon.
        let f = l1_metric_from_grr(0.7, 2).refine(4).unwrap();
        for bound in [1.0, 1.1, 1.5] {
            let v = MvuVector::new(f.clone(), 2, 1.0, bound, 10).unwrap();
            let exact = exact_vector_log_ratio(&v, bound);
            let eps = v.epsilon();
            assert!(exact <= eps + 1e-12, "R={bound}: exact {exact} > {eps}");
            // ε = realized metric ε · R: the split is computed from the rows.
            assert!((eps - v.scalar().metric_epsilon() * bound).abs() < 1e-12);
            assert!(exact > 0.0);
        }
    }

    #[test]
    fn refined_vector_mechanism_is_unbiased_on_l1_data() {
        // The paper-004 ℓ1 setting: d = 128, an ℓ1-normalized positive vector, a 9-bit input
        // grid (a 3-bit ℓ1 metric design refined), conditional dithering to ‖·‖₁ ≤ R with
        // R = 1 + d·h/2, h = 2/511. Every draw is checked to be accepted at once (the bound never
        // active), so the reports are the product of the scalar mechanisms, each unbiased with
        // the exact variance `variance_at`. Two-sided z-tests: each coordinate at α = 4e-8
        // (|z| < 5.49; 128 coordinates: ≤ 5.1e-6) and the sum of the coordinates at α = 6e-7.
        let f = l1_metric_from_grr(2.0, 3).refine(9).unwrap();
        let d = 128;
        let bound = 1.0 + d as f64 * (2.0 / 511.0) / 2.0;
        let v = MvuVector::new(f, d, 1.0, bound, 100).unwrap();
        let raw: Vec<f64> = (0..d).map(|l| 1.0 + ((l * 37) % 101) as f64).collect();
        let total: f64 = raw.iter().sum();
        let x: Vec<f64> = raw.iter().map(|r| r / total).collect();
        let mut rng = seeded_rng_for_experiments(13);
        let n = 20_000;
        let mut sum = vec![0.0; d];
        let mut out = vec![0.0; d];
        for _ in 0..n {
            let draws = v.privatize_into(&x, &mut out, &mut rng).unwrap();
            assert_eq!(draws, 1);
            sum.iter_mut().zip(&out).for_each(|(s, o)| *s += o);
        }
        let nf = n as f64;
        let mut var_total = 0.0;
        for l in 0..d {
            let var = v.scalar().variance_at(&[x[l]]).unwrap();
            var_total += var;
            let z = z_mean_known_variance(sum[l] / nf, n, x[l], var);
            assert_z(z, 4e-8, &format!("coordinate {l}"));
        }
        let z = z_mean_known_variance(sum.iter().sum::<f64>() / nf, n, 1.0, var_total);
        assert_z(z, 6e-7, "sum");
    }

    #[test]
    fn vector_pmf_is_the_law_the_sampler_draws() {
        // d = 2, 4 levels on [−1, 1], ℓ1 ball of radius 1, dither bound 1 + h/2 (h = 2/3): at
        // x = (0.5, 0.4) the bound rejects the pattern (1, 1), so the law is the renormalized
        // mixture, not the product of the scalar laws. Chi-square goodness of fit of 200,000
        // draws against `pmf` at α = 10⁻⁶, at that point and at a grid point (no dither);
        // and the product law is rejected (so the test can tell the two apart).
        let f = l1_metric_from_grr(0.7, 2);
        let bound = 1.0 + 1.0 / 3.0;
        let v = MvuVector::new(f, 2, 1.0, bound, 100).unwrap();
        let letter = |z: f64| {
            (0..4)
                .find(|&j| v.scalar().decode(j).unwrap() == z)
                .unwrap()
        };
        let mut rng = seeded_rng_for_experiments(21);
        for x in [[0.5, 0.4], [1.0, 0.0], [-1.0 / 3.0, 1.0 / 3.0]] {
            let law = v.pmf(&x).unwrap();
            assert_eq!(law.len(), 16);
            assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            let mut counts = vec![0u64; 16];
            for _ in 0..200_000 {
                let z = v.privatize(&x, &mut rng).unwrap();
                counts[letter(z[0]) + 4 * letter(z[1])] += 1;
            }
            assert_chi_square_gof(&counts, &law, 1e-6, &format!("x = {x:?}"));
            if x == [0.5, 0.4] {
                let (p0, p1) = (v.scalar().pmf(x[0]).unwrap(), v.scalar().pmf(x[1]).unwrap());
                let product: Vec<f64> = (0..16).map(|o| p0[o % 4] * p1[o / 4]).collect();
                let t = privfed_testkit::chi_square_gof(&counts, &product, 5.0).unwrap();
                assert!(
                    t.p_value < 1e-6,
                    "product law not rejected: p = {}",
                    t.p_value
                );
            }
        }
        // Outside the ball, and too many outcomes, are errors.
        assert!(v.pmf(&[0.8, 0.8]).is_err());
        let big = MvuVector::new(l1_metric_from_grr(0.7, 2), 7, 1.0, 7.0, 10).unwrap();
        assert!(big.pmf(&[0.0; 7]).is_err());
    }

    #[test]
    fn vector_mechanism_is_unbiased_when_the_bound_is_inactive() {
        // R = 3 ≥ the largest ℓ1 norm of any dithered vector in 3 dimensions on [−1, 1]: the
        // bound never rejects, so each coordinate is the scalar mechanism. Two-sided z-test per
        // coordinate with the exact scalar variance at α = 6e-7 (|z| < 4.99), 3 coordinates.
        let g = grr_design(2.0, 2);
        let metric = MvuDesign::new(
            2,
            2,
            6.0 * (1.0 + 1e-12),
            DpConstraint::Metric { power: 1 },
            g.p().to_vec(),
            g.alphabet().to_vec(),
        )
        .unwrap();
        let v = MvuVector::new(metric, 3, 1.0, 3.0, 10).unwrap();
        let x = [0.3, -0.2, 0.1];
        let mut rng = seeded_rng_for_experiments(12);
        let n = 200_000;
        let mut sum = [0.0; 3];
        for _ in 0..n {
            let o = v.privatize(&x, &mut rng).unwrap();
            for l in 0..3 {
                sum[l] += o[l];
            }
        }
        for l in 0..3 {
            let var = v.scalar().variance_at(&[x[l]]).unwrap();
            let z = z_mean_known_variance(sum[l] / n as f64, n, x[l], var);
            assert_z(z, 6e-7, &format!("coord {l}"));
        }
    }
}
