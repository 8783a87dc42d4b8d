//! Privacy loss distributions (docs/ALGORITHMS.md §5.3).
//!
//! Layout: `pmf.rs` (the [`DiscretePld`] type and its operations), `discretize.rs` (one
//! dominating discrete PLD per mechanism), `fft.rs` (composition by FFT), `accountant.rs` (the
//! [`PldAccountant`] and the exact Gaussian queries).
//!
//! A [`DiscretePld`] is the law of the privacy loss `L = ln(P(o)/Q(o))`, `o ~ P`, on the grid
//! `{i·h}` plus a mass at `+∞`. `δ(ε) = P(L = ∞) + Σ_i p_i·(1 − e^{ε − i·h})₊`.
//!
//! **Discretization (pessimistic, "connect the dots").** A loss value `y` in the grid cell
//! `[i·h, (i+1)·h]` with P-mass `p` (and hence Q-mass `p·e^{−y}`) is split between the two grid
//! points, `a = p·expm1((i+1)h − y)/expm1(h)` at `i·h` and `p − a` at `(i+1)·h`. This preserves
//! both the P-mass and the Q-mass, so the discrete pair is a pair of probability measures from
//! which the original is obtained by post-processing (merging the two points back into `y`):
//! the discrete pair *dominates* the original, every δ(ε) is an upper bound, and composition of
//! dominating pairs dominates the composition (Doroshenko et al. 2022; Zhu, Dong, Wang 2022).
//! Unlike rounding every loss up (error up to `T·h` after `T` compositions), the error is
//! second order in `h`. For a continuous loss, the split of a whole cell uses the exact cell
//! masses: `a = (e^{(i+1)h}·Q(cell) − P(cell))/expm1(h)`.
//!
//! **Tails.** Mass below the lowest grid point is rounded **up** to it and mass above the
//! highest goes to `+∞` (both only increase δ). Composition is cyclic convolution by real FFT on
//! a window `[x_lo, x_hi]` chosen by Chernoff bounds on the composed loss, each tail at most
//! [`DEFAULT_TAIL_MASS`]: the upper-tail bound is added to the `+∞` mass, and everything outside
//! the window that the cyclic convolution wraps into it is *extra* mass (δ only grows). Negative
//! round-off of the FFT is clamped to 0.
//!
//! **Bounded memory.** If a window would need more than [`MAX_PMF_LEN`] points, the grid is
//! coarsened by factors of 2 (each odd point split exactly as above, again dominating), so
//! large-ε compositions stay within memory at a coarser, still pessimistic, grid.

mod accountant;
mod discretize;
mod fft;
mod pmf;

pub use accountant::{PldAccountant, gaussian_delta, gaussian_epsilon};
pub use pmf::DiscretePld;

