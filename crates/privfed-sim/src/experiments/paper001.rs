//! Paper 001's comparison of accounting methods (its Fig. 2): ε against the noise of a
//! sensitivity-1 scalar query, for the Gaussian, Skellam and the distributed discrete Gaussian
//! under several accountants. Every number comes from `privfed-accounting` (and the analytic
//! Gaussian from `privfed-mechanisms`); this module only lays out the grid.
//!
//! The query has sensitivity 1 and central noise standard deviation `σ` (unscaled). Skellam and
//! DDG work on integers: the query and the noise are scaled by an integer `s`, so the integer
//! sensitivity is `s` and the Skellam variance `μ = s²σ²`; DDG's central noise `sσ` is the sum of
//! `n` client shares of standard deviation `sσ/√n`, which costs it the `τ` term.

use super::grid::{Grid, axis};
use super::{ExperimentError, Silent};
use privfed_accounting::ddg::ddg_tau;
use privfed_accounting::rdp::default_orders;
use privfed_accounting::skellam::skellam_exact_rdp_1d;
use privfed_accounting::{DpEvent, PldAccountant, PrivacyAccountant, RdpAccountant};
use privfed_mechanisms::gaussian::gaussian_epsilon;
use privfed_plot::csv::{CsvWriter, opt};

/// The grid of [`epsilon_vs_noise`].
#[derive(Debug, Clone, PartialEq)]
pub struct EpsilonVsNoise {
    /// Central noise standard deviations σ (unscaled, sensitivity 1), each > 0.
    pub sigmas: Vec<f64>,
    /// Integer scale `s` (≥ 1) applied to the query and the noise of Skellam and DDG.
    pub scale: u64,
    /// Clients `n` (≥ 1) sharing the DDG noise (Skellam shares sum exactly, so `n` does not
    /// matter to it).
    pub clients: u64,
    /// Releases composed (≥ 1).
    pub steps: u64,
    /// δ of the reported (ε, δ).
    pub delta: f64,
}

impl EpsilonVsNoise {
    /// The default integer scale `s = 1` (the query unscaled), used by `privfed analyze
    /// epsilon-vs-noise` and by Python's `epsilon_vs_noise` when `scale` is not given.
    pub const DEFAULT_SCALE: u64 = 1;
    /// The default number of clients `n = 100` sharing the DDG noise.
    pub const DEFAULT_CLIENTS: u64 = 100;
    /// The default number of composed releases (one).
    pub const DEFAULT_STEPS: u64 = 1;
    /// The default δ = 10⁻⁵ of the reported (ε, δ).
    pub const DEFAULT_DELTA: f64 = 1e-5;
}

/// The accounting methods compared, in CSV order.
pub const METHODS: [&str; 7] = [
    "gaussian_analytic",
    "gaussian_pld",
    "gaussian_rdp",
    "skellam_pld",
    "skellam_rdp_exact",
    "skellam_rdp_bound",
    "ddg_rdp",
];

/// One point: ε of `method` at noise `sigma` (`None` when the accountant reports no finite ε).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpsilonPoint {
    /// σ.
    pub sigma: f64,
    /// One of [`METHODS`].
    pub method: &'static str,
    /// ε at the grid's δ.
    pub epsilon: Option<f64>,
}

fn finite(e: f64) -> Option<f64> {
    e.is_finite().then_some(e)
}

/// ε at `delta` of `steps` compositions of `event` under the accountant `A`.
fn epsilon<A: PrivacyAccountant + Default>(
    event: DpEvent,
    steps: u64,
    delta: f64,
) -> Result<Option<f64>, ExperimentError> {
    let mut acc = A::default();
    acc.compose(&DpEvent::SelfComposed {
        event: Box::new(event),
        count: steps,
    })?;
    Ok(finite(acc.get_epsilon(delta)?))
}

