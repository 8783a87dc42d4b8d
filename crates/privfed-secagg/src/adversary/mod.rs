//! A lying server, played against real clients: the attacks that the threat models are judged
//! by. Tests, `privfed secagg simulate --adversary lying-server` and the benchmarks run them, so
//! every claim in `docs/SECURE_AGGREGATION.md` about what a lying server can or cannot learn is
//! checked by an attacker that tries.
//!
//! The attacker owns the server's side of the wire: it relays, withholds, reorders and invents
//! messages, while every client is a real [`Client`] state machine with real cryptography. The
//! attack succeeds only if the attacker computes the target's exact input from what clients
//! sent it.
//!
//! * **Neighbour-share attack** ([`Attack::NeighbourShare`]). The server forwards the target `u`
//!   only `t` of the ciphertexts addressed to it, so `u` masks with just those peers `P_u`.
//!   Then it tells every other client that `u` survived (collecting `t` shares of the self-mask
//!   seed `b_u`) and tells, for each `v ∈ P_u`, `t` of `v`'s neighbours that `v` dropped
//!   (collecting `t` shares of `v`'s mask key `s_v`, which removes the mask `s_uv` from the
//!   other end). Each client's story is consistent with what it saw, so in the
//!   honest-but-curious mode nobody aborts and `y_u` unmasks to `x_u`. In the active mode the
//!   attacker tries the same stories as per-client survivor sets U3 (their signatures then never
//!   reach `t` on one set) and one shared U3 without `P_u` (then fewer than `t` holders of
//!   `b_u` are in U3).
//! * **Key substitution** ([`Attack::KeySubstitution`]): the server relays its own keys as those
//!   of all of `u`'s neighbours, opens the shares `u` seals to them and knows every pairwise
//!   mask `u` adds. In the active mode the substituted keys need signatures from enrolled
//!   devices; without a roster the server can enroll its own (Sybils) and the attack succeeds —
//!   the documented limit of that mode.

mod collusion;

pub use collusion::{
    CollusionReport, GrindingPlacement, MAX_SPLIT_SEARCH, colluders, grind_placement, grinding,
};

use std::collections::{BTreeMap, BTreeSet};

use rand::{CryptoRng, Rng};
use serde::Serialize;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::client::Client;
use crate::config::{ClientId, Graph, RoundConfig};
use crate::crypto;
use crate::error::{Result, SecAggError};
use crate::identity::{self, Credentials, DeviceKey};
use crate::mask::{Sign, apply_mask};
use crate::messages::{
    ClientMessage, ClientPayload, Header, PeerKeys, SealedShares, ServerMessage, ServerPayload,
    SharePlaintext, SignedKeys, SurvivorSignature, key_list_binding, unpack,
};
use crate::shamir::{self, Share};

/// Which attack the lying server plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Lie about dropouts so that the target's neighbours reveal its self-mask seed and its
    /// peers' neighbours reveal the peers' mask keys.
    NeighbourShare,
    /// Relay the server's own keys as those of the target's neighbours.
    KeySubstitution,
}

/// How one strategy of an attack went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StrategyOutcome {
    /// The strategy's name.
    pub strategy: &'static str,
    /// Whether the attacker computed the target's exact input.
    pub recovered_input: bool,
    /// Clients that aborted the round (and dropped their secrets).
    pub clients_aborted: usize,
    /// What stopped the attack, or how it succeeded.
    pub detail: String,
}

/// The outcome of an attack on one round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttackReport {
    /// The attack.
    pub attack: Attack,
    /// The round's threat model.
    pub threat_model: &'static str,
    /// The client whose input the server tried to learn.
    pub target: ClientId,
    /// Whether any strategy recovered the target's exact input.
    pub recovered_input: bool,
    /// The most clients that aborted in any one strategy.
    pub clients_aborted: usize,
    /// Each strategy tried, each on a fresh round with fresh keys.
    pub strategies: Vec<StrategyOutcome>,
}

