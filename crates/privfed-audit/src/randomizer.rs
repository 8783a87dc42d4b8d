//! Auditing privfed's own local randomizers from the outside: worst-case neighbouring inputs, a
//! test statistic for each mechanism, sampling, and the combined verdict
//! (docs/ALGORITHMS.md "Empirical privacy auditing", §A.6; `docs/AUDIT.md` for results).
//!
//! The mechanism is treated as a black box that is run on two fixed inputs `x`, `x′`; only the
//! *choice* of inputs and of the statistic uses what we know about it ([`worst_case_pair`]):
//!
//! | mechanism | `x`, `x′` | statistic |
//! |---|---|---|
//! | GRR, ScalarDP, ScalarRelDP, bitwise RR, MVU (finite outputs) | the two grid inputs whose exact pmfs have the largest `max_o |ln P(o|x) − ln P(o|x′)|` (all pairs when the grid is small, else the two ends) | the released value itself: learned-ratio ordering + histogram test against the exact pmf |
//! | vector MVU ([`mvu_vector_pair`]) | the pair whose exact **marginal** laws (dither summed out) have the largest ratio, searched over inputs varying in the first two coordinates | the released vector as one outcome: learned-ratio ordering + histogram test against the exact law |
//! | Laplace | two points at the domain's ℓ1 diameter (`±r·e₁` on an ℓ1 ball, `±r/√d·𝟙` on an ℓ2 ball, `±r·𝟙` on a cube) | the log likelihood ratio times `b`: `Σ_i |z_i − x′_i| − |z_i − x_i|` (Neyman–Pearson optimal) |
//! | Gaussian | two points at the domain's ℓ2 diameter | `⟨z, x − x′⟩` (Neyman–Pearson optimal) |
//! | PrivUnit2, PrivUnitG | `e₁`, `−e₁` (the caps of antipodal inputs are disjoint, so the cap event attains `e^ε`) | `⟨z, x − x′⟩` |
//! | PrivUnitInf | `𝟙`, `−𝟙` (vertices: the rounding is deterministic and the caps are disjoint) | `⟨z, x − x′⟩` |
//! | Separated | `r_max·e₁` and `−10⁻⁹·e₁` (opposite directions; magnitudes at the two ends of the ScalarDP grid, so both budgets are spent) | discrete features: the magnitude level `ln‖z‖`, the sign of `⟨z, e₁⟩` and whether the direction is in a cap |
//! | Skellam, one-dimensional `x + Sk(μ)` ([`skellam_pair`]) | `0` and `Δ` (translates: every pair at distance `Δ` is alike) | the released integer, binned to `[−T, T+Δ]`; histogram test against the exact pmf |
//! | DDG, one-dimensional `x + Σ_{i≤n} N_ℤ(0, σ_local²)` ([`ddg_pair`]) | `0` and `Δ` | as Skellam, against the exact pmf of the `n`-fold convolution |
//!
//! The verdict ([`evaluate`]) is at confidence `1 − α` overall: the distinguishing test (split
//! selection, [`crate::distinguish`]) and, for finite outputs, the histogram test
//! ([`crate::histogram`]) each run at `α/2`, so the claim is wrongly rejected with probability
//! at most `α`.

use crate::distinguish::{Selection, ThresholdBound, split_audit, threshold_audit};
use crate::error::{AuditError, Result, check_alpha, check_delta, check_epsilon};
use crate::gdp::{GdpBound, epsilon_for_mu, split_mu_lower_bound};
use crate::histogram::{HistogramTest, counts, histogram_test, learned_scores};
use privfed_mechanisms::mvu::MvuVector;
use privfed_mechanisms::{AnyRandomizer, CryptoRng, Domain, LocalRandomizer, MechanismError, Rng};
use serde::Serialize;
use std::collections::BTreeMap;

/// The statistic computed from an output `z` (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Statistic {
    /// Finite outputs: the released value (its bit pattern is the outcome key), with the exact
    /// pmfs of both inputs over `outcomes` (equal values merged).
    Outcome {
        /// Outcome keys (`f64::to_bits` of the released values), ascending.
        outcomes: Vec<u64>,
        /// `P(o | x)` for each outcome.
        pmf_x: Vec<f64>,
        /// `P(o | x′)` for each outcome.
        pmf_x_prime: Vec<f64>,
    },
    /// Finite vector outputs (vector MVU): the released vector as one outcome, key
    /// `Σ_l u(z_l)·K^l` with `u(z_l)` the position of `z_l` among the `K` distinct `values`
    /// (a value outside them gets the key `K^d`), with the exact pmfs of both inputs.
    OutcomeVector {
        /// The distinct released coordinate values, ascending.
        values: Vec<f64>,
        /// Outcome keys `0..K^d`.
        outcomes: Vec<u64>,
        /// `P(o | x)` for each outcome.
        pmf_x: Vec<f64>,
        /// `P(o | x′)` for each outcome.
        pmf_x_prime: Vec<f64>,
    },
    /// `⟨z, w⟩` with `w = x − x′`.
    Projection,
    /// `Σ_i |z_i − x′_i| − |z_i − x_i|` (Laplace log likelihood ratio times the scale),
    /// computed as `Σ_i ±(2·clamp(z_i, x_i ∧ x′_i, x_i ∨ x′_i) − x_i − x′_i)`. This audits the
    /// ideal-real claim. In floating point the released `z = x + η` also carries its input in
    /// its last bits (Mironov 2012; `docs/FLOATING_POINT.md`): the textbook form
    /// `|z − x′| − |z − x|` exposes them, and an audit with it flags privfed's Laplace (see
    /// `docs/AUDIT.md`, "Floating point").
    LaplaceLlr,
    /// Integer outputs binned to `lo..=hi` (values below `lo` count as `lo`, above `hi` as
    /// `hi`: post-processing, so every bound stays valid), with the exact pmfs of the bins;
    /// outcome key `k − lo`.
    IntegerBins {
        /// Lowest bin (everything at or below it).
        lo: i64,
        /// Highest bin (everything at or above it).
        hi: i64,
        /// `P(bin | x)`.
        pmf_x: Vec<f64>,
        /// `P(bin | x′)`.
        pmf_x_prime: Vec<f64>,
    },
    /// Separated: key of (`ln‖z‖` to 10⁻⁶, sign of `⟨z, e₁⟩`, `|⟨z, e₁⟩|/‖z‖ ≥ γ`).
    SeparatedFeatures {
        /// The cap threshold γ of the direction randomizer.
        gamma: f64,
    },
}

