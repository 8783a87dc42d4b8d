//! A round's public configuration: who takes part, the threshold, the ring Z_{2^b}, the vector
//! length and the communication graph — and the digest that binds every message to it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Result, SecAggError};

/// A client's id in a round: 1..=n (0 is never an id; it is Shamir's secret point).
pub type ClientId = u32;

/// The wire protocol's version; messages of another version are refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest supported vector length (masks are expanded from one ChaCha20 stream, which holds
/// 2^38 bytes; 2^28 coordinates of 8 bytes is far inside that).
pub const MAX_DIM: usize = 1 << 28;

/// Largest cohort (ids must fit the field of the Shamir sharing with room to spare; the real
/// limit is memory and time).
pub const MAX_CLIENTS: u32 = 1 << 20;

/// Who exchanges keys, shares and pairwise masks with whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphSpec {
    /// Bonawitz et al. 2017: every client with every other.
    Complete,
    /// Bell et al. 2020 (SecAgg+): a Harary graph H(n, k) over a random permutation of the
    /// clients (derived from the session id): each client is a neighbour of the `degree` clients
    /// nearest it on the permuted ring, `degree / 2` on each side. `degree` is even.
    Harary {
        /// The number of neighbours of each client (even, 2..n−1).
        degree: u32,
    },
}

/// The public parameters of one secure-aggregation round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundConfig {
    /// 256 bits from the server's CSPRNG, fresh for every round (it separates every key and
    /// mask derivation of this round from every other).
    pub session_id: [u8; 32],
    /// Clients are numbered 1..=clients.
    pub clients: u32,
    /// Shares of a client's secrets needed to reconstruct them, held by its neighbours. Must
    /// exceed half the degree (so a server cannot collect t shares of both kinds for one client
    /// from honest clients, each of which reveals at most one kind) and be at most the degree.
    pub threshold: u32,
    /// The ring is Z_{2^bits}, bits in 1..=64.
    pub bits: u32,
    /// Length of every input vector.
    pub dim: usize,
    /// Who talks to whom.
    pub graph: GraphSpec,
}

impl RoundConfig {
    /// Checks every parameter and returns the graph the round uses.
    pub fn validate(&self) -> Result<Graph> {
        if self.clients < 2 || self.clients > MAX_CLIENTS {
            return Err(SecAggError::config(
                "clients",
                self.clients,
                format!("must be in 2..={MAX_CLIENTS}"),
            ));
        }
        if !(1..=64).contains(&self.bits) {
            return Err(SecAggError::config("bits", self.bits, "must be in 1..=64"));
        }
        if self.dim == 0 || self.dim > MAX_DIM {
            return Err(SecAggError::config(
                "dim",
                self.dim,
                format!("must be in 1..={MAX_DIM}"),
            ));
        }
        let degree = self.degree();
        if let GraphSpec::Harary { degree: k } = self.graph
            && (k < 2 || !k.is_multiple_of(2) || k > self.clients - 1)
        {
            return Err(SecAggError::config(
                "degree",
                k,
                format!("must be even and in 2..={}", self.clients - 1),
            ));
        }
        if self.threshold > degree || 2 * self.threshold <= degree {
            return Err(SecAggError::config(
                "threshold",
                self.threshold,
                format!(
                    "must be in {}..={degree} (more than half of the {degree} neighbours, so a \
                     lying server cannot collect both kinds of shares of one client)",
                    degree / 2 + 1
                ),
            ));
        }
        Ok(Graph::new(self))
    }

    /// The number of neighbours of each client.
    pub fn degree(&self) -> u32 {
        match self.graph {
            GraphSpec::Complete => self.clients - 1,
            GraphSpec::Harary { degree } => degree,
        }
    }

    /// SHA-256 of the protocol version and every parameter: every message and every key
    /// derivation carries it, so parties holding different configurations (or a replay from
    /// another round) cannot complete a round together.
    pub fn binding(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"privfed/secagg/round-config");
        h.update(PROTOCOL_VERSION.to_be_bytes());
        h.update(self.session_id);
        h.update(self.clients.to_be_bytes());
        h.update(self.threshold.to_be_bytes());
        h.update(self.bits.to_be_bytes());
        h.update((self.dim as u64).to_be_bytes());
        match self.graph {
            GraphSpec::Complete => h.update([0u8]),
            GraphSpec::Harary { degree } => {
                h.update([1u8]);
                h.update(degree.to_be_bytes());
            }
        }
        h.finalize().into()
    }
}

/// The communication graph of a round, derived from its configuration.
#[derive(Debug, Clone)]
pub struct Graph {
    clients: u32,
    half_degree: u32,
    complete: bool,
    /// position[id − 1]: the client's place on the permuted ring (Harary only).
    position: Vec<u32>,
    /// order[p]: the client at ring place p.
    order: Vec<ClientId>,
}

