//! The privacy events of the Skellam pipeline, from the clients that **actually contributed**.
//!
//! A round in which `m` clients' shares reach the sum adds `Sk(m·s²σ²)` to every coordinate of
//! the integer sum: the central Skellam variance is `m·μ_local`, so a round where clients dropped
//! is accounted with less noise (and a larger ε) — never with the planned cohort's. Sensitivities
//! are those of one client's rounded vector ([`SkellamParams::l2_sensitivity`],
//! [`SkellamParams::l1_sensitivity`]), all in the integer domain, which is what
//! [`DpEvent::Skellam`] takes (docs/ALGORITHMS.md §2.2).

use crate::encoder::NoiseShare;
use crate::error::{DistributedError, Result};
use crate::params::SkellamParams;
use privfed_accounting::{DpEvent, RdpAccountant};
use serde::Serialize;

/// The colluders the accounting assumes among `cohort` clients at colluding fraction `γ`:
/// `⌈γ·cohort⌉`, the same count the secure-aggregation planner sizes its thresholds for
/// (`privfed_secagg::plan`, Bell et al. 2020's `⌈γn⌉` corrupted clients), so one γ means one
/// number of colluders on both sides. Errors when γ is not a finite number in `[0, 1)`.
pub fn colluders(cohort: usize, colluding_fraction: f64) -> Result<usize> {
    if !(colluding_fraction.is_finite() && (0.0..1.0).contains(&colluding_fraction)) {
        return Err(DistributedError::invalid(
            "colluding_fraction",
            colluding_fraction,
            "must be in [0, 1)",
        ));
    }
    Ok(((colluding_fraction * cohort as f64).ceil() as usize).min(cohort))
}

/// The lower bound on the **honest** contributors whose noise protects a client, when
/// `contributors` of a `cohort` reach the sum and a fraction `γ = colluding_fraction` of the
/// cohort may collude with the server:
///
/// ```text
/// h = contributors − ⌈γ·cohort⌉
/// ```
///
/// A colluding client knows the noise share it added (or adds none), so the server and the
/// colluders can subtract it from the sum; only the honest contributors' shares remain as noise.
/// At most `⌈γ·cohort⌉` clients of the cohort collude ([`colluders`]), and the bound assumes the
/// worst case: all of them survive (a colluder never drops out), so every dropout is an honest
/// client and the honest survivors are the contributors minus every colluder. `γ = 0` gives
/// `h = contributors` (every survivor's noise counts, the honest-but-curious accounting).
///
/// Errors: γ outside `[0, 1)` or not finite; `contributors > cohort`; no honest contributor left
/// (`⌈γ·cohort⌉ ≥ contributors`: the colluders alone could be the whole sum, no DP guarantee).
pub fn honest_contributors(
    cohort: usize,
    contributors: usize,
    colluding_fraction: f64,
) -> Result<usize> {
    let c = colluders(cohort, colluding_fraction)?;
    if contributors > cohort {
        return Err(DistributedError::invalid(
            "contributors",
            contributors as f64,
            format!("more than the cohort of {cohort}"),
        ));
    }
    match contributors.checked_sub(c) {
        Some(h) if h > 0 => Ok(h),
        _ => Err(DistributedError::NoHonestContributor {
            contributors,
            colluders: c,
            colluding_fraction,
        }),
    }
}

/// The local integer noise standard deviation `s·σ`, after checking that the round has
/// contributors and noise (errors: nobody contributed, or `σ = 0`, no DP guarantee).
fn local_integer_stddev(params: &SkellamParams, contributors: usize) -> Result<f64> {
    if contributors == 0 {
        return Err(DistributedError::invalid(
            "contributors",
            0.0,
            "a round with no contribution releases nothing to account",
        ));
    }
    let local = params.scale() * params.local_noise_stddev();
    if local <= 0.0 {
        return Err(DistributedError::invalid(
            "local_noise_stddev",
            params.local_noise_stddev(),
            "no noise: the round has no differential-privacy guarantee",
        ));
    }
    Ok(local)
}

