//! RDP accounting capped by pure composition (docs/ALGORITHMS.md §5.1–5.2).
//!
//! When every composed step is pure ε_t-DP, the composition is also `(Σ ε_t, 0)`-DP (basic
//! composition, Dwork & Roth 2014, Thm 3.16), which beats the RDP conversion at small step
//! counts. [`PureCappedRdpAccountant`] keeps an [`RdpAccountant`] and the running `Σ ε_t`, and
//! answers with the smaller ε (or δ = 0 once ε reaches the pure total), naming the source.
//!
//! The pure ε of a step comes from the event itself ([`DpEvent::declared_pure_epsilon`]) or is
//! stated by the caller for an RDP curve of a mechanism known to be ε-DP (e.g. an MVU design:
//! [`PureCappedRdpAccountant::compose_with_pure_epsilon`]).

use serde::Serialize;

use crate::accountant::{Ledger, NeighbouringRelation, PrivacyAccountant};
use crate::error::{Result, check_nonnegative};
use crate::event::DpEvent;
use crate::rdp::RdpAccountant;

/// Which bound an answer of [`PureCappedRdpAccountant`] comes from (serde: snake_case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundSource {
    /// The RDP conversion.
    Rdp,
    /// Pure composition `Σ ε_t` at δ = 0.
    PureComposition,
}

/// ε at a given δ. Without a pure total only `delta`, `optimal_order` and `epsilon` are set
/// (serialized); with one, the RDP figure is kept in `epsilon_rdp` and `epsilon_from` names the
/// source of `epsilon`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CappedEpsilon {
    /// `Σ ε_t` if every step is pure ε-DP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_pure_composition: Option<f64>,
    /// The requested δ.
    pub delta: f64,
    /// The Rényi order of the RDP conversion's minimum.
    pub optimal_order: f64,
    /// The RDP ε (only with a pure total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_rdp: Option<f64>,
    /// The reported ε: `min(epsilon_rdp, epsilon_pure_composition)`, or the RDP ε.
    pub epsilon: f64,
    /// Where `epsilon` comes from (only with a pure total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_from: Option<BoundSource>,
}

/// δ at a given ε. Without a pure total only `epsilon` and `delta` are set; with one, the RDP
/// figure is kept in `delta_rdp` and `delta_from` names the source of `delta`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CappedDelta {
    /// `Σ ε_t` if every step is pure ε-DP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon_pure_composition: Option<f64>,
    /// The requested ε.
    pub epsilon: f64,
    /// The RDP δ (only with a pure total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_rdp: Option<f64>,
    /// The reported δ: 0 if `epsilon ≥ epsilon_pure_composition`, else the RDP δ.
    pub delta: f64,
    /// Where `delta` comes from (only with a pure total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_from: Option<BoundSource>,
}

/// An [`RdpAccountant`] that also tracks the pure-composition total `Σ ε_t` while every composed
/// step has a pure ε, and caps its answers by it (module docs). Neighbouring relation
/// add/remove-one, like the RDP accountant it wraps; supports what that accountant supports.
#[derive(Debug, Clone)]
pub struct PureCappedRdpAccountant {
    rdp: RdpAccountant,
    /// `Some(Σ ε_t)` while every composed event has a pure ε; `None` after any other.
    pure_total: Option<f64>,
}

impl Default for PureCappedRdpAccountant {
    fn default() -> Self {
        Self::new()
    }
}

impl PureCappedRdpAccountant {
    /// An empty accountant on the default orders (pure total 0).
    pub fn new() -> Self {
        Self::from_rdp(RdpAccountant::new())
    }

    /// Wraps an empty RDP accountant (e.g. on a custom order grid). If `rdp` has already
    /// composed events their pure ε is unknown and the cap is off.
    pub fn from_rdp(rdp: RdpAccountant) -> Self {
        let pure_total = if rdp.ledger().is_empty() {
            Some(0.0)
        } else {
            None
        };
        Self { rdp, pure_total }
    }

    /// The wrapped RDP accountant.
    pub fn rdp(&self) -> &RdpAccountant {
        &self.rdp
    }

