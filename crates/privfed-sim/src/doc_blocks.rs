//! The Rust blocks of the guides, compiled and run as doctests (`cargo test -p privfed-sim
//! --doc`): each guide is included as the documentation of one item, so a code example in a
//! guide that stops compiling, or whose assertions fail, fails the tests. This crate depends on
//! every library crate, so a guide's block can use any of them. Blocks in other languages are
//! not Rust to rustdoc (a block without a language would be: label it, e.g. ```` ```text ````);
//! the shell blocks are run by the CLI's `doc_blocks` test.

#[doc = include_str!("../../../README.md")]
pub struct Readme;

#[doc = include_str!("../../../CONTRIBUTING.md")]
pub struct Contributing;

#[doc = include_str!("../../../docs/ACCOUNTING.md")]
pub struct Accounting;

#[doc = include_str!("../../../docs/ALGORITHMS.md")]
pub struct Algorithms;

#[doc = include_str!("../../../docs/ARCHITECTURE.md")]
pub struct Architecture;

#[doc = include_str!("../../../docs/AUDIT.md")]
pub struct Audit;

#[doc = include_str!("../../../docs/CLI.md")]
pub struct Cli;

#[doc = include_str!("../../../docs/FEDERATED_LEARNING.md")]
pub struct FederatedLearning;

#[doc = include_str!("../../../docs/FLOATING_POINT.md")]
pub struct FloatingPoint;

#[doc = include_str!("../../../docs/RANDOMNESS.md")]
pub struct Randomness;

#[doc = include_str!("../../../docs/SECURE_AGGREGATION.md")]
pub struct SecureAggregation;

#[doc = include_str!("../../../docs/SERVER_OPERATIONS.md")]
pub struct ServerOperations;

#[doc = include_str!("../../../docs/SERVER_THREAT_MODEL.md")]
pub struct ServerThreatModel;
