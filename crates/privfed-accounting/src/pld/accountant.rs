//! The PLD accountant ([`PldAccountant`]) and the exact Gaussian PLD queries
//! ([`gaussian_delta`], [`gaussian_epsilon`]).

use super::pmf::DiscretePld;
use super::{DEFAULT_TAIL_MASS, DEFAULT_VALUE_DISCRETIZATION};
use crate::accountant::{Ledger, NeighbouringRelation, PrivacyAccountant};
use crate::error::{AccountingError, Result, check_delta, check_nonnegative};
use crate::event::DpEvent;
use std::sync::Mutex;

/// δ of the Gaussian PLD with parameter μ (sum over composed Gaussians of `1/(2z²)`), exactly:
/// `δ(ε) = Φ((μ − ε)/√(2μ)) − e^ε·Φ((−μ − ε)/√(2μ))`.
///
/// This is the analytic-Gaussian privacy profile of Balle & Wang 2018 (docs/ALGORITHMS.md §2.5)
/// in its μ form: with `μ = Δ²/(2σ²)`, i.e. `σ = 1` and `Δ = √(2μ)`, `Δ/(2σ) − εσ/Δ =
/// (μ − ε)/√(2μ)`; it is computed by [`privfed_mechanisms::gaussian::gaussian_delta`], the one
/// home of the formula. `μ = 0` (no Gaussian) gives 0; NaN for an invalid μ or ε.
pub fn gaussian_delta(mu: f64, epsilon: f64) -> f64 {
    if mu == 0.0 && epsilon >= 0.0 {
        return 0.0;
    }
    privfed_mechanisms::gaussian::gaussian_delta(1.0, (2.0 * mu).sqrt(), epsilon)
}

/// The smallest ε ≥ 0 with [`gaussian_delta`]`(μ, ε) ≤ δ`: the inverse of the profile by
/// [`privfed_mechanisms::gaussian::gaussian_epsilon`] at `σ = 1`, `Δ = √(2μ)` (bisection to a
/// relative width of `4·2^{−52}`, rounded up). `μ = 0` gives 0 and `μ = +∞` (no noise) `+∞`;
/// NaN for an invalid μ or δ.
pub fn gaussian_epsilon(mu: f64, delta: f64) -> f64 {
    if mu == 0.0 {
        return 0.0;
    }
    if mu == f64::INFINITY {
        return f64::INFINITY;
    }
    privfed_mechanisms::gaussian::gaussian_epsilon(1.0, (2.0 * mu).sqrt(), delta)
        .unwrap_or(f64::NAN)
}

const SKELLAM_1D: &str =
    "the exact PLD is one-dimensional: needs l1_sensitivity == l2_sensitivity, an integer";
const POISSON_KINDS: &str =
    "Poisson sampling is supported for the Gaussian and the Laplace only (use the RDP accountant)";
const DDG: &str =
    "the distributed discrete Gaussian is accounted by its RDP bound only (use the RDP accountant)";
const LOCAL_KINDS: &str = "local sampling is supported for the Gaussian, Laplace, pure-DP and one-dimensional Skellam events only (use the RDP accountant)";
const WOR: &str = "sampling without replacement (replace-one neighbours) is accounted by the RDP accountant only, as in dp_accounting 0.6.0";
const RDP_CURVE: &str = "an RDP curve does not determine a PLD";

/// The sensitivity of a Skellam event the exact (one-dimensional) PLD handles: `l1 == l2`, an
/// integer up to 10⁶.
fn skellam_dim(l1: f64, l2: f64) -> Option<u64> {
    (l1 == l2 && l1.fract() == 0.0 && l1 <= 1e6).then_some(l1 as u64)
}

/// `outer · inner` repetitions, or an error if the product overflows `u64`.
fn total_count(outer: u64, inner: u64) -> Result<u64> {
    outer.checked_mul(inner).ok_or_else(|| {
        AccountingError::invalid(
            "count",
            inner as f64,
            "total composition count overflows u64",
        )
    })
}