    /// The events composed so far.
    pub fn ledger(&self) -> &Ledger {
        self.rdp.ledger()
    }

    /// `Σ ε_t` if every composed event has a pure ε.
    pub fn pure_total(&self) -> Option<f64> {
        self.pure_total
    }

    /// Composes `event`; its pure ε is [`DpEvent::declared_pure_epsilon`] (if `None`, the cap
    /// is off from now on). On error nothing changes.
    pub fn compose(&mut self, event: &DpEvent) -> Result<()> {
        self.compose_repeated(event, 1)
    }

    /// Composes `event` `count` times (pure total `+ count·ε`); O(1) when `event` is the last
    /// composed event ([`RdpAccountant::compose_repeated`]). On error nothing changes.
    pub fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        self.rdp.compose_repeated(event, count)?;
        if count > 0 {
            self.pure_total = match (self.pure_total, event.declared_pure_epsilon()) {
                (Some(t), Some(e)) => Some(t + count as f64 * e),
                _ => None,
            };
        }
        Ok(())
    }

    /// Composes `event` (typically an RDP curve) whose mechanism, as a whole, the caller knows to
    /// be `pure_epsilon`-DP (e.g. `T` uses of an ε-LDP MVU design: `T·ε`). On error nothing
    /// changes.
    pub fn compose_with_pure_epsilon(&mut self, event: &DpEvent, pure_epsilon: f64) -> Result<()> {
        check_nonnegative("pure_epsilon", pure_epsilon)?;
        self.rdp.compose(event)?;
        self.pure_total = self.pure_total.map(|t| t + pure_epsilon);
        Ok(())
    }

    /// ε at `delta` ∈ (0, 1): the RDP ε, capped by the pure total when there is one.
    pub fn epsilon_answer(&self, delta: f64) -> Result<CappedEpsilon> {
        let r = self.rdp.get_epsilon_and_order(delta)?;
        let mut a = CappedEpsilon {
            epsilon_pure_composition: self.pure_total,
            delta,
            optimal_order: r.optimal_order,
            epsilon_rdp: None,
            epsilon: r.epsilon,
            epsilon_from: None,
        };
        if let Some(total) = self.pure_total {
            a.epsilon_rdp = Some(r.epsilon);
            let (eps, from) = if r.epsilon <= total {
                (r.epsilon, BoundSource::Rdp)
            } else {
                (total, BoundSource::PureComposition)
            };
            a.epsilon = eps;
            a.epsilon_from = Some(from);
        }
        Ok(a)
    }

    /// δ at `epsilon` ≥ 0: the RDP δ, or 0 when `epsilon` reaches the pure total.
    pub fn delta_answer(&self, epsilon: f64) -> Result<CappedDelta> {
        let d_rdp = self.rdp.get_delta(epsilon)?;
        let mut a = CappedDelta {
            epsilon_pure_composition: self.pure_total,
            epsilon,
            delta_rdp: None,
            delta: d_rdp,
            delta_from: None,
        };
        if let Some(total) = self.pure_total {
            a.delta_rdp = Some(d_rdp);
            let (delta, from) = if epsilon >= total {
                (0.0, BoundSource::PureComposition)
            } else {
                (d_rdp, BoundSource::Rdp)
            };
            a.delta = delta;
            a.delta_from = Some(from);
        }
        Ok(a)
    }
}