/// The event of one round with `contributors` clients' noise in the sum.
///
/// Errors when nobody contributed or the parameters carry no noise (`σ = 0`: no DP guarantee).
pub fn round_event(params: &SkellamParams, contributors: usize) -> Result<DpEvent> {
    local_integer_stddev(params, contributors)?;
    Ok(DpEvent::Skellam {
        mu: contributors as f64 * params.local_mu(),
        l1_sensitivity: params.l1_sensitivity(),
        l2_sensitivity: params.l2_sensitivity(),
    })
}

/// The event of one round of the **distributed discrete Gaussian** baseline with `contributors`
/// clients each adding `N_ℤ(0, s²σ²)`: central σ = `√m·s·σ`, the same sensitivities, and the
/// sum-of-discrete-Gaussians correction `τ` ([`privfed_accounting::ddg`]) over `d'` coordinates.
pub fn ddg_round_event(params: &SkellamParams, contributors: usize) -> Result<DpEvent> {
    let local = local_integer_stddev(params, contributors)?;
    Ok(DpEvent::DistributedDiscreteGaussian {
        sigma: (contributors as f64).sqrt() * local,
        l1_sensitivity: params.l1_sensitivity(),
        l2_sensitivity: params.l2_sensitivity(),
        tau: privfed_accounting::ddg::ddg_tau(contributors as u64, local)?,
        dim: params.padded_dim() as u64,
    })
}

/// The round event of `share`'s mechanism ([`round_event`] or [`ddg_round_event`]).
pub fn round_event_for(
    share: NoiseShare,
    params: &SkellamParams,
    contributors: usize,
) -> Result<DpEvent> {
    match share {
        NoiseShare::Skellam => round_event(params, contributors),
        NoiseShare::DiscreteGaussian => ddg_round_event(params, contributors),
    }
}

/// ε at `delta` after composing `event` (RDP accountant).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EpsilonReport {
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
    /// The Rényi order that attained it.
    pub rdp_order: f64,
}

/// ε at `delta` (RDP accountant) of `rounds` uses of the round event `event`, each on a Poisson
/// sample of the clients with rate `sampling_rate` (`1`: no sampling; amplified by the
/// accountant's generic bound, Zhu & Wang 2019): [`DpEvent::sampled_steps`].
pub(crate) fn epsilon_after_rounds(
    event: DpEvent,
    sampling_rate: f64,
    rounds: u64,
    delta: f64,
) -> Result<EpsilonReport> {
    let mut acc = RdpAccountant::new();
    acc.compose(&DpEvent::sampled_steps(event, sampling_rate, rounds))?;
    let r = acc.get_epsilon_and_order(delta)?;
    Ok(EpsilonReport {
        epsilon: r.epsilon,
        delta,
        rdp_order: r.optimal_order,
    })
}

/// ε for δ of `rounds` identical sampled Skellam rounds with `contributors` each.
pub fn epsilon_for_rounds(
    params: &SkellamParams,
    contributors: usize,
    sampling_rate: f64,
    rounds: u64,
    delta: f64,
) -> Result<EpsilonReport> {
    epsilon_for_rounds_with(
        NoiseShare::Skellam,
        params,
        contributors,
        sampling_rate,
        rounds,
        delta,
    )
}

/// ε for δ of `rounds` identical sampled rounds of `share`'s mechanism with `contributors` each.
pub fn epsilon_for_rounds_with(
    share: NoiseShare,
    params: &SkellamParams,
    contributors: usize,
    sampling_rate: f64,
    rounds: u64,
    delta: f64,
) -> Result<EpsilonReport> {
    epsilon_after_rounds(
        round_event_for(share, params, contributors)?,
        sampling_rate,
        rounds,
        delta,
    )
}