/// Two neighbouring inputs and the statistic to tell their outputs apart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NeighbourPair {
    /// The first input.
    pub x: Vec<f64>,
    /// The second input.
    pub x_prime: Vec<f64>,
    /// The statistic.
    pub statistic: Statistic,
    /// How the pair was chosen and why it is worst case.
    pub rationale: String,
}

/// One observation of an output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observation {
    /// A real score.
    Score(f64),
    /// A discrete outcome key.
    Outcome(u64),
}

/// Which input is privatized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `x`.
    X,
    /// `x′`.
    XPrime,
}

impl NeighbourPair {
    /// The input of `side`.
    pub fn input(&self, side: Side) -> &[f64] {
        match side {
            Side::X => &self.x,
            Side::XPrime => &self.x_prime,
        }
    }

    /// Whether observations are discrete outcomes.
    pub fn is_discrete(&self) -> bool {
        matches!(
            self.statistic,
            Statistic::Outcome { .. }
                | Statistic::OutcomeVector { .. }
                | Statistic::IntegerBins { .. }
                | Statistic::SeparatedFeatures { .. }
        )
    }

    /// The statistic of output `z`.
    pub fn observe(&self, z: &[f64]) -> Observation {
        match &self.statistic {
            Statistic::Outcome { .. } => Observation::Outcome(z[0].to_bits()),
            Statistic::OutcomeVector {
                values, outcomes, ..
            } => {
                let k = values.len() as u64;
                let mut key = 0u64;
                let mut place = 1u64;
                for zi in z {
                    match values.iter().position(|v| v == zi) {
                        Some(u) => key += u as u64 * place,
                        None => return Observation::Outcome(outcomes.len() as u64),
                    }
                    place *= k;
                }
                Observation::Outcome(key)
            }
            Statistic::IntegerBins { lo, hi, .. } => {
                let k = (z[0].round() as i64).clamp(*lo, *hi);
                Observation::Outcome((k - lo) as u64)
            }
            Statistic::Projection => Observation::Score(
                z.iter()
                    .zip(self.x.iter().zip(&self.x_prime))
                    .map(|(zi, (a, b))| zi * (a - b))
                    .sum(),
            ),
            // |z − b| − |z − a| = 2·clamp(z, min, max) − (a + b) (for a ≥ b; the sign flips
            // otherwise), computed through the clamp so that the score depends on z only through
            // intervals: the textbook form subtracts two rounded sums and its last bits follow
            // the float grid of z, which depends on the input (see `Statistic::LaplaceLlr`).
            Statistic::LaplaceLlr => Observation::Score(
                z.iter()
                    .zip(self.x.iter().zip(&self.x_prime))
                    .map(|(zi, (a, b))| {
                        let (lo, hi) = (a.min(*b), a.max(*b));
                        let v = 2.0 * zi.clamp(lo, hi) - (a + b);
                        if a >= b { v } else { -v }
                    })
                    .sum(),
            ),
            Statistic::SeparatedFeatures { gamma } => {
                let norm = z.iter().map(|v| v * v).sum::<f64>().sqrt();
                if norm == 0.0 {
                    return Observation::Outcome(0);
                }
                let cos = z[0] / norm;
                let level = (norm.ln() * 1e6).round() as i64 as u64;
                let key =
                    (level << 2) | (u64::from(cos >= 0.0) << 1) | u64::from(cos.abs() >= *gamma);
                Observation::Outcome(key)
            }
        }
    }
}

/// Observations of one side: scores or outcome keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observations {
    /// Real scores (continuous statistics).
    pub scores: Vec<f64>,
    /// Outcome keys (discrete statistics).
    pub outcomes: Vec<u64>,
}

impl Observations {
    /// Adds one observation.
    pub fn push(&mut self, o: Observation) {
        match o {
            Observation::Score(s) => self.scores.push(s),
            Observation::Outcome(k) => self.outcomes.push(k),
        }
    }

    /// Appends `other` (chunks from several threads, in a fixed order).
    pub fn extend(&mut self, other: Observations) {
        self.scores.extend(other.scores);
        self.outcomes.extend(other.outcomes);
    }

