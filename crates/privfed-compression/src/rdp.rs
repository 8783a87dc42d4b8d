//! RDP of MVU (paper 004 §4.3).
