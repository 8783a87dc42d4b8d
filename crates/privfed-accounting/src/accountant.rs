//! The accountant interface (DESIGN.md convention 3; the idea of dp_accounting's
//! `PrivacyAccountant`): compose privacy events, say which events are supported without
//! composing them, answer ε for δ and δ for ε, keep a ledger of what was composed, and state the
//! neighbouring relation the answers assume.
//!
//! Implemented by [`crate::RdpAccountant`], [`crate::PldAccountant`] and
//! [`crate::PureCappedRdpAccountant`]. Calibration ([`crate::calibrate`]) is generic over it.

use serde::{Deserialize, Serialize};

use crate::error::{AccountingError, Result};
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

/// One run of the ledger: `event` composed `count` times in a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerRun {
    /// The composed event.
    pub event: DpEvent,
    /// How many times in a row it was composed (≥ 1).
    pub count: u64,
}

/// What an accountant has composed so far, in order, as runs of identical events: composing the
/// same event again adds 1 to the last run's count, so the ledger of `T` identical steps is one
/// run, whatever `T` (serde: `{"runs": [{"event": ..., "count": n}, ...]}`; the older form with
/// one entry per composition, `{"events": [...]}`, still deserializes, coalesced).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LedgerRepr")]
pub struct Ledger {
    runs: Vec<LedgerRun>,
}

/// The serialized forms a ledger is read from: runs, or one entry per composition (older files).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerRepr {
    #[serde(default)]
    runs: Option<Vec<LedgerRun>>,
    #[serde(default)]
    events: Option<Vec<DpEvent>>,
}

impl TryFrom<LedgerRepr> for Ledger {
    type Error = String;

    fn try_from(r: LedgerRepr) -> std::result::Result<Self, String> {
        let mut ledger = Ledger::new();
        match (r.runs, r.events) {
            (Some(runs), None) => {
                for run in runs {
                    ledger.record(&run.event, run.count);
                }
            }
            (None, Some(events)) => {
                for e in &events {
                    ledger.record(e, 1);
                }
            }
            (None, None) => {}
            (Some(_), Some(_)) => {
                return Err("a ledger has `runs` or (older) `events`, not both".into());
            }
        }
        Ok(ledger)
    }
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runs of identical events, in the order they were composed.
    pub fn runs(&self) -> &[LedgerRun] {
        &self.runs
    }

    /// The composed events, one entry per composition (each run's event `count` times; the
    /// cost is the total count: prefer [`Ledger::runs`]).
    pub fn events(&self) -> Vec<DpEvent> {
        self.runs
            .iter()
            .flat_map(|r| std::iter::repeat_n(&r.event, r.count as usize))
            .cloned()
            .collect()
    }

    /// Number of compositions that succeeded (the sum of the runs' counts, saturating).
    pub fn len(&self) -> usize {
        self.runs
            .iter()
            .fold(0usize, |n, r| n.saturating_add(r.count as usize))
    }

    /// True if nothing has been composed.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The whole history as one event (`Composed` of the runs, a run of `count > 1` as
    /// `SelfComposed`): composing it into a fresh accountant of the same kind gives the same
    /// answers.
    pub fn as_event(&self) -> DpEvent {
        DpEvent::Composed {
            events: self
                .runs
                .iter()
                .map(|r| {
                    if r.count == 1 {
                        r.event.clone()
                    } else {
                        DpEvent::SelfComposed {
                            event: Box::new(r.event.clone()),
                            count: r.count,
                        }
                    }
                })
                .collect(),
        }
    }

    /// The total count the last run would have if `event` were recorded `count` more times
    /// (`None` when `event` starts a new run), or an error if it overflows `u64`.
    pub(crate) fn merged_count(&self, event: &DpEvent, count: u64) -> Result<Option<u64>> {
        match self.runs.last() {
            Some(last) if last.event == *event => {
                last.count.checked_add(count).map(Some).ok_or_else(|| {
                    AccountingError::invalid(
                        "count",
                        count as f64,
                        "the run's total composition count overflows u64",
                    )
                })
            }
            _ => Ok(None),
        }
    }