/// Plays `attack` against real clients holding `inputs` (client `i + 1` holds `inputs[i]`),
/// aiming at `target`. An active-mode round needs `credentials(rng)` to give each client its
/// credentials (a fresh set per strategy, since every strategy runs a fresh round).
pub fn lying_server<R: Rng + CryptoRng + ?Sized>(
    attack: Attack,
    config: &RoundConfig,
    inputs: &[Vec<u64>],
    target: ClientId,
    credentials: &mut dyn FnMut(&mut R) -> Result<Vec<Credentials>>,
    rng: &mut R,
) -> Result<AttackReport> {
    check_round(config, inputs, target)?;
    let active = config.threat_model.is_active();
    let strategies: &[Strategy] = match (attack, active) {
        (Attack::NeighbourShare, false) => &[Strategy::Stories],
        (Attack::NeighbourShare, true) => &[Strategy::Stories, Strategy::OneU3WithoutPeers],
        (Attack::KeySubstitution, _) => &[Strategy::Substitute],
    };
    let mut outcomes = Vec::new();
    for &strategy in strategies {
        let creds = if active {
            Some(credentials(rng)?)
        } else {
            None
        };
        let mut lab = Lab::join(config, inputs, creds, rng)?;
        let outcome = match strategy {
            Strategy::Substitute => lab.substitute(target, rng)?,
            _ => lab.neighbour_share(target, strategy, rng)?,
        };
        outcomes.push(outcome);
    }
    Ok(AttackReport {
        attack,
        threat_model: config.threat_model.name(),
        target,
        recovered_input: outcomes.iter().any(|o| o.recovered_input),
        clients_aborted: outcomes
            .iter()
            .map(|o| o.clients_aborted)
            .max()
            .unwrap_or(0),
        strategies: outcomes,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// Per-client stories (honest-but-curious: unmasking lists; active: per-client U3).
    Stories,
    /// Active mode: one U3 for everyone, without the target's mask peers.
    OneU3WithoutPeers,
    /// Key substitution.
    Substitute,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::Stories => "per-client-stories",
            Strategy::OneU3WithoutPeers => "one-u3-without-peers",
            Strategy::Substitute => "substituted-keys",
        }
    }
}

/// The attacker's bench: real clients, and what they have sent.
struct Lab<'a> {
    config: RoundConfig,
    binding: [u8; 32],
    inputs: &'a [Vec<u64>],
    clients: Vec<Client>,
    round1: Vec<ClientPayload>,
}

impl<'a> Lab<'a> {
    fn join<R: Rng + CryptoRng + ?Sized>(
        config: &RoundConfig,
        inputs: &'a [Vec<u64>],
        credentials: Option<Vec<Credentials>>,
        rng: &mut R,
    ) -> Result<Self> {
        let mut clients = Vec::new();
        let mut round1 = Vec::new();
        match credentials {
            None => {
                for id in 1..=config.clients {
                    let (c, m) = Client::new(config.clone(), id, rng)?;
                    clients.push(c);
                    round1.push(m.payload);
                }
            }
            Some(creds) => {
                for (id, cred) in (1..=config.clients).zip(creds) {
                    let (c, m) = Client::new_active(config.clone(), id, cred, rng)?;
                    clients.push(c);
                    round1.push(m.payload);
                }
            }
        }
        Ok(Lab {
            binding: config.binding(),
            config: config.clone(),
            inputs,
            clients,
            round1,
        })
    }

    fn active(&self) -> bool {
        self.config.threat_model.is_active()
    }

    fn t(&self) -> usize {
        self.config.threshold as usize
    }