    /// Number of observations.
    pub fn len(&self) -> usize {
        self.scores.len() + self.outcomes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Runs `privatize` `n` times on the input of `side` and records the statistic. `privatize`
/// writes one output of the mechanism's dimension into its buffer: the real mechanism
/// (`|x, out, rng| mech.privatize_into(x, out, rng)`) or, in tests, a planted bug.
pub fn sample<R, F>(
    pair: &NeighbourPair,
    side: Side,
    n: usize,
    mut privatize: F,
    rng: &mut R,
) -> Result<Observations>
where
    R: Rng + CryptoRng + ?Sized,
    F: FnMut(&[f64], &mut [f64], &mut R) -> Result<(), MechanismError>,
{
    let x = pair.input(side);
    let mut out = vec![0.0; x.len()];
    let mut obs = Observations::default();
    for _ in 0..n {
        privatize(x, &mut out, rng)?;
        obs.push(pair.observe(&out));
    }
    Ok(obs)
}

/// The pair of inputs `(a, b)` among `points` maximizing the exact pure ε of their pmfs; the two
/// ends win ties. Searches all pairs when `points² · outcomes ≤ 2·10⁷`, else only the ends.
fn worst_grid_pair(
    points: &[f64],
    pmf: impl Fn(f64) -> Result<Vec<f64>, MechanismError>,
) -> Result<(f64, f64, f64)> {
    let n = points.len();
    let (first, last) = (points[0], points[n - 1]);
    let ends_eps = crate::histogram::exact_epsilon(&pmf(first)?, &pmf(last)?)?;
    let mut best = (first, last, ends_eps);
    let rows: Vec<Vec<f64>> = points.iter().map(|&p| pmf(p)).collect::<Result<_, _>>()?;
    if n * n * rows[0].len() <= 20_000_000 {
        for i in 0..n {
            for j in i + 1..n {
                let e = crate::histogram::exact_epsilon(&rows[i], &rows[j])?;
                if e > best.2 {
                    best = (points[i], points[j], e);
                }
            }
        }
    }
    Ok(best)
}

/// Merges outcomes with equal released values: `(keys ascending, pmf_x, pmf_x′)`.
fn merge_outcomes(values: &[f64], px: &[f64], pxp: &[f64]) -> (Vec<u64>, Vec<f64>, Vec<f64>) {
    let mut m: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for ((v, a), b) in values.iter().zip(px).zip(pxp) {
        let e = m.entry(v.to_bits()).or_default();
        e.0 += a;
        e.1 += b;
    }
    let keys = m.keys().copied().collect();
    let (a, b) = m.values().copied().unzip();
    (keys, a, b)
}

fn discrete_pair(
    name: &str,
    points: Vec<f64>,
    alphabet: Vec<f64>,
    pmf: impl Fn(f64) -> Result<Vec<f64>, MechanismError>,
) -> Result<NeighbourPair> {
    let (a, b, eps) = worst_grid_pair(&points, &pmf)?;
    let (outcomes, pmf_x, pmf_x_prime) = merge_outcomes(&alphabet, &pmf(a)?, &pmf(b)?);
    Ok(NeighbourPair {
        x: vec![a],
        x_prime: vec![b],
        statistic: Statistic::Outcome {
            outcomes,
            pmf_x,
            pmf_x_prime,
        },
        rationale: format!(
            "{name}: of the {} grid inputs, the pair ({a}, {b}) whose exact pmfs have the largest \
             max_o |ln P(o|x) - ln P(o|x')| = {eps} (inputs between grid points are mixtures of \
             their neighbours' rows, so grid points are the extremes); statistic: the released \
             value, outcomes ordered by their ratio learned on half the samples",
            points.len()
        ),
    })
}

/// Two points at the ℓ1 (`l1 = true`) or ℓ2 diameter of `domain`.
fn diameter_pair(domain: Domain, l1: bool) -> Result<(Vec<f64>, Vec<f64>, &'static str)> {
    let e1 = |d: usize, r: f64| {
        let mut v = vec![0.0; d];
        v[0] = r;
        v
    };
    let neg = |v: &[f64]| v.iter().map(|a| -a).collect::<Vec<f64>>();
    let (x, why) = match domain {
        Domain::Interval { lo, hi } => {
            return Ok((vec![hi], vec![lo], "the two ends of the interval"));
        }
        Domain::L1Ball { dim, radius } => {
            (e1(dim, radius), "±r·e1 (l1 and l2 diameter of the l1 ball)")
        }
        Domain::UnitSphere { dim } | Domain::L2Ball { dim, radius: _ } if !l1 => {
            let r = match domain {
                Domain::L2Ball { radius, .. } => radius,
                _ => 1.0,
            };
            (e1(dim, r), "±r·e1 (l2 diameter of the l2 ball / sphere)")
        }
        Domain::UnitSphere { dim } | Domain::L2Ball { dim, .. } => {
            let r = match domain {
                Domain::L2Ball { radius, .. } => radius,
                _ => 1.0,
            };
            let c = r / (dim as f64).sqrt();
            (
                vec![c; dim],
                "±r/√d·1 (l1 diameter 2r√d of the l2 ball / sphere)",
            )
        }
        Domain::LInfBall { dim, radius } => {
            (vec![radius; dim], "±r·1 (l1 and l2 diameter of the cube)")
        }
        other => {
            return Err(AuditError::Unsupported(format!(
                "no diameter pair for the domain {other:?}"
            )));
        }
    };
    let xp = neg(&x);
    Ok((x, xp, why))
}

/// The worst-case neighbouring inputs and the statistic for `mech` (see the
/// [module docs](self) for the table and the reasons).
pub fn worst_case_pair(mech: &AnyRandomizer) -> Result<NeighbourPair> {
    let d = mech.dim();
    let e1 = |s: f64| {
        let mut v = vec![0.0; d];
        v[0] = s;
        v
    };
    Ok(match mech {
        AnyRandomizer::GridRr(m) => {
            discrete_pair(m.name(), m.grid().to_vec(), m.alphabet().to_vec(), |x| {
                m.pmf(x)
            })?
        }
        AnyRandomizer::BitwiseRr(m) => {
            let Domain::Interval { lo, hi } = m.domain() else {
                return Err(AuditError::Unsupported("bitwise RR off an interval".into()));
            };
            let levels = 1usize << m.bits();
            let points = (0..levels)
                .map(|k| lo + (hi - lo) * k as f64 / (levels - 1) as f64)
                .collect();
            discrete_pair("bitwise-rr", points, m.alphabet(), |x| m.pmf(x))?
        }
        AnyRandomizer::Mvu(m) => {
            let Domain::Interval { lo, hi } = m.domain() else {
                return Err(AuditError::Unsupported("MVU off an interval".into()));
            };
            let n = m.design().num_inputs();
            let points = (0..n)
                .map(|k| lo + (hi - lo) * k as f64 / (n - 1) as f64)
                .collect();
            let alphabet = (0..m.design().num_outputs())
                .map(|j| m.decode(j))
                .collect::<Result<Vec<_>, _>>()?;
            discrete_pair("mvu", points, alphabet, |x| m.pmf(x))?
        }
        AnyRandomizer::Laplace(m) => {
            let (x, x_prime, why) = diameter_pair(m.domain(), true)?;
            NeighbourPair {
                x,
                x_prime,
                statistic: Statistic::LaplaceLlr,
                rationale: format!(
                    "laplace: x, x' = {why}, at l1 distance {} = the calibrated sensitivity; \
                     statistic: the log likelihood ratio times b, sum_i |z_i - x'_i| - |z_i - x_i| \
                     (Neyman-Pearson optimal)",
                    m.sensitivity()
                ),
            }
        }
        AnyRandomizer::Gaussian(m) => {
            let (x, x_prime, why) = diameter_pair(m.domain(), false)?;
            NeighbourPair {
                x,
                x_prime,
                statistic: Statistic::Projection,
                rationale: format!(
                    "gaussian: x, x' = {why}, at l2 distance {} = the calibrated sensitivity; \
                     statistic: <z, x - x'> (Neyman-Pearson optimal)",
                    m.sensitivity()
                ),
            }
        }
        AnyRandomizer::PrivUnit2(_) | AnyRandomizer::PrivUnitG(_) => NeighbourPair {
            x: e1(1.0),
            x_prime: e1(-1.0),
            statistic: Statistic::Projection,
            rationale: format!(
                "{}: x = e1, x' = -e1 (antipodal: the caps are disjoint, so the cap of x has \
                 probability ratio e^eps); statistic: <z, x - x'>",
                mech.name()
            ),
        },
        AnyRandomizer::PrivUnitInf(_) => NeighbourPair {
            x: vec![1.0; d],
            x_prime: vec![-1.0; d],
            statistic: Statistic::Projection,
            rationale: "privunit-inf: x = 1, x' = -1 (vertices of the cube: the rounding is \
                        deterministic and the caps are disjoint); statistic: <z, x - x'>"
                .into(),
        },
        AnyRandomizer::Separated(m) => {
            let Domain::L2Ball { radius, .. } = m.domain() else {
                return Err(AuditError::Unsupported("separated off an l2 ball".into()));
            };
            NeighbourPair {
                x: e1(radius),
                x_prime: e1(-1e-9),
                statistic: Statistic::SeparatedFeatures {
                    gamma: m.direction().gamma(),
                },
                rationale: "separated: x = r_max·e1, x' = -1e-9·e1 (opposite directions, \
                            magnitudes at the two ends of the ScalarDP grid: both budgets are \
                            spent); statistic: discrete features (magnitude level, sign, cap)"
                    .into(),
            }
        }
        other => {
            return Err(AuditError::Unsupported(format!(
                "no worst-case pair for {}",
                other.name()
            )));
        }
    })
}

/// Most evenly spaced candidate values per coordinate in [`mvu_vector_pair`]'s search.
const MVU_VECTOR_CANDIDATES_PER_AXIS: usize = 33;

/// The vector MVU mechanism ([`MvuVector`], paper 004 Lemma 6): the pair of inputs whose
/// **marginal** output laws ([`MvuVector::pmf`]: the dither summed out, as an observer who does
/// not see the device's randomness sees them) have the largest exact
/// `max_o |ln P(o|x) − ln P(o|x′)|`, and the released vector as the statistic.
///
/// Why the marginal: Lemma 6's ε = `ε_metric·(R/r)^p` bounds the ratio *given the dither* —
/// two dithered vectors anywhere in the ball of radius `R = dither_bound`, at `ℓp` distance up
/// to `2R`. The adversary sees the mixture over the dither. Inputs whose coordinates are all grid
/// points dither deterministically and lie in the ball of radius `r`: their pairs reach at most
/// `ε_metric` (the antipodal ends `±r·e₁` when 0 is a grid point). With `2^b` levels 0 is not
/// a grid point, so a zero coordinate dithers to `±h/2` and the dithered vectors of, say,
/// `−r·e₁` and `−r·e₂` can lie `2R` apart; whether the mixture over the dither keeps that ratio
/// depends on the rows (for the suite's design it does: the pair attains Lemma 6's bound,
/// while `±r·e₁` reaches only `ε_metric`). So the worst marginal pair is found by search: the
/// first two coordinates range over
/// an evenly spaced set of values containing the input grid (`(B_in − 1)·⌊32/(B_in − 1)⌋ + 1`
/// values of `[−r, r]`, so cell interiors are covered as well), the others are 0, every point
/// in the domain at which the mechanism can run is a candidate, and all pairs are compared (the
/// ends win ties). The rationale reports the pair's exact ε beside the claim.
///
/// Errors ([`AuditError::Unsupported`]) when the design has more than 33 input levels or the
/// exact law has more than [`privfed_mechanisms::mvu::MAX_VECTOR_PMF_OUTCOMES`] outcomes.
pub fn mvu_vector_pair(mech: &MvuVector) -> Result<NeighbourPair> {
    let levels = mech.scalar().design().num_inputs();
    if levels - 1 > MVU_VECTOR_CANDIDATES_PER_AXIS - 1 {
        return Err(AuditError::Unsupported(format!(
            "vector MVU pair search: {levels} input levels (at most {MVU_VECTOR_CANDIDATES_PER_AXIS})"
        )));
    }
    let (Domain::L1Ball { dim, radius } | Domain::L2Ball { dim, radius }) = mech.domain() else {
        return Err(AuditError::Unsupported("vector MVU off an lp ball".into()));
    };
    let steps = (levels - 1) * ((MVU_VECTOR_CANDIDATES_PER_AXIS - 1) / (levels - 1));
    let axis: Vec<f64> = (0..=steps)
        .map(|k| privfed_mechanisms::dither::grid_point(k, steps + 1, -radius, radius))
        .collect();
    let point = |a: f64, b: f64| {
        let mut v = vec![0.0; dim];
        v[0] = a;
        if dim > 1 {
            v[1] = b;
        }
        v
    };
    let ends = (point(radius, 0.0), point(-radius, 0.0));
    let mut candidates = vec![ends.0.clone(), ends.1.clone()];
    for &a in &axis {
        for &b in if dim > 1 { &axis[..] } else { &[0.0][..] } {
            let v = point(a, b);
            if v != ends.0 && v != ends.1 {
                candidates.push(v);
            }
        }
    }
    let mut laws: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for v in candidates {
        match mech.pmf(&v) {
            Ok(law) => laws.push((v, law)),
            // Outside the ball, or no accepted dither (the mechanism cannot run there).
            Err(MechanismError::OutOfDomain(_) | MechanismError::Infeasible(_)) => {}
            Err(e) => {
                return Err(AuditError::Unsupported(format!(
                    "vector MVU exact law: {e}"
                )));
            }
        }
    }
    if laws.len() < 2 {
        return Err(AuditError::Unsupported(
            "vector MVU: fewer than two inputs at which the mechanism runs".into(),
        ));
    }
    let mut best = (
        0,
        1,
        crate::histogram::exact_epsilon(&laws[0].1, &laws[1].1)?,
    );
    for i in 0..laws.len() {
        for j in i + 1..laws.len() {
            let e = crate::histogram::exact_epsilon(&laws[i].1, &laws[j].1)?;
            if e > best.2 * (1.0 + 1e-12) {
                best = (i, j, e);
            }
        }
    }
    let (i, j, exact) = best;
    // Distinct released values and the outcome keys over them.
    let b_out = mech.scalar().design().num_outputs();
    let letters = (0..b_out)
        .map(|j| mech.scalar().decode(j))
        .collect::<Result<Vec<_>, _>>()?;
    let mut values = letters.clone();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let k = values.len();
    let total = k.pow(dim as u32);
    let fold = |law: &[f64]| {
        let mut out = vec![0.0; total];
        for (o, &q) in law.iter().enumerate() {
            let (mut rem, mut key, mut place) = (o, 0, 1);
            for _ in 0..dim {
                let u = values
                    .iter()
                    .position(|v| *v == letters[rem % b_out])
                    .unwrap_or(0);
                key += u * place;
                place *= k;
                rem /= b_out;
            }
            out[key] += q;
        }
        out
    };
    let (pmf_x, pmf_x_prime) = (fold(&laws[i].1), fold(&laws[j].1));
    Ok(NeighbourPair {
        x: laws[i].0.clone(),
        x_prime: laws[j].0.clone(),
        statistic: Statistic::OutcomeVector {
            values,
            outcomes: (0..total as u64).collect(),
            pmf_x,
            pmf_x_prime,
        },
        rationale: format!(
            "mvu-vector: of {} inputs (first two coordinates on {} evenly spaced values of \
             [-r, r] containing the input grid, the rest 0; those in the ball at which the \
             mechanism runs), the pair whose exact marginal laws (dither summed out: the \
             observer does not see it) have the largest max_o |ln P(o|x) - ln P(o|x')| = \
             {exact}; Lemma 6 bounds the ratio given the dither by {} (dithered vectors up to \
             the dither bound), the realized metric epsilon is {}; statistic: the released \
             vector, outcomes ordered by their ratio learned on half the samples",
            laws.len(),
            axis.len(),
            mech.epsilon(),
            mech.scalar().metric_epsilon()
        ),
    })
}

/// The one-dimensional Skellam mechanism `M(x) = x + Sk(μ)` on integers (paper 001 §3) with
/// integer sensitivity `Δ`: the pair `x = 0`, `x′ = Δ` (any two inputs at distance `Δ` are
/// equivalent by translation), outputs binned to `[−T, T + Δ]` with `T = ⌈4√μ⌉ + 1` (the tails
/// merged into the end bins: post-processing), and the exact bin pmfs from
/// [`privfed_accounting::skellam::skellam_ln_pmf`].
pub fn skellam_pair(mu: f64, sensitivity: u64) -> Result<NeighbourPair> {
    if !(mu.is_finite() && mu > 0.0) {
        return Err(AuditError::invalid("mu", mu, "must be finite and positive"));
    }
    if sensitivity == 0 {
        return Err(AuditError::invalid(
            "sensitivity",
            0.0,
            "must be at least 1",
        ));
    }
    let t = (4.0 * mu.sqrt()).ceil() as i64 + 1;
    let d = sensitivity as i64;
    let (lo, hi) = (-t, t + d);
    let kmax = (t + d) as usize + 1;
    let ln_pmf = privfed_accounting::skellam::skellam_ln_pmf(mu, kmax)?;
    let p = |k: i64| ln_pmf[k.unsigned_abs() as usize].exp();
    // Bins of the noise value k for an input shift s: P(k + s = b) for interior b, tails summed
    // as 1 − the interior.
    let bins = |shift: i64| -> Vec<f64> {
        let mut v: Vec<f64> = (lo..=hi).map(|b| p(b - shift)).collect();
        let interior: f64 = v[1..v.len() - 1].iter().sum();
        // Lower tail P(k + s ≤ lo) = P(k ≥ s − lo) (symmetry) = (1 − p(0))/2 − Σ_{1≤j<s−lo} p(j).
        let lower = 0.5 * (1.0 - p(0)) - (1..shift - lo).map(p).sum::<f64>();
        let n = v.len();
        v[0] = lower.max(0.0);
        v[n - 1] = (1.0 - interior - v[0]).max(0.0);
        v
    };
    Ok(translate_pair(
        sensitivity,
        lo,
        hi,
        bins(0),
        bins(d),
        format!(
            "skellam: x = 0, x' = {sensitivity} (integer sensitivity; every pair at that \
             distance is a translate); statistic: the released integer binned to [{lo}, {hi}], \
             outcomes ordered by their ratio learned on half the samples"
        ),
    ))
}

/// The pair `x = 0`, `x′ = sensitivity` of an integer mechanism whose output is `x` plus noise
/// (every pair at that distance is a translate), its outputs binned to `[lo, hi]` with the
/// exact bin pmfs `pmf_x`, `pmf_x_prime`.
fn translate_pair(
    sensitivity: u64,
    lo: i64,
    hi: i64,
    pmf_x: Vec<f64>,
    pmf_x_prime: Vec<f64>,
    rationale: String,
) -> NeighbourPair {
    NeighbourPair {
        x: vec![0.0],
        x_prime: vec![sensitivity as f64],
        statistic: Statistic::IntegerBins {
            lo,
            hi,
            pmf_x,
            pmf_x_prime,
        },
        rationale,
    }
}

/// The distributed discrete Gaussian in one dimension (paper 001's baseline; Kairouz, Liu and
/// Steinke 2021): `M(x) = x + Σ_{i=1}^{n} Y_i` with `Y_i ~ N_ℤ(0, σ_local²)` i.i.d., one share per
/// client, integer sensitivity `Δ`. The pair `x = 0`, `x′ = Δ` (translates, as for Skellam),
/// outputs binned to `[−T, T + Δ]` with `T = ⌈4·√n·σ_local⌉ + 1`, and the exact bin pmfs of the
/// sum: the `n`-fold convolution of `P(k) ∝ e^{−k²/(2σ_local²)}` on `|k| ≤ ⌈12σ_local⌉ + 10`
/// (the mass beyond is below `e^{−72}`). `local_sigma2` is the variance parameter the sampler
/// actually uses ([`privfed_mechanisms::discrete_gaussian::DiscreteGaussian::sigma2`]).
pub fn ddg_pair(clients: usize, local_sigma2: f64, sensitivity: u64) -> Result<NeighbourPair> {
    if !(local_sigma2.is_finite() && local_sigma2 > 0.0) {
        return Err(AuditError::invalid(
            "local_sigma2",
            local_sigma2,
            "must be finite and positive",
        ));
    }
    if clients == 0 || sensitivity == 0 {
        return Err(AuditError::invalid(
            "clients",
            clients as f64,
            "clients and sensitivity must be at least 1",
        ));
    }
    let sigma = local_sigma2.sqrt();
    let k1 = (12.0 * sigma).ceil() as usize + 10;
    // The convolution costs about n²·k1² operations; beyond 10¹⁰ the audit would not be usable.
    if (clients as f64 * k1 as f64).powi(2) > 1e10 {
        return Err(AuditError::Unsupported(format!(
            "ddg pmf of {clients} shares with local variance {local_sigma2} is too large to \
             convolve exactly"
        )));
    }
    let one: Vec<f64> = {
        let w: Vec<f64> = (0..=2 * k1)
            .map(|i| {
                let k = i as f64 - k1 as f64;
                (-k * k / (2.0 * local_sigma2)).exp()
            })
            .collect();
        let z: f64 = w.iter().sum();
        w.into_iter().map(|v| v / z).collect()
    };
    // The sum's pmf on [−n·k1, n·k1], index k + n·k1.
    let mut sum = one.clone();
    for _ in 1..clients {
        let mut next = vec![0.0; sum.len() + one.len() - 1];
        for (i, a) in sum.iter().enumerate() {
            if *a == 0.0 {
                continue;
            }
            for (j, b) in one.iter().enumerate() {
                next[i + j] += a * b;
            }
        }
        sum = next;
    }
    let half = (clients * k1) as i64;
    let p = |k: i64| -> f64 {
        if k.abs() > half {
            0.0
        } else {
            sum[(k + half) as usize]
        }
    };
    let t = (4.0 * (clients as f64).sqrt() * sigma).ceil() as i64 + 1;
    let d = sensitivity as i64;
    let (lo, hi) = (-t, t + d);
    let bins = |shift: i64| -> Vec<f64> {
        let mut v: Vec<f64> = (lo..=hi).map(|b| p(b - shift)).collect();
        let n = v.len();
        v[0] = (-half..=lo - shift).map(p).sum();
        v[n - 1] = (hi - shift..=half).map(p).sum();
        v
    };
    Ok(translate_pair(
        sensitivity,
        lo,
        hi,
        bins(0),
        bins(d),
        format!(
            "ddg: x = 0, x' = {sensitivity} (integer sensitivity; every pair at that distance is \
             a translate); output x + the sum of {clients} shares N_Z(0, {local_sigma2}); \
             statistic: the released integer binned to [{lo}, {hi}], outcomes ordered by their \
             ratio learned on half the samples"
        ),
    ))
}

/// The accounting event of [`ddg_pair`]'s mechanism: the distributed discrete Gaussian with
/// central `σ = √n·σ_local`, sensitivities `Δ`, one coordinate and the sum correction
/// `τ` of [`privfed_accounting::ddg::ddg_tau`] (its ε comes from the RDP accountant).
pub fn ddg_event(
    clients: usize,
    local_sigma2: f64,
    sensitivity: u64,
) -> Result<privfed_accounting::DpEvent> {
    let local = local_sigma2.sqrt();
    let d = sensitivity as f64;
    Ok(privfed_accounting::DpEvent::DistributedDiscreteGaussian {
        sigma: (clients as f64).sqrt() * local,
        l1_sensitivity: d,
        l2_sensitivity: d,
        tau: privfed_accounting::ddg::ddg_tau(clients as u64, local)?,
        dim: 1,
    })
}

/// The guarantee being audited.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Claim {
    /// Claimed ε.
    pub epsilon: f64,
    /// Claimed δ (0 for pure DP).
    pub delta: f64,
}

/// The GDP view of a continuous audit (informational; see [`crate::gdp`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GdpView {
    /// The bound on μ.
    pub bound: GdpBound,
    /// The threshold it came from.
    pub threshold: f64,
    /// `ε(μ_lb, δ)`: a lower bound on ε at δ only if the tradeoff curve is Gaussian.
    pub epsilon_if_gaussian: f64,
}

