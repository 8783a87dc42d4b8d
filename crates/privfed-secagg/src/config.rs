//! A round's public configuration: who takes part, the threshold, the ring Z_{2^b}, the vector
//! length and the communication graph — and the digest that binds every message to it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Result, SecAggError};
pub use crate::ids::ClientId;
use crate::ids::Stage;

const HONEST_BUT_CURIOUS_STAGES: [Stage; 4] = [
    Stage::AdvertiseKeys,
    Stage::ShareKeys,
    Stage::MaskedInput,
    Stage::Unmasking,
];

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

/// Which server the round's clients defend against.
///
/// | mode | the server may | clients trust |
/// |---|---|---|
/// | [`ThreatModel::HonestButCurious`] | read everything it is sent, but relays keys and reports dropouts truthfully | the server's relay |
/// | [`ThreatModel::Active`] with a roster | lie about dropouts, forward any subset of messages, substitute keys | the enrollment authority's key |
/// | [`ThreatModel::Active`] without a roster | lie about dropouts and forward any subset of messages; it can still join as any number of clients (Sybils) | nobody: only the consistency round protects them |
///
/// `docs/SECURE_AGGREGATION.md` ("Threat models") has what each protects and costs, and the
/// tests that play each adversary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreatModel {
    /// Bonawitz et al.'s semi-honest protocol: four stages, unsigned keys, and unmasking lists
    /// supplied by the server. A server that lies about dropouts recovers an input
    /// (`tests/it/lying_server.rs` plays it).
    #[default]
    HonestButCurious,
    /// Bonawitz et al.'s actively secure variant (§4, with SecAgg+'s graph per Bell et al.):
    /// round keys signed by each device's long-term Ed25519 key, every client shown the whole
    /// signed key list (the round's binding covers it), the graph placed by randomness derived
    /// from that list, and a consistency round: a client unmasks only after `t` of its
    /// neighbours signed the same survivor set U3, and it derives survivors and dropped clients
    /// itself from U3.
    Active {
        /// SHA-256 of the [`crate::identity::Roster`] of enrolled devices (signed by an
        /// enrollment authority the clients trust), or `None`: any device key is accepted, so
        /// the server can act as any number of clients.
        roster: Option<[u8; 32]>,
    },
}

impl ThreatModel {
    /// Whether this is the actively secure mode.
    pub fn is_active(&self) -> bool {
        matches!(self, ThreatModel::Active { .. })
    }

    /// The name used by the command line and the reports.
    pub fn name(&self) -> &'static str {
        match self {
            ThreatModel::HonestButCurious => "honest-but-curious",
            ThreatModel::Active { .. } => "active",
        }
    }
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
    /// Which server the clients defend against (default: honest-but-curious).
    #[serde(default)]
    pub threat_model: ThreatModel,
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
                     server cannot collect both kinds of shares of one client from honest \
                     neighbours)",
                    degree / 2 + 1
                ),
            ));
        }
        Ok(Graph::for_config(self))
    }

    /// The stages of a round in this threat model, in order (the consistency check only in
    /// the active mode).
    pub fn stages(&self) -> &'static [Stage] {
        if self.threat_model.is_active() {
            &Stage::ALL
        } else {
            &HONEST_BUT_CURIOUS_STAGES
        }
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
        // The honest-but-curious binding is unchanged from before the active mode existed.
        if let ThreatModel::Active { roster } = self.threat_model {
            h.update(b"active");
            match roster {
                Some(digest) => {
                    h.update([1u8]);
                    h.update(digest);
                }
                None => h.update([0u8]),
            }
        }
        h.finalize().into()
    }
}

/// The communication graph of a round: the complete graph, or a Harary graph H(m, k) over a
/// permutation of its m members.
///
/// In the honest-but-curious mode the members are 1..=n and the permutation comes from the
/// session id; in the active mode the graph is re-derived once round 1 is fixed, over the
/// clients that advertised signed keys, from the session id and a hash of every advertised key
/// ([`Graph::for_members`]), so the server cannot place clients.
#[derive(Debug, Clone)]
pub struct Graph {
    members: Vec<ClientId>,
    half_degree: u32,
    complete: bool,
    /// position[id − 1]: the client's place on the permuted ring (u32::MAX: not a member).
    position: Vec<u32>,
    /// order[p]: the client at ring place p.
    order: Vec<ClientId>,
}