    /// Sends `payload` to client `id`; its answer, or `None` if it refused.
    fn ask<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        id: ClientId,
        payload: ServerPayload,
        rng: &mut R,
    ) -> Option<ClientPayload> {
        let message = ServerMessage {
            header: Header::new(self.binding, id),
            payload,
        };
        let i = id as usize - 1;
        self.clients[i]
            .handle(&message, &self.inputs[i], rng)
            .ok()
            .map(|m: ClientMessage| m.payload)
    }

    fn aborted(&self) -> usize {
        self.clients.iter().filter(|c| c.is_aborted()).count()
    }

    fn signed_entries(&self) -> Vec<SignedKeys> {
        signed_entries(&self.round1)
    }

    fn peer_keys(&self, id: ClientId) -> PeerKeys {
        advertised_keys(&self.round1, id).expect("round 1 holds keys")
    }

    /// The graph and key-derivation binding every client derives from an honest relay.
    fn honest_view(&self) -> Result<(Graph, [u8; 32])> {
        if !self.active() {
            return Ok((self.config.validate()?, self.binding));
        }
        let entries = self.signed_entries();
        let kb = key_list_binding(&self.binding, &entries);
        let graph = Graph::for_members(
            entries.iter().map(|e| e.id).collect(),
            self.config.graph,
            &crypto::active_graph_seed(&self.config.session_id, &kb),
        );
        Ok((graph, kb))
    }

    fn outcome(&self, strategy: Strategy, recovered: bool, detail: String) -> StrategyOutcome {
        StrategyOutcome {
            strategy: strategy.name(),
            recovered_input: recovered,
            clients_aborted: self.aborted(),
            detail,
        }
    }

    fn neighbour_share<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        u: ClientId,
        strategy: Strategy,
        rng: &mut R,
    ) -> Result<StrategyOutcome> {
        let n = self.config.clients;
        let t = self.t();
        let (graph, kb) = self.honest_view()?;
        // Stage 1: an honest relay of the keys.
        let mut sealed: BTreeMap<ClientId, Vec<SealedShares>> = BTreeMap::new();
        for id in 1..=n {
            let payload = if self.active() {
                ServerPayload::SignedKeyList {
                    entries: self.signed_entries(),
                }
            } else {
                ServerPayload::Keys {
                    peers: graph
                        .neighbours(id)
                        .into_iter()
                        .map(|v| self.peer_keys(v))
                        .collect(),
                }
            };
            if let Some(ClientPayload::ShareKeys { shares }) = self.ask(id, payload, rng) {
                sealed.insert(id, shares);
            }
        }
        // Stage 2: the target gets only t ciphertexts; everyone else all of theirs.
        let peers_of_u: Vec<ClientId> = graph.neighbours(u).into_iter().take(t).collect();
        let mut held: BTreeMap<ClientId, BTreeSet<ClientId>> = BTreeMap::new();
        let mut masked: BTreeMap<ClientId, Vec<u8>> = BTreeMap::new();
        for id in 1..=n {
            let from: Vec<ClientId> = if id == u {
                peers_of_u.clone()
            } else {
                graph.neighbours(id)
            };
            let shares: Vec<SealedShares> = from
                .iter()
                .filter_map(|v| {
                    sealed
                        .get(v)?
                        .iter()
                        .find(|s| s.peer == id)
                        .map(|s| SealedShares {
                            peer: *v,
                            ciphertext: s.ciphertext.clone(),
                        })
                })
                .collect();
            held.insert(id, shares.iter().map(|s| s.peer).collect());
            if let Some(ClientPayload::MaskedInput { packed }) =
                self.ask(id, ServerPayload::Shares { shares }, rng)
            {
                masked.insert(id, packed);
            }
        }
        let Some(y_u) = masked.get(&u).cloned() else {
            return Ok(self.outcome(strategy, false, "the target sent no masked input".into()));
        };
        // The stories: who is told that which of the target's peers dropped.
        let dropped_for = match assign_drops(&graph, u, &peers_of_u, &held, t) {
            Ok(d) => d,
            Err(why) => return Ok(self.outcome(strategy, false, why)),
        };
        let everyone: BTreeSet<ClientId> = masked.keys().copied().collect();
        let mut responses: BTreeMap<ClientId, ClientPayload> = BTreeMap::new();
        match (self.active(), strategy) {
            (false, _) => {
                for w in (1..=n).filter(|&w| w != u) {
                    let d = dropped_for.get(&w).cloned().unwrap_or_default();
                    let mut survivors: Vec<ClientId> = held[&w]
                        .iter()
                        .copied()
                        .filter(|v| !d.contains(v))
                        .collect();
                    survivors.push(w);
                    survivors.sort_unstable();
                    let payload = ServerPayload::Unmask {
                        survivors,
                        dropped: d.into_iter().collect(),
                    };
                    if let Some(r) = self.ask(w, payload, rng) {
                        responses.insert(w, r);
                    }
                }
            }
            (true, strategy) => {
                let u3_for = |w: ClientId| -> Vec<ClientId> {
                    match strategy {
                        Strategy::OneU3WithoutPeers => everyone
                            .iter()
                            .copied()
                            .filter(|v| !peers_of_u.contains(v))
                            .collect(),
                        _ => {
                            let d = dropped_for.get(&w).cloned().unwrap_or_default();
                            everyone
                                .iter()
                                .copied()
                                .filter(|v| !d.contains(v))
                                .collect()
                        }
                    }
                };
                let mut signatures: Vec<(Vec<ClientId>, SurvivorSignature)> = Vec::new();
                for w in 1..=n {
                    let u3 = u3_for(w);
                    if let Some(ClientPayload::Consistency { signature }) =
                        self.ask(w, ServerPayload::Survivors { u3: u3.clone() }, rng)
                    {
                        signatures.push((u3, SurvivorSignature { id: w, signature }));
                    }
                }
                for w in (1..=n).filter(|&w| w != u) {
                    let u3 = u3_for(w);
                    let sigs: Vec<SurvivorSignature> = signatures
                        .iter()
                        .filter(|(set, s)| *set == u3 && graph.are_neighbours(w, s.id))
                        .map(|(_, s)| *s)
                        .collect();
                    let payload = ServerPayload::SignedSurvivors { signatures: sigs };
                    if let Some(r) = self.ask(w, payload, rng) {
                        responses.insert(w, r);
                    }
                }
            }
        }
        // Reconstruct b_u and every s_v, v ∈ P_u, from whatever shares came back.
        let mut self_shares: Vec<Share> = Vec::new();
        let mut key_shares: BTreeMap<ClientId, Vec<Share>> = BTreeMap::new();
        for r in responses.values() {
            if let ClientPayload::Unmasking {
                self_mask,
                mask_key,
            } = r
            {
                self_shares.extend(
                    self_mask
                        .iter()
                        .filter(|o| o.owner == u)
                        .map(|o| o.share.clone()),
                );
                for o in mask_key {
                    key_shares.entry(o.owner).or_default().push(o.share.clone());
                }
            }
        }
        if self_shares.len() < t {
            let detail = format!(
                "{} shares of the target's self-mask seed came back, {t} needed",
                self_shares.len()
            );
            return Ok(self.outcome(strategy, false, detail));
        }
        let b_u = shamir::combine(&self_shares, t)?;
        let mut pair_seeds = Vec::new();
        for &v in &peers_of_u {
            let shares = key_shares.remove(&v).unwrap_or_default();
            if shares.len() < t {
                let detail = format!(
                    "{} shares of peer {v}'s mask key came back, {t} needed",
                    shares.len()
                );
                return Ok(self.outcome(strategy, false, detail));
            }
            let s_v = StaticSecret::from(*shamir::combine(&shares, t)?);
            let seed = crypto::pair_mask_seed(&s_v, &self.peer_keys(u).mask_pk, &kb, v, u)?;
            pair_seeds.push((v, seed));
        }
        let recovered = self.unmask_target(u, &y_u, &b_u, &pair_seeds)?;
        let detail = if recovered {
            format!(
                "the target's input recovered from t shares of its self-mask seed and of the mask \
                 keys of its {} peers",
                peers_of_u.len()
            )
        } else {
            "the unmasked vector is not the target's input".into()
        };
        Ok(self.outcome(strategy, recovered, detail))
    }

    /// Removes the self-mask and the pairwise masks (with peers `v`, seed `s_uv`) from `y_u`
    /// and compares with the target's real input.
    fn unmask_target(
        &self,
        u: ClientId,
        y_u: &[u8],
        b_u: &[u8; 32],
        pair_seeds: &[(ClientId, Zeroizing<[u8; 32]>)],
    ) -> Result<bool> {
        let bits = self.config.bits;
        let mut x = unpack(y_u, bits, self.config.dim)?;
        apply_mask(&mut x, b_u, bits, Sign::Subtract);
        for (v, seed) in pair_seeds {
            // u added the mask when u < v and subtracted it otherwise; undo that.
            let sign = if u < *v { Sign::Subtract } else { Sign::Add };
            apply_mask(&mut x, seed, bits, sign);
        }
        Ok(x == self.inputs[u as usize - 1])
    }

    fn substitute<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        u: ClientId,
        rng: &mut R,
    ) -> Result<StrategyOutcome> {
        let strategy = Strategy::Substitute;
        let t = self.t();
        // The server's own keys for every other client, and (active mode) its own device keys
        // signing them: Sybils under the real clients' ids.
        struct Fake {
            cipher: StaticSecret,
            mask: StaticSecret,
            keys: SignedKeys,
        }
        let mut fakes: BTreeMap<ClientId, Fake> = BTreeMap::new();
        for v in (1..=self.config.clients).filter(|&v| v != u) {
            let cipher = StaticSecret::random_from_rng(&mut *rng);
            let mask = StaticSecret::random_from_rng(&mut *rng);
            let device = DeviceKey::generate(rng);
            let cipher_pk = PublicKey::from(&cipher).to_bytes();
            let mask_pk = PublicKey::from(&mask).to_bytes();
            let signature = identity::sign(
                &device,
                &identity::keys_message(&self.binding, v, &cipher_pk, &mask_pk),
            );
            let keys = SignedKeys {
                id: v,
                cipher_pk,
                mask_pk,
                device: device.verifying_key(),
                signature,
            };
            fakes.insert(v, Fake { cipher, mask, keys });
        }
        let own = self.peer_keys(u);
        let (payload, graph, kb) = if self.active() {
            let mut entries: Vec<SignedKeys> = fakes.values().map(|f| f.keys).collect();
            let ClientPayload::SignedKeys(mine) = self.round1[u as usize - 1] else {
                unreachable!("active round 1 is signed")
            };
            entries.push(mine);
            entries.sort_unstable_by_key(|e| e.id);
            let kb = key_list_binding(&self.binding, &entries);
            let graph = Graph::for_members(
                entries.iter().map(|e| e.id).collect(),
                self.config.graph,
                &crypto::active_graph_seed(&self.config.session_id, &kb),
            );
            (ServerPayload::SignedKeyList { entries }, graph, kb)
        } else {
            let graph = self.config.validate()?;
            let peers = graph
                .neighbours(u)
                .into_iter()
                .map(|v| fakes[&v].keys.peer_keys())
                .collect();
            (ServerPayload::Keys { peers }, graph, self.binding)
        };
        let Some(ClientPayload::ShareKeys { shares }) = self.ask(u, payload, rng) else {
            return Ok(self.outcome(
                strategy,
                false,
                "the target refused the substituted keys".into(),
            ));
        };
        // Open every share the target sealed to a substituted key.
        let mut seed_shares = Vec::new();
        for s in &shares {
            let plain = crypto::open(
                &fakes[&s.peer].cipher,
                &own.cipher_pk,
                &kb,
                u,
                s.peer,
                &s.ciphertext,
            )?;
            seed_shares.push(SharePlaintext::from_bytes(&plain)?.self_mask);
        }
        let b_u = shamir::combine(&seed_shares, t)?;
        // Deliver shares from the fake neighbours, so the target masks with the fake mask keys.
        let neighbours = graph.neighbours(u);
        let mut delivered = Vec::new();
        for &v in &neighbours {
            let junk = |rng: &mut R| Share {
                x: u,
                y: std::array::from_fn(|_| rng.next_u64() % shamir::P),
            };
            let plaintext = SharePlaintext {
                sender: v,
                receiver: u,
                mask_key: junk(rng),
                self_mask: junk(rng),
            }
            .to_bytes();
            let ciphertext =
                crypto::seal(&fakes[&v].cipher, &own.cipher_pk, &kb, v, u, &plaintext)?;
            delivered.push(SealedShares {
                peer: v,
                ciphertext,
            });
        }
        let Some(ClientPayload::MaskedInput { packed }) =
            self.ask(u, ServerPayload::Shares { shares: delivered }, rng)
        else {
            return Ok(self.outcome(strategy, false, "the target sent no masked input".into()));
        };
        let mut pair_seeds = Vec::new();
        for &v in &neighbours {
            let seed = crypto::pair_mask_seed(&fakes[&v].mask, &own.mask_pk, &kb, v, u)?;
            pair_seeds.push((v, seed));
        }
        let recovered = self.unmask_target(u, &packed, &b_u, &pair_seeds)?;
        let detail = if recovered {
            "the target sealed its shares to the server's keys and masked with them".into()
        } else {
            "the unmasked vector is not the target's input".into()
        };
        Ok(self.outcome(strategy, recovered, detail))
    }
}

