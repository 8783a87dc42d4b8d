//! Privacy events as data (DESIGN.md convention 3; the idea of dp_accounting's `DpEvent`).
//!
//! A [`DpEvent`] describes one use of a mechanism (or a combination of uses). Accountants
//! ([`crate::RdpAccountant`], [`crate::PldAccountant`]) compose events and answer ε for δ and δ
//! for ε; events they cannot handle are rejected with [`AccountingError::UnsupportedEvent`].
//!
//! All sensitivities are 1 unless the event says otherwise (noise multiplier = std / sensitivity;
//! Laplace scale = scale / sensitivity), under the add/remove-one neighbouring relation.

use serde::{Deserialize, Serialize};

use crate::error::{AccountingError, Result, check_nonnegative, check_positive, check_rate};

/// One privacy event (serde: externally tagged by `type`, snake_case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DpEvent {
    /// Gaussian mechanism with sensitivity 1 and standard deviation `noise_multiplier`.
    Gaussian {
        /// σ/Δ₂ (> 0).
        noise_multiplier: f64,
    },
    /// Laplace mechanism with ℓ1 sensitivity 1 and scale `scale` (density ∝ e^{−|x|/scale}).
    Laplace {
        /// b/Δ₁ (> 0).
        scale: f64,
    },
    /// Any pure ε-DP randomizer (e.g. one of privfed's local randomizers). Accounted with the
    /// form that is tight for binary randomized response (docs/ALGORITHMS.md §5.1).
    PureDp {
        /// The randomizer's ε (> 0).
        epsilon: f64,
    },
    /// Skellam noise `Sk(mu)` added to each coordinate of an integer query (001 §3; docs/ALGORITHMS.md
    /// §2.2), everything in the integer (scaled) domain.
    Skellam {
        /// The Skellam variance μ (> 0).
        mu: f64,
        /// ℓ1 sensitivity Δ₁ of the integer query (> 0).
        l1_sensitivity: f64,
        /// ℓ2 sensitivity Δ₂ of the integer query (> 0).
        l2_sensitivity: f64,
    },
    /// The distributed discrete Gaussian: `n` clients each add `N_ℤ(0, σ²/n)` to an integer query
    /// (Kairouz, Liu and Steinke 2021; paper 001's DDG baseline), integer domain.
    DistributedDiscreteGaussian {
        /// Central standard deviation σ of the summed noise (> 0).
        sigma: f64,
        /// ℓ1 sensitivity Δ₁ of one client's integer vector (> 0).
        l1_sensitivity: f64,
        /// ℓ2 sensitivity Δ₂ of one client's integer vector (> 0).
        l2_sensitivity: f64,
        /// The sum-of-discrete-Gaussians correction τ (≥ 0; [`crate::ddg::ddg_tau`]).
        tau: f64,
        /// Coordinates d (≥ 1).
        dim: u64,
    },
    /// The inner event run on a Poisson sample of the data set with rate `rate`.
    PoissonSampled {
        /// Sampling rate q ∈ (0, 1].
        rate: f64,
        /// The mechanism applied to the sample.
        event: Box<DpEvent>,
    },
    /// The inner event run on a sample of exactly `sample_size` records drawn uniformly without
    /// replacement from a data set of `source_dataset_size` (dp_accounting's
    /// `SampledWithoutReplacementDpEvent`), e.g. a fixed-size cohort of clients. The data set
    /// size is public, so this event is stated under the **replace-one** relation: the inner
    /// event's sensitivities are replace-one sensitivities (for a sum of updates clipped to norm
    /// `C`, `2C`: a Gaussian of standard deviation `z·C` on that sum is `Gaussian {
    /// noise_multiplier: z/2 }` here). Only an accountant built for replace-one neighbours
    /// composes it ([`crate::RdpAccountant::with_relation`]).
    ///
    /// RDP (Gaussian inner event only, as dp_accounting 0.6.0): Wang, Balle and Kasiviswanathan
    /// 2019 (AISTATS), Theorem 27, with `γ = m/n`, `ε(α) = α/(2z²)` and, for integer `α ≥ 2`,
    /// `ε'(α) = ln(1 + γ²C(α,2)·min(4(e^{ε(2)} − 1), 2e^{ε(2)}) + Σ_{j=3}^{α} γ^j C(α,j)·
    /// min(4·√(Δ^{2⌊j/2⌋}·Δ^{2⌈j/2⌉}), 2e^{(j−1)ε(j)}))/(α − 1)`, where `Δ^k` is the k-th
    /// forward difference at 0 of `k ↦ e^{(k−1)ε(k)}` (above `α = 256` only the second argument
    /// of each `min`); fractional orders interpolate `(α−1)ε'(α)` linearly between `⌊α⌋` and
    /// `⌈α⌉` (it is convex, WBK19 Cor. 10); capped by the un-sampled `α/(2z²)` (docs/ALGORITHMS.md
    /// §5.1). The PLD accountant refuses it (as dp_accounting 0.6.0's).
    SampledWithoutReplacement {
        /// Records in the data set, n ≥ 1 (public).
        source_dataset_size: u64,
        /// Records in each sample, 1 ≤ m ≤ n.
        sample_size: u64,
        /// The mechanism applied to the sample (replace-one sensitivities).
        event: Box<DpEvent>,
    },
    /// *Local* sampling: each person takes part with probability `rate` and then releases the
    /// inner event's output, or else releases a visible "did not take part" (e.g. a device that
    /// sends nothing). Unlike [`DpEvent::PoissonSampled`] the sample is not secret, so there is no
    /// amplification of a pure ε (the ratio on a released output is unchanged); the pair is
    /// `(qP + (1−q)⊥, qQ + (1−q)⊥)` for the inner pair `(P, Q)`, under the inner event's
    /// neighbouring relation, and only the Rényi divergence and δ(ε) shrink:
    /// `D_α = ln(1 − q + q·e^{(α−1)D_α(P‖Q)})/(α−1)` and `δ(ε) = q·δ_inner(ε)` for `ε ≥ 0`.
    LocalSampled {
        /// Participation probability q ∈ (0, 1].
        rate: f64,
        /// The mechanism a participant runs.
        event: Box<DpEvent>,
    },
    /// Sequential composition of the events.
    Composed {
        /// The events, in any order (composition is commutative).
        events: Vec<DpEvent>,
    },
    /// `count` sequential repetitions of `event`.
    SelfComposed {
        /// The repeated event.
        event: Box<DpEvent>,
        /// Number of repetitions (0 means no event).
        count: u64,
    },
    /// A user-supplied RDP curve: the mechanism is `(orders[i], epsilons[i])`-RDP for each `i`.
    /// Orders must be > 1, strictly increasing; ε values finite and ≥ 0.
    RdpCurve {
        /// Rényi orders α > 1, strictly increasing.
        orders: Vec<f64>,
        /// ε(α) at each order.
        epsilons: Vec<f64>,
    },
}