/// PLD accountant: keeps a discrete PLD for each neighbouring direction (remove, add) and the
/// total Gaussian parameter μ (Gaussians compose exactly: `N(μ₁,2μ₁) * N(μ₂,2μ₂) = N(μ₁+μ₂, …)`,
/// so they are discretized once, at query time). Reports the worse of the two directions.
///
/// Supports Gaussian, Laplace, pure ε-DP (as randomized response), one-dimensional Skellam
/// (`l1_sensitivity == l2_sensitivity`, an integer), Poisson-sampled Gaussian and Laplace, compositions.
/// Rejects Poisson sampling of anything else, sampling without replacement (as dp_accounting
/// 0.6.0's PLD accountant) and user RDP curves with [`AccountingError::UnsupportedEvent`].
///
/// **Lazy.** `compose` checks the event and records it in the ledger (runs of identical
/// events), nothing more; the PLDs are built at the first query, each run `(event, count)` by
/// one self-composition by `count`, and cached: the composition of every run but the last is
/// kept, so a query after more steps of the same event costs one self-composition of the last
/// run and one composition with the cached prefix. A numerical failure of the discretization
/// is reported by the query.
#[derive(Debug)]
pub struct PldAccountant {
    pub(super) h: f64,
    pub(super) tail: f64,
    pub(super) ledger: Ledger,
    cache: Mutex<Option<Box<PldCache>>>,
}

/// The composed state of a prefix of the ledger's runs.
#[derive(Debug, Clone)]
struct PldCache {
    /// How many runs `prefix` holds (all but the last when it was built).
    closed: usize,
    prefix: PldState,
    /// The full state, for `(number of runs, last run's count)`.
    full: Option<(usize, u64, PldState)>,
}