/// The verdict of an audit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    /// Lower bound on ε at the claimed δ (distinguishing test).
    pub epsilon_lower_bound: f64,
    /// `1 − α`: the probability that a true claim is not flagged.
    pub confidence: f64,
    /// The claimed ε.
    pub claimed_epsilon: f64,
    /// The claimed δ.
    pub claimed_delta: f64,
    /// The claim is rejected: `epsilon_lower_bound > claimed_epsilon`, or the histogram's
    /// `δ̂(ε) − tolerance > δ`.
    pub violation: bool,
    /// Samples per input.
    pub samples: usize,
    /// The distinguishing test.
    pub distinguishing: ThresholdBound,
    /// The histogram test (finite outputs).
    pub histogram: Option<HistogramTest>,
    /// The GDP fit (continuous statistics, when δ > 0).
    pub gdp: Option<GdpView>,
}

/// An input as a report shows it: its coordinates up to [`SHOWN_COORDINATES`], else how many
/// there are (`"[d coordinates]"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ShownInput {
    /// The coordinates.
    Values(Vec<f64>),
    /// `"[d coordinates]"` for a longer input.
    Summary(String),
}

/// The most coordinates of an input a [`RunReport`] lists.
pub const SHOWN_COORDINATES: usize = 8;

impl ShownInput {
    /// `v` as shown: its values if it has at most [`SHOWN_COORDINATES`], else its length.
    pub fn of(v: &[f64]) -> Self {
        if v.len() <= SHOWN_COORDINATES {
            ShownInput::Values(v.to_vec())
        } else {
            ShownInput::Summary(format!("[{} coordinates]", v.len()))
        }
    }
}

