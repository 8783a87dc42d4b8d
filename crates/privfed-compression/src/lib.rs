//! # privfed-compression
//!
//! Privacy-aware compression (paper 004): the **MVU designer** ([`designer`]) and the
//! **Rényi DP of MVU** ([`rdp`]). The device-side mechanisms (dithering, unbiased bitwise RR,
//! the MVU mechanism that uses a design) live in `privfed-mechanisms`
//! ([`privfed_mechanisms::mvu`], [`privfed_mechanisms::bitwise_rr`], [`privfed_mechanisms::dither`]);
//! this crate only produces and analyses designs. Pure: no I/O, no clock, no randomness.
//!
//! ## Accounting
//! [`rdp::mvu_rdp_curve`] returns `ε(α)` of one use of the scalar mechanism at the given orders
//! (exact over continuous inputs); for the vector mechanism use [`rdp::vector_rdp_lp`] (or the
//! cheaper [`rdp::vector_rdp_greedy`]) per order. Either curve is a user-supplied RDP curve for the
//! accountant (an event such as `DpEvent::RdpCurve { orders, epsilons }`, composed by adding per
//! order and converted to (ε, δ) there). [`account`] packages this: the per-step curve and pure ε
//! ([`account::scalar_step`], [`account::vector_step`]: per order the smallest of the LP, greedy
//! and pure-DP bounds) and the `privfed-accounting` accountant for `T` locally sampled steps,
//! capped by pure composition ([`account::steps_accountant`]). This crate depends on
//! `privfed-accounting` (for events, local sampling and the pure-DP RDP), never the reverse.
//!
//! ## Example
//! ```
//! use privfed_compression::designer::{design_mvu, DesignOptions};
//! use privfed_mechanisms::mvu::DpConstraint;
//!
//! let r = design_mvu(2, 2, 2.0, DpConstraint::Ldp, &DesignOptions::default()).unwrap();
//! assert!(r.violations.max() <= 1e-9);
//! assert!(r.variance <= r.grr_variance);
//! ```

pub mod account;
pub mod designer;
mod linalg;
pub mod rdp;
