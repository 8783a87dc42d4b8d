//! The mechanisms crate's integration tests, one binary (one module per topic; statistical
//! helpers come from `privfed-testkit`).

mod threads;
mod vector_randomizers;