impl DpEvent {
    /// The privacy event of one release of a local randomizer, the one place a randomizer is
    /// mapped to its event: `Gaussian(σ/Δ₂)` for the Gaussian mechanism, `Laplace(b/Δ₁)` for
    /// Laplace (accounted through its RDP curve, tighter than its pure ε under composition), and
    /// `PureDp(ε)` for every ε-LDP randomizer (its [`Guarantee`](privfed_mechanisms::Guarantee)'s
    /// ε).
    pub fn of_randomizer(r: &privfed_mechanisms::AnyRandomizer) -> Self {
        use privfed_mechanisms::{AnyRandomizer, LocalRandomizer};
        match r {
            AnyRandomizer::Gaussian(g) => DpEvent::Gaussian {
                noise_multiplier: g.sigma() / g.sensitivity(),
            },
            AnyRandomizer::Laplace(l) => DpEvent::Laplace {
                scale: l.scale() / l.sensitivity(),
            },
            m => DpEvent::PureDp {
                epsilon: m.guarantee().epsilon(),
            },
        }
    }

    /// `count` repetitions of a Poisson-sampled Gaussian: the DP-SGD / DP-FedAvg event.
    pub fn poisson_gaussian(rate: f64, noise_multiplier: f64, count: u64) -> Self {
        let inner = DpEvent::Gaussian { noise_multiplier };
        let one = if rate == 1.0 {
            inner
        } else {
            DpEvent::PoissonSampled {
                rate,
                event: Box::new(inner),
            }
        };
        DpEvent::SelfComposed {
            event: Box::new(one),
            count,
        }
    }

