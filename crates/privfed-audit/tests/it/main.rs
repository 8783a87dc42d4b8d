//! privfed-audit's integration tests, one binary: reference values from independent
//! implementations (`reference`, scipy; the oracle and all tolerances in `common`) and the audit
//! suite (`suite`): every covered mechanism holds its claim, and a planted bug is caught; the
//! methods on privfed's mechanisms (`methods`); the floating-point caveat of Laplace made
//! visible (`floating_point`).

mod common;
mod floating_point;
mod methods;
mod reference;
mod suite;