/// The neighbouring inputs of a [`RunReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShownPair {
    /// The first input.
    pub x: ShownInput,
    /// The second input.
    pub x_prime: ShownInput,
    /// How the pair was chosen and why it is worst case ([`NeighbourPair::rationale`]).
    pub how_chosen: String,
}

/// The report of one audit run (`privfed audit`): the verdict of [`evaluate`] with the
/// mechanism, the pair, the run's cost and, for the one-dimensional Skellam and DDG sums, their
/// noise (for the vector MVU, its dither bound and metric ε).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// The mechanism's name (`skellam` or `ddg` for the one-dimensional sums, `mvu-vector` for
    /// the vector MVU).
    pub mechanism: String,
    /// Lower bound on ε at the claimed δ (distinguishing test).
    pub epsilon_lower_bound: f64,
    /// `1 − α`.
    pub confidence: f64,
    /// The claimed ε.
    pub claimed_epsilon: f64,
    /// The claimed δ.
    pub claimed_delta: f64,
    /// The ε the mechanism states for itself (the claim unless one was given).
    pub mechanism_epsilon: f64,
    /// The claim is rejected ([`AuditReport::violation`]).
    pub violation: bool,
    /// Samples per input.
    pub samples: usize,
    /// Wall time of the run, seconds.
    pub seconds: f64,
    /// Privatizations per second while sampling (both inputs).
    pub samples_per_second: f64,
    /// Sampling threads.
    pub threads: usize,
    /// The neighbouring inputs.
    pub neighbours: ShownPair,
    /// The distinguishing test.
    pub distinguishing: ThresholdBound,
    /// Skellam: the noise's variance μ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skellam_variance: Option<f64>,
    /// DDG: each client's discrete Gaussian σ².
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ddg_local_variance: Option<f64>,
    /// DDG: the number of clients whose shares are summed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clients: Option<usize>,
    /// Skellam, DDG: the query's integer sensitivity Δ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<u64>,
    /// Vector MVU: the bound `R` on the dithered vector's `ℓp` norm.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dither_bound: Option<f64>,
    /// Vector MVU: the realized metric ε of the per-coordinate design (the claim is
    /// `ε_metric·(R/r)^p`, Lemma 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_epsilon: Option<f64>,
    /// The histogram test (finite outputs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<HistogramTest>,
    /// The GDP fit (continuous statistics, when δ > 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gdp: Option<GdpView>,
}