impl Clone for PldAccountant {
    fn clone(&self) -> Self {
        Self {
            h: self.h,
            tail: self.tail,
            ledger: self.ledger.clone(),
            cache: Mutex::new(lock(&self.cache).clone()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while the lock was held can only leave a stale cache entry, which is rebuilt.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The composed PLDs of some events.
#[derive(Debug, Clone)]
pub(super) struct PldState {
    pub(super) h: f64,
    pub(super) tail: f64,
    pub(super) gaussian_mu: f64,
    pub(super) remove: DiscretePld,
    pub(super) add: DiscretePld,
}

impl Default for PldAccountant {
    fn default() -> Self {
        Self::new()
    }
}

impl PldAccountant {
    /// An empty accountant with grid width [`DEFAULT_VALUE_DISCRETIZATION`].
    pub fn new() -> Self {
        Self::with_discretization(DEFAULT_VALUE_DISCRETIZATION).expect("valid default")
    }

    /// An empty accountant with grid width `h` (> 0; smaller is tighter and slower).
    pub fn with_discretization(h: f64) -> Result<Self> {
        crate::error::check_positive("value_discretization_interval", h)?;
        Ok(Self {
            h,
            tail: DEFAULT_TAIL_MASS,
            ledger: Ledger::new(),
            cache: Mutex::new(None),
        })
    }

    /// The grid width this accountant was built with.
    pub fn value_discretization_interval(&self) -> f64 {
        self.h
    }

    /// The current grid width (larger than requested if memory bounds forced coarsening; builds
    /// the PLDs if they are not cached, and gives the requested width if that fails).
    pub fn discretization(&self) -> f64 {
        self.with_state(|s| Ok(s.remove.h.max(s.add.h)))
            .unwrap_or(self.h)
    }

    /// Composes `event` (validated first; on error the accountant is unchanged).
    pub fn compose(&mut self, event: &DpEvent) -> Result<()> {
        self.compose_repeated(event, 1)
    }

    /// Composes `event` `count` times ([`PrivacyAccountant::compose_repeated`]): checks it and
    /// records it; the PLDs are built at query time.
    pub fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        event.validate()?;
        Self::check_supported(event, count.max(1))?;
        if count == 0 {
            return Ok(());
        }
        if let Some(total) = self.ledger.merged_count(event, count)? {
            Self::check_supported(event, total)?;
        }
        self.ledger.record(event, count);
        Ok(())
    }

    /// The events composed so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Runs `f` on the composed state of the whole ledger (built from the cache, see the type's
    /// docs).
    fn with_state<T>(&self, f: impl FnOnce(&PldState) -> Result<T>) -> Result<T> {
        let runs = self.ledger.runs();
        let fresh = || PldState::identity(self.h, self.tail);
        let Some(last) = runs.last() else {
            return f(&fresh());
        };
        let n = runs.len();
        let mut guard = lock(&self.cache);
        let cache = guard.get_or_insert_with(|| {
            Box::new(PldCache {
                closed: 0,
                prefix: fresh(),
                full: None,
            })
        });
        if cache.closed > n - 1 {
            // Only a cache from another ledger could be longer: start again.
            **cache = PldCache {
                closed: 0,
                prefix: fresh(),
                full: None,
            };
        }
        if let Some((len, count, state)) = &cache.full
            && *len == n
            && *count == last.count
        {
            return f(state);
        }
        while cache.closed < n - 1 {
            let run = &runs[cache.closed];
            let mut next = cache.prefix.clone();
            next.compose_inner(&run.event, run.count)?;
            cache.prefix = next;
            cache.closed += 1;
        }
        let mut state = cache.prefix.clone();
        state.compose_inner(&last.event, last.count)?;
        let out = f(&state);
        cache.full = Some((n, last.count, state));
        out
    }

    /// ε at `delta` ∈ (0,1): the larger of the two directions (`+∞` if the mass at `+∞`
    /// exceeds δ).
    pub fn get_epsilon(&self, delta: f64) -> Result<f64> {
        check_delta(delta)?;
        self.with_state(|s| s.get_epsilon(delta))
    }

    /// δ at `epsilon` ≥ 0: the larger of the two directions.
    pub fn get_delta(&self, epsilon: f64) -> Result<f64> {
        check_nonnegative("epsilon", epsilon)?;
        self.with_state(|s| s.get_delta(epsilon))
    }

    /// `Ok` if a valid `event` repeated `count` times is of a kind this accountant composes
    /// (the structure [`PldAccountant::compose`] walks, without discretizing anything).
    fn check_supported(event: &DpEvent, count: u64) -> Result<()> {
        match event {
            DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } | DpEvent::PureDp { .. } => Ok(()),
            DpEvent::Skellam {
                l1_sensitivity,
                l2_sensitivity,
                ..
            } => match skellam_dim(*l1_sensitivity, *l2_sensitivity) {
                Some(_) => Ok(()),
                None => Err(Self::unsupported(event, SKELLAM_1D)),
            },
            DpEvent::PoissonSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return Self::check_supported(inner, count);
                }
                match **inner {
                    DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } => Ok(()),
                    _ => Err(Self::unsupported(event, POISSON_KINDS)),
                }
            }
            DpEvent::LocalSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return Self::check_supported(inner, count);
                }
                match **inner {
                    DpEvent::Gaussian { .. } | DpEvent::Laplace { .. } | DpEvent::PureDp { .. } => {
                        Ok(())
                    }
                    DpEvent::Skellam {
                        l1_sensitivity,
                        l2_sensitivity,
                        ..
                    } if skellam_dim(l1_sensitivity, l2_sensitivity).is_some() => Ok(()),
                    _ => Err(Self::unsupported(event, LOCAL_KINDS)),
                }
            }
            DpEvent::Composed { events } => events
                .iter()
                .try_for_each(|e| Self::check_supported(e, count)),
            DpEvent::SelfComposed { event: e, count: c } => {
                let total = total_count(count, *c)?;
                if total == 0 {
                    return Ok(());
                }
                Self::check_supported(e, total)
            }
            DpEvent::RdpCurve { .. } => Err(Self::unsupported(event, RDP_CURVE)),
            DpEvent::SampledWithoutReplacement { .. } => Err(Self::unsupported(event, WOR)),
            DpEvent::DistributedDiscreteGaussian { .. } => Err(Self::unsupported(event, DDG)),
        }
    }

    fn unsupported(event: &DpEvent, reason: &str) -> AccountingError {
        AccountingError::UnsupportedEvent {
            accountant: "pld",
            event: event.name(),
            reason: reason.into(),
        }
    }
}

impl PldState {
    fn identity(h: f64, tail: f64) -> Self {
        Self {
            h,
            tail,
            gaussian_mu: 0.0,
            remove: DiscretePld::identity(h),
            add: DiscretePld::identity(h),
        }
    }

    fn add_pair(
        &mut self,
        remove: DiscretePld,
        add: Option<DiscretePld>,
        count: u64,
    ) -> Result<()> {
        for p in std::iter::once(&remove).chain(add.as_ref()) {
            if !p.is_valid() {
                return Err(AccountingError::Numerical(
                    "non-finite or negative mass in a discretized PLD".into(),
                ));
            }
        }
        let r = remove.self_composed(count, self.tail);
        let symmetric_so_far = self.remove == self.add;
        match add {
            Some(a) => {
                let a = a.self_composed(count, self.tail);
                self.remove = self.remove.composed(&r, self.tail);
                self.add = self.add.composed(&a, self.tail);
            }
            None if symmetric_so_far => {
                self.remove = self.remove.composed(&r, self.tail);
                self.add = self.remove.clone();
            }
            None => {
                self.remove = self.remove.composed(&r, self.tail);
                self.add = self.add.composed(&r, self.tail);
            }
        }
        Ok(())
    }