    /// Records `count` successful compositions of `event` (nothing for `count == 0`; a count
    /// that would overflow the last run starts a new one).
    pub(crate) fn record(&mut self, event: &DpEvent, count: u64) {
        if count == 0 {
            return;
        }
        if let Some(last) = self.runs.last_mut()
            && last.event == *event
            && let Some(total) = last.count.checked_add(count)
        {
            last.count = total;
            return;
        }
        self.runs.push(LedgerRun {
            event: event.clone(),
            count,
        });
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
    fn compose(&mut self, event: &DpEvent) -> Result<()> {
        self.compose_repeated(event, 1)
    }

    /// Composes `event` `count` times (the same answers as composing
    /// `SelfComposed { event, count }`; the ledger records one run). Repeating the last composed
    /// event only extends the ledger's last run and is O(1) amortised: the accountants keep the
    /// last event's per-step contribution and compose by count at query time. `count == 0`
    /// validates `event` and composes nothing. On error the accountant is unchanged.
    fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()>;

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
        // Sampling without replacement: refused under add/remove-one by every accountant here.
        v.push(DpEvent::SampledWithoutReplacement {
            source_dataset_size: 100,
            sample_size: 10,
            event: b(DpEvent::Gaussian {
                noise_multiplier: 1.0,
            }),
        });
        // Invalid events: no accountant supports them.
        v.push(DpEvent::SampledWithoutReplacement {
            source_dataset_size: 10,
            sample_size: 11,
            event: b(DpEvent::Gaussian {
                noise_multiplier: 1.0,
            }),
        });
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
            assert_eq!(acc.ledger().events(), composed, "{}", fresh.name());
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
                "SampledWithoutReplacement(Gaussian)",
            ]
        );
        let is_wor = |e: &DpEvent| matches!(e, DpEvent::SampledWithoutReplacement { .. });
        assert!(
            events()
                .iter()
                .all(|e| rdp.supports(e) == (e.validate().is_ok() && !e.any(&is_wor)))
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
        assert_eq!(json["runs"][0]["event"], serde_json::to_value(&e).unwrap());
        assert_eq!(json["runs"][0]["count"], 1);
    }

    fn psg() -> DpEvent {
        DpEvent::PoissonSampled {
            rate: 0.01,
            event: Box::new(DpEvent::Gaussian {
                noise_multiplier: 1.1,
            }),
        }
    }

    /// Repeated steps coalesce into one run; the answers are those of one `SelfComposed` (bit
    /// for bit for RDP: both multiply the per-step curve by the count); the ledger serializes to
    /// runs and reloads, the older one-entry-per-step form too.
    fn check_coalescing<A: PrivacyAccountant + Clone>(fresh: &A) {
        let steps = 2000u64;
        let mut stepped = fresh.clone();
        for _ in 0..steps {
            stepped.compose(&psg()).unwrap();
        }
        let mut once = fresh.clone();
        once.compose(&DpEvent::SelfComposed {
            event: Box::new(psg()),
            count: steps,
        })
        .unwrap();
        let mut repeated = fresh.clone();
        repeated.compose_repeated(&psg(), steps - 1).unwrap();
        repeated.compose_repeated(&psg(), 0).unwrap();
        repeated.compose_repeated(&psg(), 1).unwrap();
        let e = stepped.get_epsilon(1e-5).unwrap();
        assert_eq!(e, once.get_epsilon(1e-5).unwrap(), "{}", fresh.name());
        assert_eq!(e, repeated.get_epsilon(1e-5).unwrap(), "{}", fresh.name());
        assert_eq!(stepped.ledger().runs().len(), 1);
        assert_eq!(stepped.ledger().len(), steps as usize);
        assert_eq!(stepped.ledger(), repeated.ledger());
        let json = serde_json::to_string(stepped.ledger()).unwrap();
        assert!(json.len() < 200, "{json}");
        let back: Ledger = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, stepped.ledger());
        // The older form: one entry per composition.
        let old = serde_json::json!({ "events": stepped.ledger().events() });
        let back: Ledger = serde_json::from_value(old).unwrap();
        assert_eq!(&back, stepped.ledger());
        let both = serde_json::json!({ "events": [], "runs": [] });
        assert!(serde_json::from_value::<Ledger>(both).is_err());
        let empty: Ledger = serde_json::from_str("{}").unwrap();
        assert!(empty.is_empty());
        // A different event starts a new run, then the old event another.
        let g = DpEvent::Gaussian {
            noise_multiplier: 5.0,
        };
        stepped.compose(&g).unwrap();
        stepped.compose(&psg()).unwrap();
        let runs: Vec<u64> = stepped.ledger().runs().iter().map(|r| r.count).collect();
        assert_eq!(runs, [steps, 1, 1]);
        let mut replay = fresh.clone();
        replay.compose(&stepped.ledger().as_event()).unwrap();
        let (a, b) = (
            stepped.get_epsilon(1e-5).unwrap(),
            replay.get_epsilon(1e-5).unwrap(),
        );
        assert!((a - b).abs() <= 1e-12 * a, "{}: {a} vs {b}", fresh.name());
        // A count that would overflow the run is refused and changes nothing.
        let before = stepped.ledger().clone();
        assert!(stepped.compose_repeated(&psg(), u64::MAX).is_err());
        assert_eq!(stepped.ledger(), &before);
    }

    #[test]
    fn repeated_events_coalesce() {
        check_coalescing(&RdpAccountant::new());
        check_coalescing(&PldAccountant::with_discretization(1e-3).unwrap());
        check_coalescing(&PureCappedRdpAccountant::new());
        // Interleaving queries with steps (the PLD cache of the prefix and the last run).
        let mut pld = PldAccountant::with_discretization(1e-3).unwrap();
        let g = DpEvent::Gaussian {
            noise_multiplier: 3.0,
        };
        pld.compose(&g).unwrap();
        let mut answers = Vec::new();
        for _ in 0..3 {
            pld.compose_repeated(&psg(), 100).unwrap();
            answers.push(pld.get_epsilon(1e-5).unwrap());
        }
        let snapshot = pld.clone();
        pld.compose(&g).unwrap();
        let after = pld.get_epsilon(1e-5).unwrap();
        for (k, got) in answers.iter().enumerate() {
            let mut fresh = PldAccountant::with_discretization(1e-3).unwrap();
            fresh.compose(&g).unwrap();
            fresh
                .compose(&DpEvent::SelfComposed {
                    event: Box::new(psg()),
                    count: 100 * (k as u64 + 1),
                })
                .unwrap();
            assert_eq!(*got, fresh.get_epsilon(1e-5).unwrap(), "after {k}");
        }
        // The clone kept its own state; the original moved on.
        assert_eq!(snapshot.get_epsilon(1e-5).unwrap(), answers[2]);
        assert!(after > answers[2]);
    }
}