    /// `steps` uses of `event`, each on a sample of rate `rate` (1 = no sampling): the inner event
    /// `PoissonSampled` for a central mechanism (Gaussian, Laplace, Skellam, …: the mechanism runs
    /// on a secret Poisson sample of the data set) and `LocalSampled` for a local randomizer
    /// (`PureDp`: each client takes part with probability `rate` and otherwise visibly sends
    /// nothing, so its pure ε is not amplified), wrapped in `SelfComposed { count: steps }`.
    pub fn sampled_steps(event: DpEvent, rate: f64, steps: u64) -> DpEvent {
        let one = if rate >= 1.0 {
            event
        } else if matches!(event, DpEvent::PureDp { .. }) {
            DpEvent::LocalSampled {
                rate,
                event: Box::new(event),
            }
        } else {
            DpEvent::PoissonSampled {
                rate,
                event: Box::new(event),
            }
        };
        DpEvent::SelfComposed {
            event: Box::new(one),
            count: steps,
        }
    }

    /// The pure ε this event is *declared* to satisfy, when it is built from
    /// [`DpEvent::PureDp`] events only (docs/ALGORITHMS.md §5.1: pure ε-DP composes to `Σ ε`
    /// at δ = 0): `PureDp` → ε; `LocalSampled` → the inner ε (visible participation: no
    /// amplification); `PoissonSampled` → the inner ε (amplification not credited: a valid,
    /// possibly loose bound); `Composed` → the sum; `SelfComposed` → `count·ε`. `None` as soon
    /// as any other event appears: Gaussian, Skellam and RDP curves have no pure ε, and a
    /// Laplace event is accounted through its RDP curve only (its `1/scale` is not declared).
    pub fn declared_pure_epsilon(&self) -> Option<f64> {
        match self {
            DpEvent::PureDp { epsilon } => Some(*epsilon),
            DpEvent::LocalSampled { event, .. }
            | DpEvent::PoissonSampled { event, .. }
            | DpEvent::SampledWithoutReplacement { event, .. } => event.declared_pure_epsilon(),
            DpEvent::Composed { events } => events
                .iter()
                .map(DpEvent::declared_pure_epsilon)
                .try_fold(0.0, |acc, e| e.map(|e| acc + e)),
            DpEvent::SelfComposed { event, count } => event
                .declared_pure_epsilon()
                .map(|e| if *count == 0 { 0.0 } else { e * *count as f64 }),
            DpEvent::Gaussian { .. }
            | DpEvent::Laplace { .. }
            | DpEvent::Skellam { .. }
            | DpEvent::DistributedDiscreteGaussian { .. }
            | DpEvent::RdpCurve { .. } => None,
        }
    }

    /// The noise multiplier of the one Gaussian equivalent to this event when it is a Gaussian or
    /// a composition of Gaussians (`Composed`: `(Σ z_i^{−2})^{−1/2}`; `SelfComposed`: `z/√count`;
    /// Dong, Roth, Su 2022 / dp_accounting's `_effective_gaussian_noise_multiplier`); `None` for
    /// anything else, an empty composition or a count of 0.
    pub fn effective_gaussian_noise_multiplier(&self) -> Option<f64> {
        match self {
            DpEvent::Gaussian { noise_multiplier } => Some(*noise_multiplier),
            DpEvent::Composed { events } if !events.is_empty() => {
                let mut inv_sq = 0.0;
                for e in events {
                    let z = e.effective_gaussian_noise_multiplier()?;
                    inv_sq += 1.0 / (z * z);
                }
                Some(1.0 / inv_sq.sqrt())
            }
            DpEvent::SelfComposed { event, count } if *count > 0 => event
                .effective_gaussian_noise_multiplier()
                .map(|z| z / (*count as f64).sqrt()),
            _ => None,
        }
    }

    /// True if `pred` holds for this event or any event nested in it.
    pub fn any(&self, pred: &impl Fn(&DpEvent) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        match self {
            DpEvent::PoissonSampled { event, .. }
            | DpEvent::LocalSampled { event, .. }
            | DpEvent::SampledWithoutReplacement { event, .. }
            | DpEvent::SelfComposed { event, .. } => event.any(pred),
            DpEvent::Composed { events } => events.iter().any(|e| e.any(pred)),
            _ => false,
        }
    }

