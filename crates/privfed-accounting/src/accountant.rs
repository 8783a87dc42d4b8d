//! The accountant interface (DESIGN.md convention 3; the idea of dp_accounting's
//! `PrivacyAccountant`): compose privacy events, say which events are supported without
//! composing them, answer ε for δ and δ for ε, keep a ledger of what was composed, and state the
//! neighbouring relation the answers assume.
//!
//! Implemented by [`crate::RdpAccountant`], [`crate::PldAccountant`] and
//! [`crate::PureCappedRdpAccountant`]. Calibration ([`crate::calibrate`]) is generic over it.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::event::DpEvent;

/// Which data sets are neighbours in the guarantee an accountant reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NeighbouringRelation {
    /// Add or remove one record (one person's data, or one client's report). Every event of
    /// [`DpEvent`] is stated under this relation (unit sensitivities, Poisson sampling); the
    /// answer is the worse of the two directions. Replace-one guarantees follow by group privacy
    /// (a replacement is a removal and an addition), not computed here.
    AddOrRemoveOne,
    /// Replace one record by another (the data set size is public).
    ReplaceOne,
}

/// What an accountant has composed so far, in order (serde: `{"events": [...]}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    events: Vec<DpEvent>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// The composed events, in the order they were composed.
    pub fn events(&self) -> &[DpEvent] {
        &self.events
    }

    /// Number of `compose` calls that succeeded.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True if nothing has been composed.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The whole history as one event (`Composed` of the ledger's events): composing it into a
    /// fresh accountant of the same kind gives the same answers.
    pub fn as_event(&self) -> DpEvent {
        DpEvent::Composed {
            events: self.events.clone(),
        }
    }

    /// Records a successfully composed event.
    pub(crate) fn record(&mut self, event: &DpEvent) {
        self.events.push(event.clone());
    }
}

/// A privacy accountant: composes [`DpEvent`]s and converts the composition to (ε, δ).
///
/// Contract (tested for every implementation and every event kind): `supports(e)` is true
/// exactly when `compose(e)` succeeds on a fresh accountant, barring numerical failure; a failed
/// `compose` changes nothing (neither the state nor the ledger); the ledger holds exactly the
/// events whose `compose` succeeded.
pub trait PrivacyAccountant {
    /// A short name (`"rdp"`, `"pld"`, …), as used in [`crate::AccountingError::UnsupportedEvent`].
    fn name(&self) -> &'static str;

    /// The neighbouring relation of the reported guarantees.
    fn neighbouring_relation(&self) -> NeighbouringRelation;

    /// Whether `event` is valid and of a kind this accountant composes (no state changes).
    fn supports(&self, event: &DpEvent) -> bool;

    /// Composes `event` (validated first; on error the accountant is unchanged).
    fn compose(&mut self, event: &DpEvent) -> Result<()>;

    /// ε at `delta` ∈ (0, 1) of everything composed so far.
    fn get_epsilon(&self, delta: f64) -> Result<f64>;

    /// δ at `epsilon` ≥ 0 of everything composed so far.
    fn get_delta(&self, epsilon: f64) -> Result<f64>;