/// A valid round holding `target`, with one input per client.
fn check_round(config: &RoundConfig, inputs: &[Vec<u64>], target: ClientId) -> Result<Graph> {
    let graph = config.validate()?;
    if !graph.contains(target) {
        return Err(SecAggError::config(
            "target",
            target,
            format!("must be in 1..={}", config.clients),
        ));
    }
    if inputs.len() != config.clients as usize {
        return Err(SecAggError::config(
            "inputs",
            inputs.len(),
            format!("one per client ({})", config.clients),
        ));
    }
    Ok(graph)
}

/// The signed entries among round 1's payloads (active mode).
fn signed_entries(round1: &[ClientPayload]) -> Vec<SignedKeys> {
    round1
        .iter()
        .filter_map(|p| match p {
            ClientPayload::SignedKeys(k) => Some(*k),
            _ => None,
        })
        .collect()
}

/// The keys client `id` advertised in round 1 (`round1[id − 1]`), signed or not.
fn advertised_keys(round1: &[ClientPayload], id: ClientId) -> Option<PeerKeys> {
    match round1.get((id as usize).checked_sub(1)?)? {
        ClientPayload::AdvertiseKeys { cipher_pk, mask_pk } => Some(PeerKeys {
            id,
            cipher_pk: *cipher_pk,
            mask_pk: *mask_pk,
        }),
        ClientPayload::SignedKeys(k) => Some(k.peer_keys()),
        _ => None,
    }
}

