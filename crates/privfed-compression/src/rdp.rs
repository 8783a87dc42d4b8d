//! Rényi DP of the MVU mechanism (paper 004 §4.3; `docs/ALGORITHMS.md` §3.5).
//!
//! For a design `P` and order `α > 1`,
//! `D^α_{i,i'} = 1/(α−1)·ln Σ_j P_ij^α P_i'j^{1−α}` is the Rényi divergence between the output
//! laws of input levels `i` and `i'` (computed in log space, log-sum-exp over the used letters).
//!
//! * **Scalar mechanism** ([`mvu_rdp_curve`]): `ε(α) = max_{i,i'} D^α_{i,i'}`. This is exact for
//!   continuous inputs too: with dithering the output law is a mixture of two rows, and
//!   `exp((α−1)D_α(μ‖ν)) = Σ_j μ_j^α ν_j^{1−α}` is jointly convex in `(μ, ν)` for `α > 1` (the
//!   perspective of `t^α`), so its maximum over mixtures of rows is at a pair of rows.
//! * **Vector mechanism** (Lemma 6, `d` coordinates, inputs whose rescaled dithered vectors
//!   differ by at most `Δ` in `ℓp`): the RDP is the multiple-choice knapsack
//!   `max Σ_l D^α_{i_l,i'_l}` s.t. `Σ_l |i_l − i'_l|^p ≤ (B_in − 1)^p Δ^p`. Two upper bounds:
//!   * [`vector_rdp_greedy`] (Lemma 7): `(budget/C_{i*j*})·D^α_{i*j*}` with
//!     `(i*, j*) = argmax_{i≠j} D^α_{ij}/C_{ij}`, `C_{ij} = |i − j|^p`;
//!   * [`vector_rdp_lp`]: the LP relaxation (4). All coordinates share `D^α` and `C`, so
//!     averaging any feasible solution over the coordinates shows that (4) equals
//!     `d·g(budget/d)` with `g(c) = max{⟨D, π⟩ : ⟨C, π⟩ ≤ c, Σπ ≤ 1, π ≥ 0}`; an optimal `π` is
//!     a vertex with at most two non-zero entries, and only the best `D` at each distance `k`
//!     matters, so `g` is evaluated exactly by enumerating single distances and pairs of
//!     distances (the upper concave envelope of `(0,0)` and `(k^p, max_{|i−i'|=k} D_{ii'})`).
//!     Tested against Clarabel on the full `d·B_in²`-variable LP.
//!
//! Both bounds are ≥ the knapsack optimum, and the LP bound is ≤ the greedy bound. The result is
//! an RDP curve to compose over steps (add per order) and convert to (ε, δ) with the accountant.

use privfed_mechanisms::mvu::{DpConstraint, MvuDesign};
use privfed_mechanisms::{MechanismError, Result};
use serde::Serialize;

fn check_order(alpha: f64) -> Result<()> {
    if alpha.is_finite() && alpha > 1.0 {
        Ok(())
    } else {
        Err(MechanismError::invalid(
            "alpha",
            alpha,
            "the Rényi order must be finite and > 1",
        ))
    }
}

/// `D^α_{i,i'} = 1/(α−1)·ln Σ_j P_ij^α P_i'j^{1−α}` for all input levels (module docs); `∞`
/// where row `i` puts mass on a letter row `i'` never outputs.
pub fn d_alpha_matrix(design: &MvuDesign, alpha: f64) -> Result<Vec<Vec<f64>>> {
    check_order(alpha)?;
    let p = design.p();
    let n = p.len();
    let mut out = vec![vec![0.0; n]; n];
    for i in 0..n {
        for k in 0..n {
            let mut terms = Vec::with_capacity(p[i].len());
            let mut infinite = false;
            for (&a, &b) in p[i].iter().zip(&p[k]) {
                if a > 0.0 {
                    if b > 0.0 {
                        terms.push(alpha * a.ln() + (1.0 - alpha) * b.ln());
                    } else {
                        infinite = true;
                    }
                }
            }
            out[i][k] = if infinite {
                f64::INFINITY
            } else {
                let mx = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = terms.iter().map(|t| (t - mx).exp()).sum();
                ((mx + s.ln()) / (alpha - 1.0)).max(0.0)
            };
        }
    }
    Ok(out)
}

/// The RDP curve of the scalar MVU mechanism: `ε(α) = max_{i,i'} D^α_{i,i'}` for each order
/// (module docs: exact over continuous inputs). Feed it to the accountant as a user-supplied
/// RDP curve.
pub fn mvu_rdp_curve(design: &MvuDesign, orders: &[f64]) -> Result<Vec<f64>> {
    orders
        .iter()
        .map(|&a| {
            let d = d_alpha_matrix(design, a)?;
            Ok(d.iter().flatten().cloned().fold(0.0f64, f64::max))
        })
        .collect()
}

