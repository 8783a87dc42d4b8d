//! Integration tests of the protocol: whole rounds with real cryptography, dropouts at every
//! stage, a curious and a lying server, and hostile messages.

mod adversarial;
mod rounds;

use privfed_secagg::{GraphSpec, RoundConfig};
use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};

/// A seeded test generator.
pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// A round configuration with a session id derived from the parameters.
pub fn config(
    clients: u32,
    threshold: u32,
    bits: u32,
    dim: usize,
    graph: GraphSpec,
) -> RoundConfig {
    RoundConfig {
        session_id: [clients as u8 ^ bits as u8; 32],
        clients,
        threshold,
        bits,
        dim,
        graph,
    }
}

/// Uniform inputs in Z_{2^bits}.
pub fn random_inputs(r: &mut ChaCha20Rng, n: usize, dim: usize, bits: u32) -> Vec<Vec<u64>> {
    let m = privfed_secagg::mask::modulus_mask(bits);
    (0..n)
        .map(|_| (0..dim).map(|_| r.random::<u64>() & m).collect())
        .collect()
}

pub use privfed_secagg::local::plain_sum;