/// Default grid width `h` of the loss (dp_accounting's default is also 1e-4).
pub const DEFAULT_VALUE_DISCRETIZATION: f64 = 1e-4;
/// Probability mass allowed outside each end of a composition window (Chernoff bound).
pub const DEFAULT_TAIL_MASS: f64 = 1e-15;
/// Mass trimmed from each end of a single mechanism's PLD (lower end rounded up, upper end sent
/// to `+∞`).
pub const TRIM_MASS: f64 = 1e-30;
/// Largest pmf (and FFT) length; beyond it the grid is coarsened.
pub const MAX_PMF_LEN: usize = 1 << 21;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AccountingError;
    use crate::event::DpEvent;
    use crate::skellam::skellam_ln_pmf;

    fn total(p: &DiscretePld) -> f64 {
        p.pmf.iter().sum::<f64>() + p.inf_mass
    }

    /// Q-mass `Σ p e^{−L}` of the finite part.
    fn q_mass(p: &DiscretePld) -> f64 {
        p.points().map(|(l, m)| m * (-l).exp()).sum()
    }

    #[test]
    fn grid_log_mgf_is_a_tight_upper_bound() {
        // The Horner evaluation on the grid against log-sum-exp over the points, on smooth
        // PLDs (tens of thousands of points), a long self-composition, and randomized response
        // (two atoms 2ε apart: chunks of zeros that underflow and take the exact path).
        let h = 1e-4;
        let psg = DiscretePld::poisson_gaussian(0.01, 1.1, true, h).unwrap();
        let plds = [
            DiscretePld::gaussian(0.02, h).unwrap(),
            psg.clone(),
            DiscretePld::poisson_gaussian(0.01, 1.1, false, h).unwrap(),
            psg.self_composed(1000, 1e-15),
            DiscretePld::laplace(20.0, h).unwrap(),
            DiscretePld::pure_dp(2.0, h).unwrap(),
            DiscretePld::pure_dp(0.3, 1e-3).unwrap(),
        ];
        for p in &plds {
            for t in [
                1e-3, 0.1, 0.7, 1.0, 3.0, 10.0, 50.0, 300.0, 1e3, 1e4, 1e5, 3e6, 1e8,
            ] {
                for t in [t, -t] {
                    let (grid, direct) = (p.log_mgf(t), p.log_mgf_direct(t));
                    let scale = direct.abs().max(1.0);
                    assert!(
                        grid >= direct - 1e-13 * scale && grid <= direct + 1e-9 * scale,
                        "len {} t {t}: grid {grid} direct {direct}",
                        p.pmf.len()
                    );
                }
            }
            assert_eq!(p.log_mgf(0.0), p.log_mgf(0.0)); // not NaN
        }
        // The identity (all mass at 0): K ≡ 0, up to the rounding margins.
        for t in [-5.0, 1.0] {
            let id = DiscretePld::identity(h);
            assert!((0.0..1e-14).contains(&id.log_mgf(t)), "{}", id.log_mgf(t));
        }
    }

    #[test]
    fn discretization_preserves_both_masses() {
        let h = 1e-3;
        for p in [
            DiscretePld::gaussian(0.5, h).unwrap(),
            DiscretePld::laplace(1.3, h).unwrap(),
            DiscretePld::pure_dp(1.234_567, h).unwrap(),
            DiscretePld::poisson_gaussian(0.1, 1.0, true, h).unwrap(),
            DiscretePld::poisson_gaussian(0.1, 1.0, false, h).unwrap(),
            DiscretePld::poisson_laplace(0.1, 1.5, true, h).unwrap(),
            DiscretePld::poisson_laplace(0.1, 1.5, false, h).unwrap(),
            DiscretePld::skellam(5.0, 2, h).unwrap(),
        ] {
            assert!((total(&p) - 1.0).abs() < 1e-10, "P mass {}", total(&p));
            // Q-mass ≤ 1 (trimming only removes Q mass) and close to 1.
            let qm = q_mass(&p);
            assert!(qm <= 1.0 + 1e-10 && qm > 1.0 - 1e-8, "Q mass {qm}");
        }
    }

    #[test]
    fn gaussian_pld_matches_closed_form_and_is_pessimistic() {
        // Single Gaussian and 100-fold composition: discrete δ ≥ exact δ, and close.
        for (mu, n) in [(0.5, 1u64), (0.005, 100), (2.0, 1)] {
            let p = DiscretePld::gaussian(mu, 1e-4)
                .unwrap()
                .self_composed(n, DEFAULT_TAIL_MASS);
            for eps in [0.0, 0.5, 1.0, 2.0, 4.0] {
                let exact = gaussian_delta(mu * n as f64, eps);
                let disc = p.get_delta(eps);
                assert!(
                    disc >= exact * (1.0 - 1e-9) - 1e-15,
                    "μ={mu} n={n} ε={eps}: {disc} < {exact}"
                );
                assert!(
                    disc <= exact * 1.01 + 1e-14,
                    "μ={mu} n={n} ε={eps}: {disc} ≫ {exact}"
                );
            }
        }
    }

    #[test]
    fn epsilon_and_delta_are_inverse() {
        let p = DiscretePld::poisson_gaussian(0.05, 1.0, true, 1e-4)
            .unwrap()
            .self_composed(500, DEFAULT_TAIL_MASS);
        for delta in [1e-3, 1e-5, 1e-8] {
            let e = p.get_epsilon(delta);
            let d = p.get_delta(e);
            assert!((d / delta - 1.0).abs() < 1e-6, "δ={delta}: ε={e}, δ(ε)={d}");
        }
    }

    #[test]
    fn pure_dp_single_use_is_exact() {
        // One ε-DP randomized response: δ(ε') = (e^ε − e^{ε'})/(1+e^ε) for ε' < ε, ε at δ→0 is ε.
        let eps = 1.0;
        let p = DiscretePld::pure_dp(eps, 1e-4).unwrap();
        let want = (eps.exp() - 0.5f64.exp()) / (1.0 + eps.exp());
        assert!(
            (p.get_delta(0.5) / want - 1.0).abs() < 1e-3,
            "{} {want}",
            p.get_delta(0.5)
        );
        let e = p.get_epsilon(1e-12);
        assert!(e >= eps - 1e-9 && e < eps + 2e-4, "{e}");
    }

    /// `T` uses of a locally sampled ε-DP randomizer: the exact δ(ε') by enumeration (k of the
    /// `T` take part, j of those draw the "+ε" letter of randomized response; loss `(2j − k)ε`)
    /// against the accountant; the discretization may only add (pessimistic) and by little.
    #[test]
    fn local_sampling_of_pure_dp_matches_enumeration() {
        let ln_choose =
            |n: u64, k: u64| -> f64 { (1..=k).map(|i| ((n - k + i) as f64 / i as f64).ln()).sum() };
        for (eps, q, t) in [(1.0f64, 0.1f64, 1u64), (2.0, 0.25, 10), (0.5, 0.5, 40)] {
            let p = eps.exp() / (1.0 + eps.exp());
            let mut acc = PldAccountant::new();
            acc.compose(&DpEvent::SelfComposed {
                event: Box::new(DpEvent::LocalSampled {
                    rate: q,
                    event: Box::new(DpEvent::PureDp { epsilon: eps }),
                }),
                count: t,
            })
            .unwrap();
            for target in [0.0, 0.3 * eps, 0.9 * eps, 2.0 * eps] {
                let mut exact = 0.0;
                for k in 0..=t {
                    let wk =
                        (ln_choose(t, k) + k as f64 * q.ln() + (t - k) as f64 * (1.0 - q).ln())
                            .exp();
                    for j in 0..=k {
                        let wj =
                            (ln_choose(k, j) + j as f64 * p.ln() + (k - j) as f64 * (1.0 - p).ln())
                                .exp();
                        let l = (2.0 * j as f64 - k as f64) * eps;
                        exact += wk * wj * (1.0 - (target - l).exp()).max(0.0);
                    }
                }
                let got = acc.get_delta(target).unwrap();
                assert!(
                    got >= exact - 1e-12 && got <= exact * 1.002 + 1e-9,
                    "ε={eps} q={q} T={t} ε'={target}: {got} vs exact {exact}"
                );
            }
        }
        // One use: no amplification of the pure ε (the sample is visible), unlike
        // PoissonSampled's ln(1 + q(e^ε − 1)).
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::LocalSampled {
            rate: 0.1,
            event: Box::new(DpEvent::PureDp { epsilon: 2.0 }),
        })
        .unwrap();
        let e = acc.get_epsilon(1e-12).unwrap();
        assert!(e > 2.0 - 1e-3 && e < 2.0 + 2e-4, "{e}");
        // The mixture keeps both masses and puts 1 − q at loss 0.
        let m = DiscretePld::laplace(1.0, 1e-3)
            .unwrap()
            .locally_sampled(0.3);
        assert!((total(&m) - 1.0).abs() < 1e-12);
        assert!(q_mass(&m) <= 1.0 + 1e-9);
        let far = DiscretePld::pure_dp(3.0, 1e-3).unwrap();
        assert!(far.offset < 0, "RR has a negative atom");
        let shifted = DiscretePld {
            offset: 5,
            ..DiscretePld::identity(1e-3)
        };
        let s = shifted.locally_sampled(0.5);
        assert_eq!(s.offset, 0);
        assert_eq!(s.pmf[0], 0.5);
        assert_eq!(s.pmf[5], 0.5);
    }

    #[test]
    fn coarsening_is_pessimistic() {
        let p = DiscretePld::laplace(1.0, 1e-3)
            .unwrap()
            .self_composed(10, DEFAULT_TAIL_MASS);
        let c = p.coarsened().coarsened();
        for eps in [0.5, 1.0, 3.0] {
            assert!(c.get_delta(eps) >= p.get_delta(eps) * (1.0 - 1e-12));
        }
    }

    #[test]
    fn accountant_rejects_unsupported_events() {
        let mut acc = PldAccountant::new();
        let e = DpEvent::PoissonSampled {
            rate: 0.1,
            event: Box::new(DpEvent::PureDp { epsilon: 1.0 }),
        };
        match acc.compose(&e) {
            Err(AccountingError::UnsupportedEvent {
                accountant, event, ..
            }) => {
                assert_eq!(accountant, "pld");
                assert_eq!(event, "PoissonSampled(PureDp)");
            }
            other => panic!("{other:?}"),
        }
        let local = DpEvent::LocalSampled {
            rate: 0.1,
            event: Box::new(DpEvent::Composed {
                events: vec![DpEvent::PureDp { epsilon: 1.0 }],
            }),
        };
        assert!(matches!(
            acc.compose(&local),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        let curve = DpEvent::RdpCurve {
            orders: vec![2.0],
            epsilons: vec![1.0],
        };
        assert!(matches!(
            acc.compose(&curve),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        let sk = DpEvent::Skellam {
            mu: 10.0,
            l1_sensitivity: 3.0,
            l2_sensitivity: 2.0,
        };
        assert!(matches!(
            acc.compose(&sk),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        // The failed compositions left the accountant empty.
        assert_eq!(acc.get_epsilon(1e-5).unwrap(), 0.0);
        assert!(acc.get_epsilon(0.0).is_err());
        assert!(acc.get_delta(f64::NAN).is_err());
    }

    #[test]
    fn large_epsilon_stays_bounded_and_pessimistic() {
        // 5000 uses of a 5-DP randomized response: the composed loss is 5·(2K − n) with
        // K ~ Bin(n, e^5/(1+e^5)); its Chernoff window at h = 1e-4 needs > MAX_PMF_LEN points, so
        // the grid is coarsened. Compare with the exact δ from the binomial pmf.
        let (e1, n) = (5.0f64, 5000u64);
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::SelfComposed {
            event: Box::new(DpEvent::PureDp { epsilon: e1 }),
            count: n,
        })
        .unwrap();
        assert!(acc.discretization() > 1e-4, "not coarsened");
        let p = 1.0 / (1.0 + (-e1).exp());
        let nf = n as f64;
        let exact_delta = |eps: f64| -> f64 {
            (0..=n)
                .map(|k| {
                    let kf = k as f64;
                    let l = e1 * (2.0 * kf - nf);
                    let lp = libm::lgamma(nf + 1.0)
                        - libm::lgamma(kf + 1.0)
                        - libm::lgamma(nf - kf + 1.0)
                        + kf * p.ln()
                        + (nf - kf) * libm::log1p(-p);
                    if l > eps {
                        -lp.exp() * libm::expm1(eps - l)
                    } else {
                        0.0
                    }
                })
                .sum()
        };
        for eps in [24_000.0, 24_500.0, 24_800.0] {
            let exact = exact_delta(eps);
            let got = acc.get_delta(eps).unwrap();
            assert!(
                got >= exact * (1.0 - 1e-9),
                "ε={eps}: {got} < exact {exact}"
            );
            assert!(
                got <= exact * 1.05 + 1e-15,
                "ε={eps}: {got} ≫ exact {exact}"
            );
        }
    }

    #[test]
    fn skellam_pld_matches_direct_summation() {
        // Single use: δ(ε) = Σ_k pmf(k−Δ)(1 − e^{ε − L(k)})₊ summed directly over the pmf.
        for (mu, d) in [(2.0, 1u64), (50.0, 3)] {
            let p = DiscretePld::skellam(mu, d, 1e-4).unwrap();
            let kmax = 400usize;
            let lp = skellam_ln_pmf(mu, kmax).unwrap();
            let ln_p = |k: i64| lp[k.unsigned_abs() as usize];
            let di = d as i64;
            for eps in [0.1, 0.5, 1.0] {
                let exact: f64 = ((-300 + di)..=300)
                    .map(|k| {
                        let l = ln_p(k - di) - ln_p(k);
                        if l > eps {
                            -ln_p(k - di).exp() * libm::expm1(eps - l)
                        } else {
                            0.0
                        }
                    })
                    .sum();
                let got = p.get_delta(eps);
                assert!(
                    got >= exact * (1.0 - 1e-9),
                    "μ={mu} ε={eps}: {got} < {exact}"
                );
                assert!(
                    got <= exact * 1.001 + 1e-15,
                    "μ={mu} ε={eps}: {got} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn skellam_pld_is_tighter_than_rdp_bound() {
        // The exact PLD must not exceed the §2.2 RDP bound's ε (both are valid; PLD is tight).
        for (mu, steps) in [(4.0, 10u64), (100.0, 50)] {
            let ev = DpEvent::SelfComposed {
                event: Box::new(DpEvent::Skellam {
                    mu,
                    l1_sensitivity: 1.0,
                    l2_sensitivity: 1.0,
                }),
                count: steps,
            };
            let mut pld = PldAccountant::new();
            pld.compose(&ev).unwrap();
            let mut rdp = crate::RdpAccountant::new();
            rdp.compose(&ev).unwrap();
            let (a, b) = (
                pld.get_epsilon(1e-6).unwrap(),
                rdp.get_epsilon(1e-6).unwrap(),
            );
            assert!(a < b, "μ={mu}: PLD {a} ≥ RDP {b}");
        }
    }

    #[test]
    fn huge_single_losses_use_a_coarser_grid() {
        // ε = 500 randomized response (atoms at ±500) and a Laplace scale of 1e-3 (losses in
        // ±1000) would need 1e7 and 2e7 points at h = 1e-4: the grid is coarsened instead.
        let p = DiscretePld::pure_dp(500.0, 1e-4).unwrap();
        assert!(p.h() > 1e-4, "{}", p.h());
        // δ(ε') = P(L = 500)(1 − e^{ε'−500}) for ε' < 500; ε at tiny δ is 500 (pessimistic).
        assert!(p.get_epsilon(1e-12) >= 500.0 - 1e-9);
        let l = DiscretePld::laplace(1e-3, 1e-4).unwrap();
        assert!(
            l.h() > 1e-4 && l.get_epsilon(1e-12) >= 1000.0 - 1e-9,
            "{} {} {}",
            l.h(),
            l.get_epsilon(1e-12),
            l.inf_mass()
        );
        // Mixed with a fine-grid Gaussian in the accountant (μ = 200, discretized at query time
        // on the coarser grid).
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::PureDp { epsilon: 500.0 }).unwrap();
        acc.compose(&DpEvent::Gaussian {
            noise_multiplier: 0.05,
        })
        .unwrap();
        let e = acc.get_epsilon(1e-5).unwrap();
        // ε of the Gaussian alone plus the 500 of the randomized response (its loss is 500 with
        // probability 1 − 7e-218), up to the coarse grid.
        let g = gaussian_epsilon(200.0, 1e-5);
        assert!(e.is_finite() && e >= g + 500.0 - 1.0, "{e} vs {g}");
    }

    #[test]
    fn constructors_validate_and_degenerate_noise_is_infinite() {
        assert!(DiscretePld::gaussian(0.0, 1e-4).is_err());
        assert!(DiscretePld::gaussian(1.0, 0.0).is_err());
        assert!(DiscretePld::laplace(f64::NAN, 1e-4).is_err());
        assert!(DiscretePld::pure_dp(-1.0, 1e-4).is_err());
        assert!(DiscretePld::poisson_gaussian(1.5, 1.0, true, 1e-4).is_err());
        assert!(DiscretePld::poisson_gaussian(0.5, 0.0, true, 1e-4).is_err());
        assert!(DiscretePld::skellam(1.0, 0, 1e-4).is_err());
        let mut acc = PldAccountant::new();
        acc.compose(&DpEvent::Gaussian {
            noise_multiplier: 1e-200,
        })
        .unwrap();
        assert_eq!(acc.get_epsilon(1e-5).unwrap(), f64::INFINITY);
        assert_eq!(acc.get_delta(10.0).unwrap(), 1.0);
    }
}