/// The vector mechanism's metric power (1 or 2) and ℓp sensitivity (finite, > 0).
pub(crate) fn check_vector(p: u32, sensitivity: f64) -> Result<()> {
    if !(p == 1 || p == 2) {
        return Err(MechanismError::invalid("p", f64::from(p), "must be 1 or 2"));
    }
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(MechanismError::invalid(
            "sensitivity",
            sensitivity,
            "must be finite and > 0",
        ));
    }
    Ok(())
}

/// The vector mechanism's dimension (at least 1).
pub(crate) fn check_dim(dim: usize) -> Result<()> {
    if dim == 0 {
        return Err(MechanismError::invalid("dim", 0.0, "must be >= 1"));
    }
    Ok(())
}

/// `max_{|i−i'| = k} D^α_{i,i'}` for `k = 1..B_in−1` (index `k−1`).
fn best_by_distance(d: &[Vec<f64>]) -> Vec<f64> {
    let n = d.len();
    let mut best = vec![0.0f64; n - 1];
    for (i, row) in d.iter().enumerate() {
        for (k, &v) in row.iter().enumerate() {
            if i != k {
                let dist = i.abs_diff(k);
                best[dist - 1] = best[dist - 1].max(v);
            }
        }
    }
    best
}

/// Lemma 7's greedy upper bound on the α-RDP of the vector mechanism whose rescaled dithered
/// inputs differ by at most `sensitivity` in `ℓp`: `(budget/C*)·D*` with
/// `budget = (B_in−1)^p·sensitivity^p` and `D*/C* = max_{i≠i'} D^α_{ii'}/|i−i'|^p`.
pub fn vector_rdp_greedy(design: &MvuDesign, alpha: f64, p: u32, sensitivity: f64) -> Result<f64> {
    check_vector(p, sensitivity)?;
    let d = d_alpha_matrix(design, alpha)?;
    let n = d.len();
    let budget = ((n - 1) as f64 * sensitivity).powi(p as i32);
    let ratio = best_by_distance(&d)
        .iter()
        .enumerate()
        .map(|(k, &v)| v / ((k + 1) as f64).powi(p as i32))
        .fold(0.0f64, f64::max);
    Ok(budget * ratio)
}

/// `g(c) = max{⟨D,π⟩ : ⟨C,π⟩ ≤ c, Σπ ≤ 1, π ≥ 0}` from the best `D` per distance (module docs).
fn envelope(points: &[(f64, f64)], c: f64) -> f64 {
    // Points (C_k > 0, D_k ≥ 0), plus the origin.
    let mut best = 0.0f64;
    for &(ck, dk) in points {
        best = best.max(dk * (c / ck).min(1.0));
    }
    for &(c1, d1) in points {
        for &(c2, d2) in points {
            if c1 < c && c < c2 {
                let w1 = (c2 - c) / (c2 - c1);
                best = best.max(w1 * d1 + (1.0 - w1) * d2);
            }
        }
    }
    best
}

/// The LP relaxation (4) of the α-RDP of the `dim`-coordinate vector mechanism whose rescaled
/// dithered inputs differ by at most `sensitivity` in `ℓp` (module docs: exact value of the
/// relaxation, an upper bound on the RDP, at most [`vector_rdp_greedy`]).
pub fn vector_rdp_lp(
    design: &MvuDesign,
    alpha: f64,
    p: u32,
    sensitivity: f64,
    dim: usize,
) -> Result<f64> {
    check_vector(p, sensitivity)?;
    check_dim(dim)?;
    let d = d_alpha_matrix(design, alpha)?;
    let n = d.len();
    let budget = ((n - 1) as f64 * sensitivity).powi(p as i32);
    let points: Vec<(f64, f64)> = best_by_distance(&d)
        .iter()
        .enumerate()
        .map(|(k, &v)| (((k + 1) as f64).powi(p as i32), v))
        .collect();
    Ok(dim as f64 * envelope(&points, budget / dim as f64))
}

/// The vector bounds of an [`RdpReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VectorRdp {
    /// The dimension d.
    pub dim: usize,
    /// The ℓp distance Δ between neighbouring rescaled inputs.
    pub sensitivity: f64,
    /// The metric power p (1 for an LDP design).
    pub p: u32,
    /// The greedy bound (Lemma 7) per order.
    pub greedy: Vec<f64>,
    /// The LP relaxation (4) per order.
    pub lp_relaxation: Vec<f64>,
}

