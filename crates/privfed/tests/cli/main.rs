//! The CLI's integration tests, one binary: every test runs the real `privfed` binary
//! (`common` holds the runners); one module per command family.

mod cli;
mod cli_account;
mod cli_audit;
mod cli_ddml;
mod cli_distributed;
mod cli_fl;
mod cli_mvu;
mod cli_plot;
mod cli_secagg;
mod common;
mod ddml_server;
mod doc_blocks;
mod secagg_server;
mod serve_ops;