    fn compose_inner(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let h = self.h;
        match event {
            DpEvent::Gaussian { noise_multiplier } => {
                self.gaussian_mu += count as f64 / (2.0 * noise_multiplier * noise_multiplier);
            }
            DpEvent::Laplace { scale } => {
                self.add_pair(DiscretePld::laplace(*scale, h)?, None, count)?
            }
            DpEvent::PureDp { epsilon } => {
                self.add_pair(DiscretePld::pure_dp(*epsilon, h)?, None, count)?
            }
            DpEvent::Skellam {
                mu,
                l1_sensitivity,
                l2_sensitivity,
            } => {
                let d = skellam_dim(*l1_sensitivity, *l2_sensitivity)
                    .ok_or_else(|| PldAccountant::unsupported(event, SKELLAM_1D))?;
                // Symmetric: Sk(μ) vs Δ+Sk(μ) and the reverse have the same PLD.
                self.add_pair(DiscretePld::skellam(*mu, d, h)?, None, count)?
            }
            DpEvent::PoissonSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return self.compose_inner(inner, count);
                }
                match **inner {
                    DpEvent::Gaussian { noise_multiplier } => self.add_pair(
                        DiscretePld::poisson_gaussian(*rate, noise_multiplier, true, h)?,
                        Some(DiscretePld::poisson_gaussian(
                            *rate,
                            noise_multiplier,
                            false,
                            h,
                        )?),
                        count,
                    )?,
                    DpEvent::Laplace { scale } => self.add_pair(
                        DiscretePld::poisson_laplace(*rate, scale, true, h)?,
                        Some(DiscretePld::poisson_laplace(*rate, scale, false, h)?),
                        count,
                    )?,
                    _ => return Err(PldAccountant::unsupported(event, POISSON_KINDS)),
                }
            }
            DpEvent::LocalSampled { rate, event: inner } => {
                if *rate >= 1.0 {
                    return self.compose_inner(inner, count);
                }
                // Every supported inner pair is symmetric (its reversed pair has the same PLD).
                let base = match **inner {
                    DpEvent::Gaussian { noise_multiplier } => {
                        DiscretePld::gaussian(1.0 / (2.0 * noise_multiplier * noise_multiplier), h)?
                    }
                    DpEvent::Laplace { scale } => DiscretePld::laplace(scale, h)?,
                    DpEvent::PureDp { epsilon } => DiscretePld::pure_dp(epsilon, h)?,
                    DpEvent::Skellam {
                        mu,
                        l1_sensitivity,
                        l2_sensitivity,
                    } => match skellam_dim(l1_sensitivity, l2_sensitivity) {
                        Some(d) => DiscretePld::skellam(mu, d, h)?,
                        None => return Err(PldAccountant::unsupported(event, LOCAL_KINDS)),
                    },
                    _ => return Err(PldAccountant::unsupported(event, LOCAL_KINDS)),
                };
                self.add_pair(base.locally_sampled(*rate), None, count)?
            }
            DpEvent::Composed { events } => {
                for e in events {
                    self.compose_inner(e, count)?;
                }
            }
            DpEvent::SelfComposed { event: e, count: c } => {
                self.compose_inner(e, total_count(count, *c)?)?;
            }
            DpEvent::RdpCurve { .. } => return Err(PldAccountant::unsupported(event, RDP_CURVE)),
            DpEvent::SampledWithoutReplacement { .. } => {
                return Err(PldAccountant::unsupported(event, WOR));
            }
            DpEvent::DistributedDiscreteGaussian { .. } => {
                return Err(PldAccountant::unsupported(event, DDG));
            }
        }
        Ok(())
    }

    /// The final PLDs (remove, add), with the Gaussian part folded in; `None` if only
    /// Gaussians were composed (answered exactly by [`gaussian_delta`]).
    fn finals(&self) -> Result<Option<(DiscretePld, DiscretePld)>> {
        if self.remove.is_identity() && self.add.is_identity() {
            return Ok(None);
        }
        if self.gaussian_mu > 0.0 {
            let g = DiscretePld::gaussian(self.gaussian_mu, self.h)?;
            Ok(Some((
                self.remove.composed(&g, self.tail),
                self.add.composed(&g, self.tail),
            )))
        } else {
            Ok(Some((self.remove.clone(), self.add.clone())))
        }
    }

    /// ε at `delta` ∈ (0,1): the larger of the two directions (`+∞` if the mass at `+∞`
    /// exceeds δ).
    fn get_epsilon(&self, delta: f64) -> Result<f64> {
        if !self.gaussian_mu.is_finite() {
            return Ok(f64::INFINITY); // a Gaussian with (numerically) no noise
        }
        Ok(match self.finals()? {
            None if self.gaussian_mu == 0.0 => 0.0,
            None => gaussian_epsilon(self.gaussian_mu, delta),
            Some((r, a)) => r.get_epsilon(delta).max(a.get_epsilon(delta)),
        })
    }

    /// δ at `epsilon` ≥ 0: the larger of the two directions.
    fn get_delta(&self, epsilon: f64) -> Result<f64> {
        if !self.gaussian_mu.is_finite() {
            return Ok(1.0);
        }
        Ok(match self.finals()? {
            None if self.gaussian_mu == 0.0 => 0.0,
            None => gaussian_delta(self.gaussian_mu, epsilon),
            Some((r, a)) => r.get_delta(epsilon).max(a.get_delta(epsilon)),
        })
    }
}

