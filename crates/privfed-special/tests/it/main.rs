//! privfed-special's integration tests, one binary: the mpmath reference suite.

mod special_reference;
