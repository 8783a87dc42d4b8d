//! Privacy accounting for privfed (formulas in `docs/ALGORITHMS.md` §5, §2.2, §4.3, §1.6).
//!
//! * [`DpEvent`]: privacy events as data (Gaussian, Laplace, pure ε-DP, Skellam, Poisson
//!   sampling, sampling without replacement (replace-one), local sampling with visible
//!   participation, composition, user RDP curves).
//! * [`PrivacyAccountant`]: the accountant interface (compose, supports, ε for δ, δ for ε, a
//!   [`Ledger`] of composed events, the [`NeighbouringRelation`] assumed).
//! * [`RdpAccountant`] and [`PldAccountant`]: compose events, answer ε for δ and δ for ε;
//!   [`PureCappedRdpAccountant`]: RDP capped by pure composition `Σ ε_t` when every step is
//!   pure ε-DP.
//! * [`calibrate`]: the noise that meets a target (ε, δ).
//! * [`analysis`]: Draw-and-Discard adversaries, reconstruction protection, analytic Gaussian.
//! * [`report`]: the `Serialize` reports of `privfed account`, `calibrate` and `analyze` (and
//!   of the Python bindings), assembled from the above.
//!
//! Pure: no I/O, no clock, no global state.
//!
//! | event | [`RdpAccountant`] | [`PldAccountant`] |
//! |---|---|---|
//! | `Gaussian` | `α/(2z²)` | exact (`N(μ, 2μ)`, composed analytically) |
//! | `Laplace` | Mironov 2017 | pessimistic discretization |
//! | `PureDp` | tight RR form | randomized response (dominating pair) |
//! | `Skellam` | §2.2 bound (integer orders, `⌈α⌉`) | exact 1-D pmf (`l1 == l2`, integer) |
//! | `PoissonSampled(Gaussian)` | exact, integer and fractional orders | add and remove directions |
//! | `PoissonSampled(Laplace)` | Zhu & Wang 2019 bound | add and remove directions |
//! | `PoissonSampled(other)` | Zhu & Wang 2019 bound | rejected (`UnsupportedEvent`) |
//! | `LocalSampled(inner)` | `ln(1−q+q·e^{(α−1)ε(α)})/(α−1)` on the inner curve | `q·PLD + (1−q)·δ₀` (Gaussian, Laplace, pure, 1-D Skellam) |
//! | `RdpCurve` | as given (monotone extension) | rejected (`UnsupportedEvent`) |
//! | `SampledWithoutReplacement(Gaussian)` | WBK19 Thm. 27, replace-one accountant only | rejected (`UnsupportedEvent`) |
//!
//! The [`Ledger`] keeps runs of identical events; composing the last event again is O(1) and
//! ε is computed at query time ([`PrivacyAccountant::compose_repeated`]).
//!
//! Numerics (log-sum-exp, log binomials, `ln Φ`, normal-tail differences, the incomplete beta
//! function at `(x, 1 − x)`, bisection) come from `privfed-special`, the base crate shared with
//! `privfed-mechanisms`.
//!
//! The analytic-Gaussian privacy profile and its inverses live in `privfed_mechanisms::gaussian`
//! (the mechanism owns its calibration); [`analysis::analytic_gaussian_sigma`] and the Gaussian
//! PLD ([`pld::gaussian_delta`], [`pld::gaussian_epsilon`]) call them. This crate depends on
//! `privfed-mechanisms`, never the reverse.
//!
//! ```
//! use privfed_accounting::{DpEvent, RdpAccountant};
//! let mut acc = RdpAccountant::new();
//! acc.compose(&DpEvent::poisson_gaussian(0.01, 1.1, 1000)).unwrap();
//! let r = acc.get_epsilon_and_order(1e-5).unwrap();
//! assert!(r.epsilon > 0.5 && r.epsilon < 2.0);
//! ```

pub mod accountant;
pub mod analysis;
pub mod calibrate;
pub mod ddg;
pub mod error;
pub mod event;
pub mod pld;
pub mod pure_cap;
pub mod rdp;
pub mod report;
pub mod skellam;

pub use accountant::{Ledger, LedgerRun, NeighbouringRelation, PrivacyAccountant};
pub use calibrate::{AccountantKind, Calibration};
pub use error::{AccountingError, Result};
pub use event::DpEvent;
pub use pld::{DiscretePld, PldAccountant};
pub use pure_cap::{BoundSource, CappedDelta, CappedEpsilon, PureCappedRdpAccountant};
pub use rdp::{RdpAccountant, RdpEpsilon};