/// ε against σ for every method of [`METHODS`] (`gaussian_analytic` only for one release).
///
/// * `gaussian_analytic`: the exact ε of the Gaussian mechanism (Balle–Wang);
/// * `gaussian_pld`, `gaussian_rdp`: the Gaussian under the PLD and RDP accountants;
/// * `skellam_pld`: the exact one-dimensional Skellam PLD;
/// * `skellam_rdp_exact`: the exact one-dimensional Skellam RDP curve (by summation) under the
///   RDP accountant's orders and conversion;
/// * `skellam_rdp_bound`: paper 001's RDP bound (Thm. 3.5), what the distributed pipeline uses;
/// * `ddg_rdp`: the distributed discrete Gaussian bound with `τ` for `n` shares.
pub fn epsilon_vs_noise(grid: &EpsilonVsNoise) -> Result<Vec<EpsilonPoint>, ExperimentError> {
    let bad = |what: &str| Err(ExperimentError::Options(what.to_string()));
    if grid.sigmas.is_empty() {
        return bad("at least one noise level is needed");
    }
    if let Some(s) = grid.sigmas.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return bad(&format!("noise levels must be finite and > 0 (got {s})"));
    }
    if grid.scale == 0 || grid.clients == 0 || grid.steps == 0 {
        return bad("scale, clients and steps must be at least 1");
    }
    if !(grid.delta > 0.0 && grid.delta < 1.0) {
        return bad(&format!("delta must be in (0, 1) (got {})", grid.delta));
    }
    let (s, t, delta) = (grid.scale as f64, grid.steps, grid.delta);
    let orders = default_orders();
    let points = axis("sigma", grid.sigmas.iter().copied());
    let per_sigma = Grid::new(&points).run(&mut Silent, |trial, _| {
        let sigma = trial.point.config;
        let mu = s * s * sigma * sigma;
        let skellam = DpEvent::Skellam {
            mu,
            l1_sensitivity: s,
            l2_sensitivity: s,
        };
        let gaussian = DpEvent::Gaussian {
            noise_multiplier: sigma,
        };
        let exact_curve = DpEvent::RdpCurve {
            epsilons: orders
                .iter()
                .map(|&a| skellam_exact_rdp_1d(mu, grid.scale, a))
                .collect::<Result<_, _>>()?,
            orders: orders.clone(),
        };
        let central = s * sigma;
        let ddg = DpEvent::DistributedDiscreteGaussian {
            sigma: central,
            l1_sensitivity: s,
            l2_sensitivity: s,
            tau: ddg_tau(grid.clients, central / (grid.clients as f64).sqrt())?,
            dim: 1,
        };
        let values = [
            if t == 1 {
                finite(gaussian_epsilon(sigma, 1.0, delta)?)
            } else {
                None
            },
            epsilon::<PldAccountant>(gaussian.clone(), t, delta)?,
            epsilon::<RdpAccountant>(gaussian, t, delta)?,
            epsilon::<PldAccountant>(skellam.clone(), t, delta)?,
            epsilon::<RdpAccountant>(exact_curve, t, delta)?,
            epsilon::<RdpAccountant>(skellam, t, delta)?,
            epsilon::<RdpAccountant>(ddg, t, delta)?,
        ];
        Ok::<_, ExperimentError>(
            METHODS
                .into_iter()
                .zip(values)
                .filter(|(method, _)| *method != "gaussian_analytic" || t == 1)
                .map(|(method, epsilon)| EpsilonPoint {
                    sigma,
                    method,
                    epsilon,
                })
                .collect::<Vec<_>>(),
        )
    })?;
    Ok(per_sigma.into_iter().flatten().flatten().collect())
}

/// The points as CSV: `scale,clients,steps,delta,sigma,method,epsilon` (empty ε: none finite).
pub fn epsilon_vs_noise_csv(grid: &EpsilonVsNoise, points: &[EpsilonPoint]) -> String {
    let mut csv = CsvWriter::with_header("scale,clients,steps,delta,sigma,method,epsilon");
    for p in points {
        csv.row(&[
            &grid.scale,
            &grid.clients,
            &grid.steps,
            &grid.delta,
            &p.sigma,
            &p.method,
            &opt(p.epsilon),
        ]);
    }
    csv.into_string()
}

