//! The `privfed` command line.
fn main() {}