    /// One valid example of every variant, in declaration order: the schema's fixture. The Python
    /// bindings return their JSON so that `privfed.accounting` is tested to read and write the
    /// same form (`event_from_dict(d).to_dict() == d`) for every variant; a test here checks that
    /// the list covers [`DpEvent::variant_index`], whose exhaustive match does not compile until a
    /// new variant has a position (and so, through that test, an example).
    pub fn examples() -> Vec<DpEvent> {
        let gaussian = DpEvent::Gaussian {
            noise_multiplier: 1.1,
        };
        let pure = DpEvent::PureDp { epsilon: 0.5 };
        vec![
            gaussian.clone(),
            DpEvent::Laplace { scale: 2.5 },
            pure.clone(),
            DpEvent::Skellam {
                mu: 40.5,
                l1_sensitivity: 3.0,
                l2_sensitivity: 1.75,
            },
            DpEvent::DistributedDiscreteGaussian {
                sigma: 12.5,
                l1_sensitivity: 3.0,
                l2_sensitivity: 1.75,
                tau: 0.25,
                dim: 7,
            },
            DpEvent::PoissonSampled {
                rate: 0.125,
                event: Box::new(gaussian.clone()),
            },
            DpEvent::SampledWithoutReplacement {
                source_dataset_size: 1000,
                sample_size: 30,
                event: Box::new(gaussian.clone()),
            },
            DpEvent::LocalSampled {
                rate: 0.25,
                event: Box::new(pure.clone()),
            },
            DpEvent::Composed {
                events: vec![gaussian.clone(), pure],
            },
            DpEvent::SelfComposed {
                event: Box::new(gaussian),
                count: 3,
            },
            DpEvent::RdpCurve {
                orders: vec![1.5, 2.0, 8.0],
                epsilons: vec![0.125, 0.25, 1.0],
            },
        ]
    }

    /// Number of variants of [`DpEvent`] (the range of [`DpEvent::variant_index`]).
    pub const VARIANTS: usize = 11;

    /// The variant's position in declaration order, `0..VARIANTS`. The match is exhaustive on
    /// purpose: a new variant breaks compilation here until it is given a position, and the
    /// test `examples_cover_every_variant` then fails until [`DpEvent::examples`] has one.
    pub fn variant_index(&self) -> usize {
        match self {
            DpEvent::Gaussian { .. } => 0,
            DpEvent::Laplace { .. } => 1,
            DpEvent::PureDp { .. } => 2,
            DpEvent::Skellam { .. } => 3,
            DpEvent::DistributedDiscreteGaussian { .. } => 4,
            DpEvent::PoissonSampled { .. } => 5,
            DpEvent::SampledWithoutReplacement { .. } => 6,
            DpEvent::LocalSampled { .. } => 7,
            DpEvent::Composed { .. } => 8,
            DpEvent::SelfComposed { .. } => 9,
            DpEvent::RdpCurve { .. } => 10,
        }
    }

    /// A short human-readable name, used in error messages (e.g. `PoissonSampled(Laplace)`).
    pub fn name(&self) -> String {
        match self {
            DpEvent::Gaussian { .. } => "Gaussian".into(),
            DpEvent::Laplace { .. } => "Laplace".into(),
            DpEvent::PureDp { .. } => "PureDp".into(),
            DpEvent::Skellam { .. } => "Skellam".into(),
            DpEvent::DistributedDiscreteGaussian { .. } => "DistributedDiscreteGaussian".into(),
            DpEvent::PoissonSampled { event, .. } => format!("PoissonSampled({})", event.name()),
            DpEvent::LocalSampled { event, .. } => format!("LocalSampled({})", event.name()),
            DpEvent::SampledWithoutReplacement { event, .. } => {
                format!("SampledWithoutReplacement({})", event.name())
            }
            DpEvent::Composed { events: v } => format!(
                "Composed[{}]",
                v.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
            ),
            DpEvent::SelfComposed { event, count } => {
                format!("SelfComposed({} x {count})", event.name())
            }
            DpEvent::RdpCurve { .. } => "RdpCurve".into(),
        }
    }

