//! The load generator (see `run`).