/// The Rényi DP of a design (`privfed mvu rdp`): the scalar curve and, for a vector, its bounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RdpReport {
    /// Rényi orders α.
    pub orders: Vec<f64>,
    /// The scalar mechanism's exact `ε(α)` per order ([`mvu_rdp_curve`]).
    pub scalar_rdp: Vec<f64>,
    /// The design's exact ε-LDP.
    pub ldp_epsilon: f64,
    /// The vector bounds (with a dimension and a sensitivity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector: Option<VectorRdp>,
}

/// The Rényi orders of an [`RdpReport`] unless the caller names others (`privfed mvu rdp`,
/// Python's `privfed.mvu.rdp_report`).
pub const REPORT_ORDERS: [f64; 7] = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// The [`RdpReport`] of `design` on `orders`, with the vector bounds at `(dim, sensitivity)`
/// when given.
pub fn rdp_report(
    design: &MvuDesign,
    orders: &[f64],
    vector: Option<(usize, f64)>,
) -> Result<RdpReport> {
    let scalar_rdp = mvu_rdp_curve(design, orders)?;
    let vector = match vector {
        None => None,
        Some((dim, sensitivity)) => {
            let p = match design.constraint() {
                DpConstraint::Metric { power } => power,
                DpConstraint::Ldp => 1,
            };
            let greedy = orders
                .iter()
                .map(|&o| vector_rdp_greedy(design, o, p, sensitivity))
                .collect::<Result<Vec<_>>>()?;
            let lp_relaxation = orders
                .iter()
                .map(|&o| vector_rdp_lp(design, o, p, sensitivity, dim))
                .collect::<Result<Vec<_>>>()?;
            Some(VectorRdp {
                dim,
                sensitivity,
                p,
                greedy,
                lp_relaxation,
            })
        }
    };
    Ok(RdpReport {
        orders: orders.to_vec(),
        scalar_rdp,
        ldp_epsilon: design.ldp_epsilon(),
        vector,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::designer::{DesignOptions, design_mvu, grr_design};
    use clarabel::algebra::CscMatrix;
    use clarabel::solver::{
        DefaultSettingsBuilder, DefaultSolver, IPSolver, NonnegativeConeT, SolverStatus,
    };
    use privfed_mechanisms::mvu::DpConstraint;

    // The ε-DP RDP bound, tight for binary RR (docs/ALGORITHMS.md §5.1).
    use privfed_accounting::rdp::pure_dp_rdp;

    #[test]
    fn one_bit_design_matches_binary_rr_rdp() {
        // A 1-bit-in, 1-bit-out design at ε is binary RR (with an unbiased alphabet): its RDP is
        // the closed form, e.g. ε = 1, α = 2 → 0.735326 (docs/ALGORITHMS.md §5.1).
        let d = grr_design(1, 1, 1.0, DpConstraint::Ldp).unwrap();
        let c = mvu_rdp_curve(&d, &[2.0, 5.0]).unwrap();
        assert!((c[0] - 0.735326).abs() < 1e-6, "{}", c[0]);
        assert!((c[1] - pure_dp_rdp(1.0, 5.0)).abs() < 1e-12);
        let d = grr_design(1, 1, 3.0, DpConstraint::Ldp).unwrap();
        let c = mvu_rdp_curve(&d, &[5.0]).unwrap();
        assert!((c[0] - 2.987853).abs() < 1e-6, "{}", c[0]);
    }

    #[test]
    fn rdp_is_below_the_pure_dp_bound_and_increasing() {
        for eps in [1.0, 3.0] {
            let r = design_mvu(
                3,
                3,
                eps,
                DpConstraint::Ldp,
                &DesignOptions {
                    random_starts: Some(0),
                    ..DesignOptions::default()
                },
            )
            .unwrap();
            let orders = [1.5, 2.0, 4.0, 8.0, 32.0, 256.0];
            let c = mvu_rdp_curve(&r.design, &orders).unwrap();
            let e = r.design.ldp_epsilon();
            for (k, (&a, &v)) in orders.iter().zip(&c).enumerate() {
                assert!(v <= pure_dp_rdp(e, a) + 1e-12, "α={a}: {v}");
                assert!(v <= e + 1e-12);
                if k > 0 {
                    assert!(v >= c[k - 1] - 1e-12);
                }
            }
            // Large orders approach the max-divergence ε.
            assert!(c[5] > 0.9 * e);
        }
        assert!(mvu_rdp_curve(&grr_design(2, 2, 1.0, DpConstraint::Ldp).unwrap(), &[1.0]).is_err());
    }

    /// The exact multiple-choice knapsack by dynamic programming over the integer budget.
    fn knapsack(d: &[Vec<f64>], p: u32, budget: usize, dim: usize) -> f64 {
        let n = d.len();
        let best = best_by_distance(d);
        let mut f = vec![0.0f64; budget + 1];
        for _ in 0..dim {
            let mut g = f.clone();
            for b in 0..=budget {
                for k in 1..n {
                    let c = k.pow(p);
                    if c <= b {
                        g[b] = g[b].max(f[b - c] + best[k - 1]);
                    }
                }
            }
            f = g;
        }
        f[budget]
    }

    /// The LP (4) with all d·B_in² variables, solved by Clarabel.
    fn lp_clarabel(d: &[Vec<f64>], p: u32, budget: f64, dim: usize) -> f64 {
        let n = d.len();
        let k = n * n;
        let nv = dim * k;
        let (mut ri, mut ci, mut vv, mut b) = (vec![], vec![], vec![], vec![]);
        let mut row = 0;
        for l in 0..dim {
            for v in 0..k {
                let (i, j) = (v / n, v % n);
                ri.push(0);
                ci.push(l * k + v);
                vv.push((i.abs_diff(j) as f64).powi(p as i32));
                // Σπ_l ≤ 1
                ri.push(1 + l);
                ci.push(l * k + v);
                vv.push(1.0);
            }
        }
        b.push(budget);
        b.extend(std::iter::repeat_n(1.0, dim));
        row += 1 + dim;
        for v in 0..nv {
            ri.push(row);
            ci.push(v);
            vv.push(-1.0);
            b.push(0.0);
            row += 1;
        }
        let a = CscMatrix::new_from_triplets(row, nv, ri, ci, vv);
        let q: Vec<f64> = (0..nv).map(|v| -d[(v % k) / n][v % n]).collect();
        let pm = CscMatrix::<f64>::zeros((nv, nv));
        let s = DefaultSettingsBuilder::default()
            .verbose(false)
            .tol_gap_abs(1e-12)
            .tol_gap_rel(1e-12)
            .build()
            .unwrap();
        let mut solver = DefaultSolver::new(&pm, &q, &a, &b, &[NonnegativeConeT(row)], s).unwrap();
        solver.solve();
        assert_eq!(solver.solution.status, SolverStatus::Solved);
        -solver.solution.obj_val
    }

    #[test]
    fn vector_bounds_are_ordered_and_the_lp_is_exact() {
        let r = design_mvu(
            3,
            2,
            2.0,
            DpConstraint::Metric { power: 1 },
            &DesignOptions {
                random_starts: Some(0),
                ..DesignOptions::default()
            },
        )
        .unwrap();
        let r2 = design_mvu(
            3,
            3,
            6.0,
            DpConstraint::Metric { power: 2 },
            &DesignOptions {
                random_starts: Some(0),
                ..DesignOptions::default()
            },
        )
        .unwrap();
        for (design, p) in [(&r.design, 1u32), (&r2.design, 2u32)] {
            for alpha in [2.0, 8.0] {
                let d = d_alpha_matrix(design, alpha).unwrap();
                for (sens, dim) in [(1.0, 1), (0.5, 3), (1.0, 4), (2.0 / 7.0, 5)] {
                    let lp = vector_rdp_lp(design, alpha, p, sens, dim).unwrap();
                    let greedy = vector_rdp_greedy(design, alpha, p, sens).unwrap();
                    let budget = (7.0 * sens).powi(p as i32);
                    let exact_lp = lp_clarabel(&d, p, budget, dim);
                    assert!(
                        (lp - exact_lp).abs() <= 1e-7 * exact_lp.max(1e-3),
                        "p={p} α={alpha} Δ={sens} d={dim}: {lp} vs Clarabel {exact_lp}"
                    );
                    let ks = knapsack(&d, p, (budget + 1e-9).floor() as usize, dim);
                    assert!(ks <= lp + 1e-12, "knapsack {ks} > lp {lp}");
                    assert!(lp <= greedy + 1e-12, "lp {lp} > greedy {greedy}");
                }
            }
        }
        // d = 1 with the full range is the scalar curve.
        let c = mvu_rdp_curve(&r.design, &[3.0]).unwrap()[0];
        assert!((vector_rdp_lp(&r.design, 3.0, 1, 1.0, 1).unwrap() - c).abs() < 1e-12);
        assert!(vector_rdp_lp(&r.design, 3.0, 3, 1.0, 1).is_err());
        assert!(vector_rdp_lp(&r.design, 3.0, 1, 0.0, 1).is_err());
        assert!(vector_rdp_lp(&r.design, 3.0, 1, 1.0, 0).is_err());
        assert!(vector_rdp_greedy(&r.design, 0.5, 1, 1.0).is_err());
    }
}
