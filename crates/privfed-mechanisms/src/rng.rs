//! Random number generators accepted by the mechanisms.
//!
//! Every randomizer takes `rng: &mut R` with `R: Rng + CryptoRng`: a weak generator cannot be
//! passed by accident. The production choice is an OS-seeded ChaCha20 (see the crate docs); this
//! module names the reproducible choice explicitly.

use rand::SeedableRng;

/// The generator used for seeded runs: ChaCha20.
pub type ExperimentRng = rand::rngs::ChaCha20Rng;

/// A ChaCha20 generator seeded from a `u64`, **for tests and reproducible experiments only**:
/// anyone who knows the seed can reproduce the noise and undo the privacy.
pub fn seeded_rng_for_experiments(seed: u64) -> ExperimentRng {
    ExperimentRng::seed_from_u64(seed)
}
