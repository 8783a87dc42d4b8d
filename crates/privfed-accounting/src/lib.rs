//! Privacy accounting for privfed (paper formulas in `ALGORITHMS.md` §5): privacy events,
//! RDP and PLD accountants, conversion and calibration.
//!
//! Work in progress: see issue 3.
