//! Integration tests of the protocol: whole rounds with real cryptography, dropouts at every
//! stage, a curious and a lying server, and hostile messages.

mod active;
mod adversarial;
mod colluders;
mod lying_server;
mod rounds;
mod tracing;

use privfed_secagg::local::Enrollment;
use privfed_secagg::{Credentials, GraphSpec, RoundConfig, ThreatModel};
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
        threat_model: ThreatModel::HonestButCurious,
    }
}

/// Devices enrolled for an active round over `config` (its threat model set to name their
/// roster) and their credentials.
pub fn enrolled(config: &mut RoundConfig, r: &mut ChaCha20Rng) -> Vec<Credentials> {
    let e = Enrollment::new(config.clients as usize, r);
    config.threat_model = e.threat_model();
    e.into_credentials().unwrap()
}

/// Uniform inputs in Z_{2^bits}.
pub fn random_inputs(r: &mut ChaCha20Rng, n: usize, dim: usize, bits: u32) -> Vec<Vec<u64>> {
    let m = privfed_secagg::mask::modulus_mask(bits);
    (0..n)
        .map(|_| (0..dim).map(|_| r.random::<u64>() & m).collect())
        .collect()
}

pub use privfed_secagg::local::plain_sum;