impl Graph {
    fn for_config(config: &RoundConfig) -> Self {
        let members: Vec<ClientId> = (1..=config.clients).collect();
        let seed = crate::crypto::derive_public(&config.session_id, b"harary-permutation");
        Graph::for_members(members, config.graph, &seed)
    }

    /// The graph `spec` over `members` (distinct ids, any order), its ring permuted by ChaCha20
    /// keyed by `seed`. A Harary degree of at least `members − 1` gives the complete graph.
    pub fn for_members(mut members: Vec<ClientId>, spec: GraphSpec, seed: &[u8; 32]) -> Self {
        members.sort_unstable();
        members.dedup();
        let m = members.len() as u32;
        let max_id = members.last().copied().unwrap_or(0) as usize;
        match spec {
            GraphSpec::Harary { degree } if m > 0 && degree < m - 1 => {
                let order = permutation(seed, &members);
                let mut position = vec![u32::MAX; max_id];
                for (p, &id) in order.iter().enumerate() {
                    position[(id - 1) as usize] = p as u32;
                }
                Graph {
                    members,
                    half_degree: degree / 2,
                    complete: false,
                    position,
                    order,
                }
            }
            _ => Graph {
                members,
                half_degree: 0,
                complete: true,
                position: Vec::new(),
                order: Vec::new(),
            },
        }
    }

    /// Whether `id` is a member of the graph.
    pub fn contains(&self, id: ClientId) -> bool {
        self.members.binary_search(&id).is_ok()
    }

    /// The members, by increasing id.
    pub fn members(&self) -> &[ClientId] {
        &self.members
    }

    /// Whether every member is every other's neighbour.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether `u` and `v` (distinct clients) exchange keys, shares and masks.
    pub fn are_neighbours(&self, u: ClientId, v: ClientId) -> bool {
        if u == v || !self.contains(u) || !self.contains(v) {
            return false;
        }
        if self.complete {
            return true;
        }
        let m = self.members.len() as u32;
        let a = self.position[(u - 1) as usize];
        let b = self.position[(v - 1) as usize];
        let d = a.abs_diff(b);
        d.min(m - d) <= self.half_degree
    }

    /// The neighbours of `u`, in increasing id order.
    pub fn neighbours(&self, u: ClientId) -> Vec<ClientId> {
        if !self.contains(u) {
            return Vec::new();
        }
        if self.complete {
            return self.members.iter().copied().filter(|&v| v != u).collect();
        }
        let n = self.members.len() as i64;
        let p = self.position[(u - 1) as usize] as i64;
        let mut out: Vec<ClientId> = (1..=self.half_degree as i64)
            .flat_map(|j| [p + j, p - j])
            .map(|q| self.order[q.rem_euclid(n) as usize])
            .collect();
        out.sort_unstable();
        out
    }
}

/// A uniformly random permutation of `members` (sorted), from ChaCha20 keyed by `seed`
/// (public: every party derives the same graph).
fn permutation(seed: &[u8; 32], members: &[ClientId]) -> Vec<ClientId> {
    use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};
    let mut rng = ChaCha20Rng::from_seed(*seed);
    let mut order = members.to_vec();
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
            threat_model: ThreatModel::HonestButCurious,
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
        let mut c = base.clone();
        c.graph = GraphSpec::Harary { degree: 8 };
        variants.push(c);
        let mut c = base.clone();
        c.threat_model = ThreatModel::Active { roster: None };
        variants.push(c);
        let mut c = base;
        c.threat_model = ThreatModel::Active {
            roster: Some([9u8; 32]),
        };
        variants.push(c);
        let bindings: std::collections::BTreeSet<_> =
            variants.iter().map(|c| c.binding()).collect();
        assert_eq!(bindings.len(), variants.len());
    }
}