/// For each client, the peers of the target it is told dropped: every `v ∈ P_u` must be named
/// dropped by `t` of the clients holding its shares, and a client `w` can name at most
/// `|held_w| − t` (it refuses a request that leaves it fewer than `t` surviving neighbours).
/// Greedy, scarcest peer first, holders with the most room first.
fn assign_drops(
    graph: &Graph,
    u: ClientId,
    peers_of_u: &[ClientId],
    held: &BTreeMap<ClientId, BTreeSet<ClientId>>,
    t: usize,
) -> std::result::Result<BTreeMap<ClientId, BTreeSet<ClientId>>, String> {
    let mut room: BTreeMap<ClientId, usize> = held
        .iter()
        .filter(|(w, _)| **w != u)
        .map(|(&w, h)| (w, h.len().saturating_sub(t)))
        .collect();
    let holders = |v: ClientId| -> Vec<ClientId> {
        graph
            .neighbours(v)
            .into_iter()
            .filter(|w| *w != u && held.get(w).is_some_and(|h| h.contains(&v)))
            .collect()
    };
    let mut order: Vec<ClientId> = peers_of_u.to_vec();
    order.sort_by_key(|&v| holders(v).len());
    let mut dropped: BTreeMap<ClientId, BTreeSet<ClientId>> = BTreeMap::new();
    for v in order {
        let mut candidates: Vec<ClientId> = holders(v)
            .into_iter()
            .filter(|w| room.get(w).copied().unwrap_or(0) > 0)
            .collect();
        candidates.sort_by_key(|w| std::cmp::Reverse(room[w]));
        if candidates.len() < t {
            return Err(format!(
                "no consistent set of stories: only {} holders of peer {v}'s shares can still be \
                 told it dropped, {t} needed",
                candidates.len()
            ));
        }
        for w in candidates.into_iter().take(t) {
            *room.get_mut(&w).expect("candidate has room") -= 1;
            dropped.entry(w).or_default().insert(v);
        }
    }
    Ok(dropped)
}