impl Graph {
    fn new(config: &RoundConfig) -> Self {
        let n = config.clients;
        match config.graph {
            GraphSpec::Harary { degree } if degree < n - 1 => {
                let order = permutation(&config.session_id, n);
                let mut position = vec![0u32; n as usize];
                for (p, &id) in order.iter().enumerate() {
                    position[(id - 1) as usize] = p as u32;
                }
                Graph {
                    clients: n,
                    half_degree: degree / 2,
                    complete: false,
                    position,
                    order,
                }
            }
            _ => Graph {
                clients: n,
                half_degree: 0,
                complete: true,
                position: Vec::new(),
                order: Vec::new(),
            },
        }
    }

    /// Whether `id` is a client of the round.
    pub fn contains(&self, id: ClientId) -> bool {
        (1..=self.clients).contains(&id)
    }

    /// Whether `u` and `v` (distinct clients) exchange keys, shares and masks.
    pub fn are_neighbours(&self, u: ClientId, v: ClientId) -> bool {
        if u == v || !self.contains(u) || !self.contains(v) {
            return false;
        }
        if self.complete {
            return true;
        }
        let a = self.position[(u - 1) as usize];
        let b = self.position[(v - 1) as usize];
        let d = a.abs_diff(b);
        d.min(self.clients - d) <= self.half_degree
    }

    /// The neighbours of `u`, in increasing id order.
    pub fn neighbours(&self, u: ClientId) -> Vec<ClientId> {
        if !self.contains(u) {
            return Vec::new();
        }
        if self.complete {
            return (1..=self.clients).filter(|&v| v != u).collect();
        }
        let n = self.clients as i64;
        let p = self.position[(u - 1) as usize] as i64;
        let mut out: Vec<ClientId> = (1..=self.half_degree as i64)
            .flat_map(|j| [p + j, p - j])
            .map(|q| self.order[q.rem_euclid(n) as usize])
            .collect();
        out.sort_unstable();
        out
    }
}

/// A uniformly random permutation of 1..=n, from ChaCha20 keyed by HKDF of the session id
/// (public: every party derives the same graph).
fn permutation(session_id: &[u8; 32], n: u32) -> Vec<ClientId> {
    use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};
    let seed = crate::crypto::derive_public(session_id, b"harary-permutation");
    let mut rng = ChaCha20Rng::from_seed(seed);
    let mut order: Vec<ClientId> = (1..=n).collect();
    for i in (1..order.len()).rev() {
        let j = rng.random_range(0..=i);
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(clients: u32, threshold: u32, graph: GraphSpec) -> RoundConfig {
        RoundConfig {
            session_id: [3u8; 32],
            clients,
            threshold,
            bits: 16,
            dim: 10,
            graph,
        }
    }

    #[test]
    fn harary_graph_is_regular_and_symmetric() {
        let c = config(50, 5, GraphSpec::Harary { degree: 8 });
        let g = c.validate().unwrap();
        for u in 1..=50 {
            let nb = g.neighbours(u);
            assert_eq!(nb.len(), 8);
            assert!(!nb.contains(&u));
            for &v in &nb {
                assert!(g.are_neighbours(u, v) && g.are_neighbours(v, u));
            }
            let count = (1..=50).filter(|&v| g.are_neighbours(u, v)).count();
            assert_eq!(count, 8);
        }
        // Another session gives another graph.
        let mut c2 = c.clone();
        c2.session_id = [4u8; 32];
        let g2 = c2.validate().unwrap();
        assert!((1..=50).any(|u| g.neighbours(u) != g2.neighbours(u)));
    }

    #[test]
    fn thresholds_and_ranges_are_checked() {
        assert!(config(10, 5, GraphSpec::Complete).validate().is_ok());
        assert!(config(10, 4, GraphSpec::Complete).validate().is_err()); // ≤ half of 9
        assert!(config(10, 10, GraphSpec::Complete).validate().is_err()); // > degree
        assert!(
            config(10, 3, GraphSpec::Harary { degree: 5 })
                .validate()
                .is_err()
        );
        assert!(
            config(10, 3, GraphSpec::Harary { degree: 4 })
                .validate()
                .is_ok()
        );
        assert!(config(1, 1, GraphSpec::Complete).validate().is_err());
        let mut c = config(10, 5, GraphSpec::Complete);
        c.bits = 0;
        assert!(c.validate().is_err());
        c.bits = 65;
        assert!(c.validate().is_err());
        c.bits = 64;
        c.dim = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn binding_covers_every_parameter() {
        let base = config(10, 6, GraphSpec::Complete);
        let mut variants = vec![base.clone()];
        let mut c = base.clone();
        c.session_id[0] ^= 1;
        variants.push(c);
        let mut c = base.clone();
        c.clients = 11;
        variants.push(c);
        let mut c = base.clone();
        c.threshold = 7;
        variants.push(c);
        let mut c = base.clone();
        c.bits = 17;
        variants.push(c);
        let mut c = base.clone();
        c.dim = 11;
        variants.push(c);
        let mut c = base;
        c.graph = GraphSpec::Harary { degree: 8 };
        variants.push(c);
        let bindings: std::collections::BTreeSet<_> =
            variants.iter().map(|c| c.binding()).collect();
        assert_eq!(bindings.len(), variants.len());
    }
}
