//! The compression crate's integration tests, one binary: paper 004's reference designs.

mod paper004_reference;