    /// The events composed so far.
    fn ledger(&self) -> &Ledger;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PldAccountant, PureCappedRdpAccountant, RdpAccountant};

    /// One valid event of every kind (and every sampled form), plus invalid ones.
    fn events() -> Vec<DpEvent> {
        let g = DpEvent::Gaussian {
            noise_multiplier: 2.0,
        };
        let l = DpEvent::Laplace { scale: 2.0 };
        let p = DpEvent::PureDp { epsilon: 0.5 };
        let sk1 = DpEvent::Skellam {
            mu: 50.0,
            l1_sensitivity: 2.0,
            l2_sensitivity: 2.0,
        };
        let sk2 = DpEvent::Skellam {
            mu: 50.0,
            l1_sensitivity: 4.0,
            l2_sensitivity: 2.0,
        };
        let curve = DpEvent::RdpCurve {
            orders: vec![2.0, 8.0],
            epsilons: vec![0.1, 0.5],
        };
        let b = Box::new;
        let mut v = vec![
            g.clone(),
            l.clone(),
            p.clone(),
            sk1.clone(),
            sk2.clone(),
            curve.clone(),
            DpEvent::DistributedDiscreteGaussian {
                sigma: 30.0,
                l1_sensitivity: 40.0,
                l2_sensitivity: 6.0,
                tau: 1e-3,
                dim: 64,
            },
        ];
        for inner in [&g, &l, &p, &sk1, &sk2, &curve] {
            for rate in [0.1, 1.0] {
                v.push(DpEvent::PoissonSampled {
                    rate,
                    event: b(inner.clone()),
                });
                v.push(DpEvent::LocalSampled {
                    rate,
                    event: b(inner.clone()),
                });
            }
        }
        v.push(DpEvent::Composed {
            events: vec![g.clone(), l.clone(), p.clone()],
        });
        v.push(DpEvent::Composed {
            events: vec![g.clone(), curve.clone()],
        });
        v.push(DpEvent::SelfComposed {
            event: b(p.clone()),
            count: 3,
        });
        v.push(DpEvent::SelfComposed {
            event: b(curve.clone()),
            count: 0,
        });
        v.push(DpEvent::SelfComposed {
            event: b(DpEvent::SelfComposed {
                event: b(g.clone()),
                count: u64::MAX,
            }),
            count: 2,
        });
        // Invalid events: no accountant supports them.
        v.push(DpEvent::Gaussian {
            noise_multiplier: -1.0,
        });
        v.push(DpEvent::PoissonSampled {
            rate: 1.5,
            event: b(g),
        });
        v
    }

    fn check_contract<A: PrivacyAccountant + Clone>(fresh: &A) {
        let mut acc = fresh.clone();
        let mut composed = Vec::new();
        for e in events() {
            let supported = fresh.supports(&e);
            let before = acc.get_delta(1.0).unwrap();
            let r = acc.compose(&e);
            assert_eq!(
                supported,
                r.is_ok(),
                "{}: supports {supported}, compose {r:?}",
                fresh.name()
            );
            if r.is_ok() {
                composed.push(e);
            } else {
                assert_eq!(acc.get_delta(1.0).unwrap(), before, "{}", fresh.name());
            }
            assert_eq!(
                acc.ledger().events(),
                composed.as_slice(),
                "{}",
                fresh.name()
            );
        }
        assert_eq!(
            fresh.neighbouring_relation(),
            NeighbouringRelation::AddOrRemoveOne
        );
        assert!(fresh.ledger().is_empty());
        // The ledger replays to the same answers.
        let mut replay = fresh.clone();
        replay.compose(&acc.ledger().as_event()).unwrap();
        assert_eq!(
            replay.get_epsilon(1e-5).unwrap(),
            acc.get_epsilon(1e-5).unwrap()
        );
    }

    #[test]
    fn supports_agrees_with_compose_and_the_ledger_is_exact() {
        check_contract(&RdpAccountant::new());
        check_contract(&PldAccountant::with_discretization(1e-2).unwrap());
        check_contract(&PureCappedRdpAccountant::new());
        // Which kinds each accountant refuses (valid events only).
        let pld = PldAccountant::new();
        let rdp = RdpAccountant::new();
        let refused: Vec<String> = events()
            .iter()
            .filter(|e| e.validate().is_ok() && !pld.supports(e))
            .map(DpEvent::name)
            .collect();
        assert_eq!(
            refused,
            [
                "Skellam",
                "RdpCurve",
                "DistributedDiscreteGaussian",
                "PoissonSampled(PureDp)",
                "PoissonSampled(Skellam)",
                "PoissonSampled(Skellam)",
                "LocalSampled(Skellam)",
                "PoissonSampled(Skellam)",
                "LocalSampled(Skellam)",
                "PoissonSampled(RdpCurve)",
                "LocalSampled(RdpCurve)",
                "PoissonSampled(RdpCurve)",
                "LocalSampled(RdpCurve)",
                "Composed[Gaussian, RdpCurve]",
                "SelfComposed(SelfComposed(Gaussian x 18446744073709551615) x 2)",
            ]
        );
        assert!(
            events()
                .iter()
                .all(|e| rdp.supports(e) == e.validate().is_ok())
        );
    }

    #[test]
    fn trait_answers_equal_inherent_ones() {
        let e = DpEvent::poisson_gaussian(0.01, 1.1, 500);
        let mut rdp = RdpAccountant::new();
        rdp.compose(&e).unwrap();
        let dynamic: &dyn PrivacyAccountant = &rdp;
        assert_eq!(dynamic.get_epsilon(1e-5), rdp.get_epsilon(1e-5));
        assert_eq!(dynamic.get_delta(1.0), rdp.get_delta(1.0));
        assert_eq!(dynamic.name(), "rdp");
        let mut pld = PldAccountant::with_discretization(1e-3).unwrap();
        pld.compose(&e).unwrap();
        let dynamic: &dyn PrivacyAccountant = &pld;
        assert_eq!(dynamic.get_epsilon(1e-5), pld.get_epsilon(1e-5));
        assert_eq!(dynamic.get_delta(1.0), pld.get_delta(1.0));
        assert_eq!(dynamic.name(), "pld");
        let json = serde_json::to_value(pld.ledger()).unwrap();
        assert_eq!(json["events"][0], serde_json::to_value(&e).unwrap());
    }
}