impl PrivacyAccountant for PureCappedRdpAccountant {
    fn name(&self) -> &'static str {
        "rdp_pure_capped"
    }

    fn neighbouring_relation(&self) -> NeighbouringRelation {
        self.rdp.neighbouring_relation()
    }

    fn supports(&self, event: &DpEvent) -> bool {
        self.rdp.supports(event)
    }

    fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        PureCappedRdpAccountant::compose_repeated(self, event, count)
    }

    fn get_epsilon(&self, delta: f64) -> Result<f64> {
        Ok(self.epsilon_answer(delta)?.epsilon)
    }

    fn get_delta(&self, epsilon: f64) -> Result<f64> {
        Ok(self.delta_answer(epsilon)?.delta)
    }

    fn ledger(&self) -> &Ledger {
        self.rdp.ledger()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pure_steps(eps: f64, steps: u64) -> DpEvent {
        DpEvent::SelfComposed {
            event: Box::new(DpEvent::PureDp { epsilon: eps }),
            count: steps,
        }
    }

    #[test]
    fn small_step_counts_take_the_pure_total() {
        let mut a = PureCappedRdpAccountant::new();
        a.compose(&pure_steps(1.0, 2)).unwrap();
        assert_eq!(a.pure_total(), Some(2.0));
        let e = a.epsilon_answer(1e-6).unwrap();
        let rdp = a.rdp().get_epsilon_and_order(1e-6).unwrap();
        assert_eq!(e.epsilon_rdp, Some(rdp.epsilon));
        assert_eq!(e.optimal_order, rdp.optimal_order);
        assert!(rdp.epsilon > 2.0, "{}", rdp.epsilon);
        assert_eq!(e.epsilon, 2.0);
        assert_eq!(e.epsilon_from, Some(BoundSource::PureComposition));
        let d = a.delta_answer(2.0).unwrap();
        assert_eq!(
            (d.delta, d.delta_from),
            (0.0, Some(BoundSource::PureComposition))
        );
        let d = a.delta_answer(1.5).unwrap();
        assert_eq!(d.delta, a.rdp().get_delta(1.5).unwrap());
        assert_eq!(d.delta_from, Some(BoundSource::Rdp));
    }

    #[test]
    fn many_steps_take_the_rdp_bound() {
        let mut a = PureCappedRdpAccountant::new();
        a.compose(&pure_steps(0.1, 10_000)).unwrap();
        let e = a.epsilon_answer(1e-6).unwrap();
        assert!(e.epsilon < 1000.0);
        assert_eq!(e.epsilon_from, Some(BoundSource::Rdp));
        assert_eq!(Some(e.epsilon), e.epsilon_rdp);
        assert_eq!(PrivacyAccountant::get_epsilon(&a, 1e-6).unwrap(), e.epsilon);
    }

    #[test]
    fn non_pure_events_turn_the_cap_off_and_match_plain_rdp() {
        let mut a = PureCappedRdpAccountant::new();
        let mut plain = RdpAccountant::new();
        for ev in [pure_steps(1.0, 3), DpEvent::poisson_gaussian(0.1, 1.0, 10)] {
            a.compose(&ev).unwrap();
            plain.compose(&ev).unwrap();
        }
        assert_eq!(a.pure_total(), None);
        let e = a.epsilon_answer(1e-5).unwrap();
        let want = plain.get_epsilon_and_order(1e-5).unwrap();
        assert_eq!(
            (e.epsilon, e.optimal_order),
            (want.epsilon, want.optimal_order)
        );
        assert_eq!((e.epsilon_rdp, e.epsilon_from), (None, None));
        let v = serde_json::to_value(e).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
        let d = a.delta_answer(1.0).unwrap();
        assert_eq!(d.delta, plain.get_delta(1.0).unwrap());
        assert_eq!(a.ledger().len(), 2);
    }

    #[test]
    fn stated_pure_epsilon_and_failures() {
        let curve = DpEvent::RdpCurve {
            orders: vec![2.0, 4.0],
            epsilons: vec![0.1, 0.3],
        };
        let mut a = PureCappedRdpAccountant::new();
        // An RDP curve alone has no pure ε.
        assert_eq!(curve.declared_pure_epsilon(), None);
        a.compose_with_pure_epsilon(&curve, 0.5).unwrap();
        assert_eq!(a.pure_total(), Some(0.5));
        assert!(a.compose_with_pure_epsilon(&curve, -1.0).is_err());
        let bad = DpEvent::PureDp { epsilon: -1.0 };
        assert!(a.compose(&bad).is_err());
        assert_eq!(a.pure_total(), Some(0.5));
        assert_eq!(a.ledger().events(), std::slice::from_ref(&curve));
        assert_eq!(a.ledger().runs().len(), 1);
    }
}