/// Neighbouring relation add/remove-one: both directions (remove, add) are tracked and the
/// worse is reported. Supports the events listed on [`PldAccountant`].
impl PrivacyAccountant for PldAccountant {
    fn name(&self) -> &'static str {
        "pld"
    }

    fn neighbouring_relation(&self) -> NeighbouringRelation {
        NeighbouringRelation::AddOrRemoveOne
    }

    fn supports(&self, event: &DpEvent) -> bool {
        event.validate().is_ok() && Self::check_supported(event, 1).is_ok()
    }

    fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        PldAccountant::compose_repeated(self, event, count)
    }

    fn get_epsilon(&self, delta: f64) -> Result<f64> {
        PldAccountant::get_epsilon(self, delta)
    }

    fn get_delta(&self, epsilon: f64) -> Result<f64> {
        PldAccountant::get_delta(self, epsilon)
    }

    fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaussian_mu_form_is_the_mechanisms_profile() {
        // μ = Δ²/(2σ²): the μ form at μ equals the (σ, Δ) form, here with σ and Δ chosen so
        // that √(2μ) = Δ/σ is exact.
        for (sigma, sens) in [(1.0, 1.0), (2.0, 1.0), (0.5, 2.0), (4.0, 0.25)] {
            let mu = sens * sens / (2.0 * sigma * sigma);
            for eps in [0.0, 0.5, 1.0, 3.0] {
                let via_mu = gaussian_delta(mu, eps);
                let direct = privfed_mechanisms::gaussian::gaussian_delta(sigma, sens, eps);
                assert!(
                    (via_mu - direct).abs() <= 1e-15 * direct.max(1e-300) + 1e-300,
                    "σ={sigma} Δ={sens} ε={eps}: {via_mu} vs {direct}"
                );
            }
            let e = gaussian_epsilon(mu, 1e-6);
            let direct = privfed_mechanisms::gaussian::gaussian_epsilon(sigma, sens, 1e-6).unwrap();
            assert!((e - direct).abs() <= 1e-14 * direct, "{e} vs {direct}");
            assert!(gaussian_delta(mu, e) <= 1e-6);
        }
        // The closed form at μ = 1/2 (σ = Δ = 1), ε = 1: Φ(−1/2) − e·Φ(−3/2).
        let phi = |x: f64| 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2);
        let want = phi(-0.5) - 1f64.exp() * phi(-1.5);
        assert!((gaussian_delta(0.5, 1.0) / want - 1.0).abs() < 1e-13);
        // Edge cases of the μ form.
        assert_eq!(gaussian_delta(0.0, 1.0), 0.0);
        assert_eq!(gaussian_epsilon(0.0, 1e-5), 0.0);
        assert_eq!(gaussian_epsilon(f64::INFINITY, 1e-5), f64::INFINITY);
        assert!(gaussian_epsilon(1.0, 2.0).is_nan());
        assert!(gaussian_delta(-1.0, 1.0).is_nan());
    }
}