    /// Checks every parameter (recursively); accountants call this before composing.
    pub fn validate(&self) -> Result<()> {
        match self {
            DpEvent::Gaussian { noise_multiplier } => {
                check_positive("noise_multiplier", *noise_multiplier)?;
            }
            DpEvent::Laplace { scale } => {
                check_positive("scale", *scale)?;
            }
            DpEvent::PureDp { epsilon } => {
                check_positive("epsilon", *epsilon)?;
            }
            DpEvent::Skellam {
                mu,
                l1_sensitivity,
                l2_sensitivity,
            } => {
                check_positive("mu", *mu)?;
                check_positive("l1_sensitivity", *l1_sensitivity)?;
                check_positive("l2_sensitivity", *l2_sensitivity)?;
            }
            DpEvent::DistributedDiscreteGaussian {
                sigma,
                l1_sensitivity,
                l2_sensitivity,
                tau,
                dim,
            } => {
                check_positive("sigma", *sigma)?;
                check_positive("l1_sensitivity", *l1_sensitivity)?;
                check_positive("l2_sensitivity", *l2_sensitivity)?;
                if !(tau.is_finite() && *tau >= 0.0) {
                    return Err(AccountingError::invalid(
                        "tau",
                        *tau,
                        "must be finite and ≥ 0",
                    ));
                }
                if *dim == 0 {
                    return Err(AccountingError::invalid("dim", 0.0, "must be at least 1"));
                }
            }
            DpEvent::PoissonSampled { rate, event } | DpEvent::LocalSampled { rate, event } => {
                check_rate(*rate)?;
                event.validate()?;
            }
            DpEvent::SampledWithoutReplacement {
                source_dataset_size,
                sample_size,
                event,
            } => {
                if *source_dataset_size == 0 {
                    return Err(AccountingError::invalid(
                        "source_dataset_size",
                        0.0,
                        "must be at least 1",
                    ));
                }
                if *sample_size == 0 || sample_size > source_dataset_size {
                    return Err(AccountingError::invalid(
                        "sample_size",
                        *sample_size as f64,
                        format!("must lie in 1..={source_dataset_size} (the source_dataset_size)"),
                    ));
                }
                event.validate()?;
            }
            DpEvent::Composed { events } => {
                for e in events {
                    e.validate()?;
                }
            }
            DpEvent::SelfComposed { event, .. } => event.validate()?,
            DpEvent::RdpCurve { orders, epsilons } => {
                if orders.is_empty() || orders.len() != epsilons.len() {
                    return Err(AccountingError::InvalidCurve(format!(
                        "{} orders and {} epsilons (need equal, non-zero lengths)",
                        orders.len(),
                        epsilons.len()
                    )));
                }
                for w in orders.windows(2) {
                    if w[1] <= w[0] || w[1].is_nan() {
                        return Err(AccountingError::InvalidCurve(format!(
                            "orders must be strictly increasing ({} then {})",
                            w[0], w[1]
                        )));
                    }
                }
                if orders[0].is_nan() || orders[0] <= 1.0 || !orders[orders.len() - 1].is_finite() {
                    return Err(AccountingError::InvalidCurve(
                        "orders must be finite and > 1".into(),
                    ));
                }
                for &e in epsilons {
                    check_nonnegative("rdp_epsilon", e)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_cover_every_variant() {
        let ex = DpEvent::examples();
        let mut seen = vec![false; DpEvent::VARIANTS];
        for e in &ex {
            e.validate().unwrap();
            let k = e.variant_index();
            assert!(!seen[k], "two examples of {}", e.name());
            seen[k] = true;
            let json = serde_json::to_string(e).unwrap();
            assert_eq!(serde_json::from_str::<DpEvent>(&json).unwrap(), *e);
        }
        assert!(
            seen.iter().all(|&s| s),
            "variants without an example: {seen:?}"
        );
    }

    #[test]
    fn a_randomizer_maps_to_its_release_event() {
        use privfed_mechanisms::{
            AnyRandomizer, Domain, gaussian::Gaussian, grid_rr::GridRr, laplace::Laplace,
        };
        // σ = 3 on the ℓ2 ball of radius 0.5 (Δ₂ = 1): noise multiplier 3.
        let ball = Domain::L2Ball {
            dim: 4,
            radius: 0.5,
        };
        let g = Gaussian::with_sigma(3.0, 1e-5, ball).unwrap();
        let z = g.sigma() / g.sensitivity();
        assert!((z - 3.0).abs() < 1e-12, "{z}");
        assert_eq!(
            DpEvent::of_randomizer(&AnyRandomizer::Gaussian(g)),
            DpEvent::Gaussian {
                noise_multiplier: z
            }
        );
        let l = Laplace::new(
            2.0,
            Domain::L1Ball {
                dim: 4,
                radius: 0.5,
            },
        )
        .unwrap();
        let DpEvent::Laplace { scale } = DpEvent::of_randomizer(&AnyRandomizer::Laplace(l)) else {
            panic!("Laplace maps to a Laplace event");
        };
        // b/Δ₁ = 1/ε for the Laplace mechanism calibrated to ε.
        assert!((scale - 0.5).abs() < 1e-12, "{scale}");
        let rr = GridRr::scalar_dp(1.5, 1.0).unwrap();
        assert_eq!(
            DpEvent::of_randomizer(&AnyRandomizer::GridRr(rr)),
            DpEvent::PureDp { epsilon: 1.5 }
        );
    }

    #[test]
    fn sampled_steps_pick_local_sampling_for_pure_dp_only() {
        let g = DpEvent::Gaussian {
            noise_multiplier: 1.0,
        };
        let p = DpEvent::PureDp { epsilon: 1.0 };
        assert_eq!(
            DpEvent::sampled_steps(g.clone(), 0.5, 3),
            DpEvent::SelfComposed {
                event: Box::new(DpEvent::PoissonSampled {
                    rate: 0.5,
                    event: Box::new(g.clone()),
                }),
                count: 3,
            }
        );
        assert_eq!(
            DpEvent::sampled_steps(p.clone(), 0.5, 3),
            DpEvent::SelfComposed {
                event: Box::new(DpEvent::LocalSampled {
                    rate: 0.5,
                    event: Box::new(p.clone()),
                }),
                count: 3,
            }
        );
        assert_eq!(
            DpEvent::sampled_steps(p.clone(), 1.0, 2),
            DpEvent::SelfComposed {
                event: Box::new(p.clone()),
                count: 2,
            }
        );
        assert_eq!(
            DpEvent::sampled_steps(p, 0.5, 4).declared_pure_epsilon(),
            Some(4.0)
        );
        assert_eq!(
            DpEvent::sampled_steps(g, 1.0, 4).declared_pure_epsilon(),
            None
        );
    }

    #[test]
    fn serde_round_trip() {
        let e = DpEvent::Composed {
            events: vec![
                DpEvent::poisson_gaussian(0.01, 1.1, 100),
                DpEvent::Skellam {
                    mu: 10.0,
                    l1_sensitivity: 1.0,
                    l2_sensitivity: 1.0,
                },
                DpEvent::RdpCurve {
                    orders: vec![2.0, 4.0],
                    epsilons: vec![0.1, 0.3],
                },
                DpEvent::LocalSampled {
                    rate: 0.25,
                    event: Box::new(DpEvent::PureDp { epsilon: 2.0 }),
                },
            ],
        };
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains("\"type\":\"poisson_sampled\""), "{s}");
        assert!(s.contains("\"type\":\"local_sampled\""), "{s}");
        let back: DpEvent = serde_json::from_str(&s).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn validation_rejects_bad_parameters() {
        let bad = [
            DpEvent::Gaussian {
                noise_multiplier: f64::NAN,
            },
            DpEvent::Gaussian {
                noise_multiplier: 0.0,
            },
            DpEvent::Laplace { scale: -1.0 },
            DpEvent::PureDp {
                epsilon: f64::INFINITY,
            },
            DpEvent::poisson_gaussian(1.5, 1.0, 3),
            DpEvent::poisson_gaussian(0.0, 1.0, 3),
            DpEvent::LocalSampled {
                rate: 0.0,
                event: Box::new(DpEvent::PureDp { epsilon: 1.0 }),
            },
            DpEvent::LocalSampled {
                rate: 0.5,
                event: Box::new(DpEvent::PureDp { epsilon: -1.0 }),
            },
            DpEvent::RdpCurve {
                orders: vec![2.0, 1.5],
                epsilons: vec![0.1, 0.2],
            },
            DpEvent::RdpCurve {
                orders: vec![1.0],
                epsilons: vec![0.1],
            },
            DpEvent::RdpCurve {
                orders: vec![2.0],
                epsilons: vec![],
            },
        ];
        for e in bad {
            assert!(e.validate().is_err(), "{e:?} accepted");
        }
    }
}