/// What `privfed analyze epsilon-vs-noise` prints: the grid's settings and its points.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpsilonVsNoiseReport {
    /// `epsilon_vs_noise`.
    pub analysis: &'static str,
    /// Integer scale `s` of the query and noise (Skellam, DDG).
    pub scale: u64,
    /// Clients `n` sharing the DDG noise.
    pub clients: u64,
    /// Releases composed.
    pub steps: u64,
    /// δ.
    pub delta: f64,
    /// ε per noise level and method (`null` where no finite ε).
    pub points: Vec<EpsilonPoint>,
}

/// The [`EpsilonVsNoiseReport`] of `grid` ([`epsilon_vs_noise`]).
pub fn epsilon_vs_noise_report(
    grid: &EpsilonVsNoise,
    points: Vec<EpsilonPoint>,
) -> EpsilonVsNoiseReport {
    EpsilonVsNoiseReport {
        analysis: "epsilon_vs_noise",
        scale: grid.scale,
        clients: grid.clients,
        steps: grid.steps,
        delta: grid.delta,
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(scale: u64, clients: u64) -> EpsilonVsNoise {
        EpsilonVsNoise {
            sigmas: vec![1.0, 4.0],
            scale,
            clients,
            steps: 1,
            delta: 1e-5,
        }
    }

    fn eps(points: &[EpsilonPoint], sigma: f64, method: &str) -> f64 {
        points
            .iter()
            .find(|p| p.sigma == sigma && p.method == method)
            .and_then(|p| p.epsilon)
            .unwrap()
    }

    #[test]
    fn methods_order_as_the_theory_says() {
        let pts = epsilon_vs_noise(&grid(10, 100)).unwrap();
        assert_eq!(pts.len(), 2 * METHODS.len());
        for sigma in [1.0, 4.0] {
            let analytic = eps(&pts, sigma, "gaussian_analytic");
            // PLD of the Gaussian is (nearly) exact; RDP conversion is looser.
            assert!((eps(&pts, sigma, "gaussian_pld") / analytic - 1.0).abs() < 0.01);
            assert!(eps(&pts, sigma, "gaussian_rdp") > analytic);
            // Exact Skellam RDP ≤ the Thm. 3.5 bound, and the bound ≥ the Gaussian's RDP term.
            assert!(eps(&pts, sigma, "skellam_rdp_exact") <= eps(&pts, sigma, "skellam_rdp_bound"));
            assert!(eps(&pts, sigma, "skellam_rdp_bound") >= eps(&pts, sigma, "gaussian_rdp"));
            // The exact Skellam PLD is at most its RDP conversion.
            assert!(
                eps(&pts, sigma, "skellam_pld") <= eps(&pts, sigma, "skellam_rdp_exact") * 1.001
            );
        }
        // More noise, less ε.
        for m in METHODS {
            assert!(eps(&pts, 4.0, m) < eps(&pts, 1.0, m), "{m}");
        }
    }

    #[test]
    fn ddg_pays_for_many_small_shares() {
        // One client: τ = 0 and DDG is the Gaussian's RDP. Many tiny shares: much worse.
        let one = epsilon_vs_noise(&grid(1, 1)).unwrap();
        assert!((eps(&one, 1.0, "ddg_rdp") / eps(&one, 1.0, "gaussian_rdp") - 1.0).abs() < 1e-12);
        let many = epsilon_vs_noise(&grid(1, 1000)).unwrap();
        assert!(eps(&many, 1.0, "ddg_rdp") > 2.0 * eps(&many, 1.0, "gaussian_rdp"));
    }

    #[test]
    fn bad_grids_are_errors() {
        let mut g = grid(1, 1);
        g.sigmas = vec![f64::NAN];
        assert!(epsilon_vs_noise(&g).is_err());
        let mut g = grid(0, 1);
        g.sigmas = vec![1.0];
        assert!(epsilon_vs_noise(&g).is_err());
        let mut g = grid(1, 1);
        g.delta = 0.0;
        assert!(epsilon_vs_noise(&g).is_err());
    }
}
