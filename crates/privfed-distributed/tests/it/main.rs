//! privfed-distributed's integration tests, one binary: the gray-box replay of the encoder's
//! noise addition (`replay`, with privfed-audit).

mod replay;
