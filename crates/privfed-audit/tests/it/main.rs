//! privfed-audit's integration tests, one binary: reference values from independent
//! implementations (`reference`, scipy; the oracle and all tolerances in `common`) and the audit
//! suite (`suite`): every covered mechanism holds its claim, and a planted bug is caught.

mod common;
mod reference;
mod suite;
