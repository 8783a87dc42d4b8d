//! The accounting crate's integration tests, one binary: mpmath references and agreement with
//! Google's dp_accounting (the oracle and **all tolerances** live in `common`).

mod common;
mod pld_vs_dp_accounting;
mod rdp_vs_dp_accounting;
mod wor_vs_dp_accounting;
