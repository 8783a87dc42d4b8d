//! privfed-distributed's integration tests, one binary: the gray-box replay of the encoder's
//! noise addition (`replay`) and a black-box audit of one composed round (`audit_round`), both
//! with privfed-audit.

mod audit_round;
mod replay;