impl RunReport {
    /// The report of `report` for the mechanism `mechanism` (stating `mechanism_epsilon`) on
    /// `pair`; the run's cost (`seconds`, `samples_per_second`, `threads`) and the noise fields
    /// are the caller's to set.
    pub fn new(
        mechanism: String,
        mechanism_epsilon: f64,
        pair: &NeighbourPair,
        report: AuditReport,
    ) -> Self {
        RunReport {
            mechanism,
            epsilon_lower_bound: report.epsilon_lower_bound,
            confidence: report.confidence,
            claimed_epsilon: report.claimed_epsilon,
            claimed_delta: report.claimed_delta,
            mechanism_epsilon,
            violation: report.violation,
            samples: report.samples,
            seconds: 0.0,
            samples_per_second: 0.0,
            threads: 1,
            neighbours: ShownPair {
                x: ShownInput::of(&pair.x),
                x_prime: ShownInput::of(&pair.x_prime),
                how_chosen: pair.rationale.clone(),
            },
            distinguishing: report.distinguishing,
            skellam_variance: None,
            ddg_local_variance: None,
            clients: None,
            sensitivity: None,
            dither_bound: None,
            metric_epsilon: None,
            histogram: report.histogram,
            gdp: report.gdp,
        }
    }
}

/// Audits `claim` from the observations of `x` and `x′`: the distinguishing test (split
/// selection) at `α/2` and, for finite outputs, the histogram test at `α/2`; `violation` holds
/// with probability at most `α` when the claim is true.
pub fn evaluate(
    pair: &NeighbourPair,
    obs_x: &Observations,
    obs_x_prime: &Observations,
    claim: Claim,
    alpha: f64,
) -> Result<AuditReport> {
    check_alpha(alpha)?;
    check_epsilon(claim.epsilon)?;
    check_delta(claim.delta)?;
    let samples = obs_x.len().min(obs_x_prime.len());
    let (distinguishing, histogram, gdp) = if pair.is_discrete() {
        let (ox, oxp) = (&obs_x.outcomes, &obs_x_prime.outcomes);
        if ox.len() < 2 || oxp.len() < 2 {
            return Err(AuditError::TooFewSamples(
                "need at least 2 samples per input".into(),
            ));
        }
        let (hx, hxp) = (ox.len() / 2, oxp.len() / 2);
        let learned = learned_scores(&ox[..hx], &oxp[..hxp]);
        let score = |s: &[u64]| -> Vec<f64> {
            s.iter()
                .map(|k| learned.get(k).copied().unwrap_or(0.0))
                .collect()
        };
        let dist = split_audit(
            &score(&ox[..hx]),
            &score(&oxp[..hxp]),
            &score(&ox[hx..]),
            &score(&oxp[hxp..]),
            claim.delta,
            alpha / 2.0,
        )?;
        let in_alphabet = |outcomes: &[u64]| {
            ox.iter()
                .chain(oxp)
                .all(|k| outcomes.binary_search(k).is_ok())
        };
        let hist = match &pair.statistic {
            Statistic::Outcome {
                outcomes,
                pmf_x,
                pmf_x_prime,
            } if in_alphabet(outcomes) => Some(histogram_test(
                &counts(ox, outcomes)?,
                &counts(oxp, outcomes)?,
                Some((pmf_x, pmf_x_prime)),
                claim.epsilon,
                claim.delta,
                alpha / 2.0,
            )?),
            Statistic::OutcomeVector {
                outcomes,
                pmf_x,
                pmf_x_prime,
                ..
            } if in_alphabet(outcomes) => Some(histogram_test(
                &counts(ox, outcomes)?,
                &counts(oxp, outcomes)?,
                Some((pmf_x, pmf_x_prime)),
                claim.epsilon,
                claim.delta,
                alpha / 2.0,
            )?),
            Statistic::IntegerBins {
                lo,
                hi,
                pmf_x,
                pmf_x_prime,
            } => {
                let keys: Vec<u64> = (0..=(hi - lo) as u64).collect();
                Some(histogram_test(
                    &counts(ox, &keys)?,
                    &counts(oxp, &keys)?,
                    Some((pmf_x, pmf_x_prime)),
                    claim.epsilon,
                    claim.delta,
                    alpha / 2.0,
                )?)
            }
            _ => {
                // Outcomes observed on either side, without an exact pmf (separated, or a
                // mechanism releasing values outside the claimed alphabet).
                let mut keys: Vec<u64> = ox.iter().chain(oxp).copied().collect();
                keys.sort_unstable();
                keys.dedup();
                Some(histogram_test(
                    &counts(ox, &keys)?,
                    &counts(oxp, &keys)?,
                    None,
                    claim.epsilon,
                    claim.delta,
                    alpha / 2.0,
                )?)
            }
        };
        (dist, hist, None)
    } else {
        let dist = threshold_audit(
            &obs_x.scores,
            &obs_x_prime.scores,
            claim.delta,
            alpha,
            &Selection::Split,
        )?;
        let gdp = if claim.delta > 0.0 {
            let (bound, threshold) =
                split_mu_lower_bound(&obs_x.scores, &obs_x_prime.scores, alpha)?;
            Some(GdpView {
                bound,
                threshold,
                epsilon_if_gaussian: epsilon_for_mu(bound.mu_lower_bound, claim.delta)?,
            })
        } else {
            None
        };
        (dist, None, gdp)
    };
    let violation = distinguishing.epsilon_lower_bound > claim.epsilon
        || histogram.as_ref().is_some_and(|h| h.rejects_claim);
    Ok(AuditReport {
        epsilon_lower_bound: distinguishing.epsilon_lower_bound,
        confidence: 1.0 - alpha,
        claimed_epsilon: claim.epsilon,
        claimed_delta: claim.delta,
        violation,
        samples,
        distinguishing,
        histogram,
        gdp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(p: &NeighbourPair) -> (&[f64], &[f64], i64) {
        match &p.statistic {
            Statistic::IntegerBins {
                lo,
                pmf_x,
                pmf_x_prime,
                ..
            } => (pmf_x, pmf_x_prime, *lo),
            _ => unreachable!(),
        }
    }

    /// The DDG bins against a direct computation: for two clients, `P(k) = Σ_j q(j)·q(k − j)`
    /// with `q ∝ e^{−j²/(2σ²)}` summed over `|j| ≤ 60`; each side sums to 1 and `x′`'s bins are
    /// `x`'s shifted by `Δ` away from the end bins.
    #[test]
    fn ddg_pair_matches_a_direct_convolution() {
        let s2 = 2.3;
        let p = ddg_pair(2, s2, 2).unwrap();
        let (px, pxp, lo) = bins(&p);
        let z: f64 = (-60..=60i64)
            .map(|j| (-((j * j) as f64) / (2.0 * s2)).exp())
            .sum();
        let q = |j: i64| (-((j * j) as f64) / (2.0 * s2)).exp() / z;
        let conv = |k: i64| (-60..=60).map(|j| q(j) * q(k - j)).sum::<f64>();
        for (i, (&a, &b)) in px.iter().zip(pxp).enumerate().skip(1).take(px.len() - 2) {
            let k = lo + i as i64;
            assert!((a - conv(k)).abs() < 1e-15, "{k}: {a} vs {}", conv(k));
            assert!((b - conv(k - 2)).abs() < 1e-15, "{k}: {b}");
        }
        for v in [px, pxp] {
            assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        assert!(ddg_pair(0, 1.0, 1).is_err());
        assert!(ddg_pair(2, 0.0, 1).is_err());
        assert!(ddg_pair(2, 1.0, 0).is_err());
        assert!(ddg_pair(100_000, 1e4, 1).is_err());
    }
}
