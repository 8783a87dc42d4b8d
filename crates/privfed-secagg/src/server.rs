//! The server's state machine for one round.
//!
//! The server collects each stage's messages ([`Server::receive`]) until its coordinator closes
//! the stage ([`Server::close_stage`]) — when every expected client has answered or when the
//! stage's deadline passes; the state machine has no clock. Closing a stage fixes who is still in
//! the round:
//!
//! * U1: advertised keys; U2 ⊆ U1: sent shares; U3 ⊆ U2: sent masked input; responders ⊆ U3.
//! * U1 and U2 are *pruned*: a client with fewer than `t` neighbours left cannot have its secrets
//!   reconstructed, so it is dropped before anyone masks with it (repeatedly, until stable).
//! * After the masked inputs, every survivor and every dropped client of U2 must keep at least
//!   `t` neighbours in U3, or the round aborts; after unmasking, each needs `t` shares.
//!
//! The sum is `Σ_{u∈U3} y_u − Σ_{u∈U3} PRG(b_u) ∓ Σ_{v∈U2∖U3} Σ_{u∈U3∩N(v)} PRG(s_uv)`, mod 2^b:
//! the self-masks of survivors come off with their reconstructed seeds, the pairwise masks that
//! survivors shared with dropped clients with the dropped clients' reconstructed mask keys. The
//! whole state serializes ([`Server::to_bytes`]), so a coordinator can persist it and resume a
//! round after a restart.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use x25519_dalek::StaticSecret;

use crate::config::{ClientId, Graph, RoundConfig};
use crate::crypto;
use crate::error::{Result, SecAggError};
use crate::identity;
use crate::mask::{Sign, apply_mask};
use crate::messages::{
    ClientMessage, ClientPayload, Header, OwnedShare, PeerKeys, SealedShares, ServerMessage,
    ServerPayload, SharePlaintext, SignedKeys, Stage, SurvivorSignature, key_list_binding, unpack,
};
use crate::shamir::{self, Share};

/// The graph of an active round over U1, placed by the key-list binding.
fn active_graph(config: &RoundConfig, u1: &BTreeSet<ClientId>, keys_binding: &[u8; 32]) -> Graph {
    Graph::for_members(
        u1.iter().copied().collect(),
        config.graph,
        &crypto::active_graph_seed(&config.session_id, keys_binding),
    )
}

/// Where a round is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundStatus {
    /// Collecting the clients' messages of this stage.
    Collecting(Stage),
    /// The sum is known.
    Finished,
    /// The round stopped; the reason says why. Nothing about any input was revealed.
    Aborted(String),
}

/// What [`Server::receive`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// Recorded.
    Accepted,
    /// The same message had been recorded before (a retry); nothing changed.
    Duplicate,
}

/// The result of a finished round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Σ of the survivors' inputs, mod 2^bits.
    pub sum: Vec<u64>,
    /// The clients whose inputs are in the sum (U3), by increasing id.
    pub survivors: Vec<ClientId>,
    /// Clients that shared keys but sent no masked input (their masks were removed).
    pub dropped: Vec<ClientId>,
    /// Clients that sent a wrong Shamir share in the unmasking round, traced by
    /// [`shamir::decode`], by increasing id: their shares were excluded from every
    /// reconstruction and the sum is exact. Tracing `w` wrong shares of one secret needs
    /// `t + 2w` shares of it to arrive; with fewer the round aborts (`UntraceableShares`).
    #[serde(default)]
    pub rejected_shares: Vec<ClientId>,
}

#[derive(Clone, Serialize, Deserialize)]
struct UnmaskResponse {
    self_mask: Vec<OwnedShare>,
    mask_key: Vec<OwnedShare>,
}

#[derive(Clone, Serialize, Deserialize)]
struct State {
    config: RoundConfig,
    binding: [u8; 32],
    status: RoundStatus,
    keys: BTreeMap<ClientId, PeerKeys>,
    /// Active mode: the signed keys of round 1.
    signed: BTreeMap<ClientId, SignedKeys>,
    /// The binding of every key derivation: the round's, or the key-list binding once round 1
    /// is fixed in the active mode.
    keys_binding: [u8; 32],
    u1: BTreeSet<ClientId>,
    sealed: BTreeMap<ClientId, Vec<SealedShares>>,
    u2: BTreeSet<ClientId>,
    masked_sum: Vec<u64>,
    masked_from: BTreeSet<ClientId>,
    u3: BTreeSet<ClientId>,
    /// Active mode: the survivors' signatures on U3 (their signers are U4, who unmask).
    consistency: BTreeMap<ClientId, SurvivorSignature>,
    responses: BTreeMap<ClientId, UnmaskResponse>,
    digests: BTreeMap<(Stage, ClientId), [u8; 32]>,
    output: Option<Aggregate>,
}

impl State {
    /// A round with nothing received yet (and no accumulator).
    fn empty(config: RoundConfig, status: RoundStatus) -> Self {
        let binding = config.binding();
        State {
            binding,
            config,
            status,
            keys: BTreeMap::new(),
            signed: BTreeMap::new(),
            keys_binding: binding,
            u1: BTreeSet::new(),
            sealed: BTreeMap::new(),
            u2: BTreeSet::new(),
            masked_sum: Vec::new(),
            masked_from: BTreeSet::new(),
            u3: BTreeSet::new(),
            consistency: BTreeMap::new(),
            responses: BTreeMap::new(),
            digests: BTreeMap::new(),
            output: None,
        }
    }
}

/// The server's side of one round.
pub struct Server {
    state: State,
    graph: Graph,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("status", &self.state.status)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Opens a round with a validated configuration.
    pub fn new(config: RoundConfig) -> Result<Self> {
        let graph = config.validate()?;
        let dim = config.dim;
        let mut state = State::empty(config, RoundStatus::Collecting(Stage::AdvertiseKeys));
        state.masked_sum = vec![0; dim];
        Ok(Server { state, graph })
    }

    /// The round's configuration.
    pub fn config(&self) -> &RoundConfig {
        &self.state.config
    }

    /// Where the round is.
    pub fn status(&self) -> &RoundStatus {
        &self.state.status
    }

    /// The finished round's sum and who is in it.
    pub fn output(&self) -> Option<&Aggregate> {
        self.state.output.as_ref()
    }

    /// The serialized state (to persist between messages or across a restart).
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_allocvec(&self.state).expect("server state always serializes")
    }

    /// Restores a state written by [`Server::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let state: State = crate::messages::decode(bytes)?;
        let mut graph = state.config.validate()?;
        if state.config.threat_model.is_active() && !state.u1.is_empty() {
            graph = active_graph(&state.config, &state.u1, &state.keys_binding);
        }
        Ok(Server { state, graph })
    }

    fn active(&self) -> bool {
        self.state.config.threat_model.is_active()
    }

    /// The clients expected to send in the current stage (those of the previous stage), and
    /// those of them that have not sent yet.
    pub fn pending(&self) -> BTreeSet<ClientId> {
        let s = &self.state;
        match s.status {
            RoundStatus::Collecting(Stage::AdvertiseKeys) => (1..=s.config.clients)
                .filter(|id| !s.keys.contains_key(id))
                .collect(),
            RoundStatus::Collecting(Stage::ShareKeys) => {
                s.u1.iter()
                    .filter(|id| !s.sealed.contains_key(id))
                    .copied()
                    .collect()
            }
            RoundStatus::Collecting(Stage::MaskedInput) => {
                s.u2.difference(&s.masked_from).copied().collect()
            }
            RoundStatus::Collecting(Stage::ConsistencyCheck) => {
                s.u3.iter()
                    .filter(|id| !s.consistency.contains_key(id))
                    .copied()
                    .collect()
            }
            RoundStatus::Collecting(Stage::Unmasking) => self
                .unmaskers()
                .filter(|id| !s.responses.contains_key(id))
                .collect(),
            _ => BTreeSet::new(),
        }
    }

    /// Whether this exact message (same header binding, sender, stage and payload digest) was
    /// recorded before, in any stage, open or closed. A client whose message was recorded but
    /// whose acknowledgment was lost (a server crash) re-sends it; recognising it gives the
    /// client nothing it did not already have (its own message is in the round), while a
    /// different message, or one from a client never recorded for that stage, is not matched.
    pub fn already_received(&self, message: &ClientMessage) -> bool {
        if message.header.check(&self.state.binding).is_err() {
            return false;
        }
        let digest: [u8; 32] = Sha256::digest(crate::messages::encode(&message.payload)).into();
        self.state
            .digests
            .get(&(message.payload.stage(), message.header.client))
            == Some(&digest)
    }

    /// Records one client message of the current stage. A byte-identical repeat of a message
    /// recorded in the current stage is [`Receipt::Duplicate`] and changes nothing; a different
    /// message for the current stage is refused ([`SecAggError::Conflict`]), and so is every
    /// message for another stage ([`SecAggError::WrongStage`], or [`SecAggError::State`] once
    /// the round is over) — also a repeat of one recorded in a closed stage, so that a caller
    /// counting the answers to the current stage never counts an old message as one. A
    /// transport that must acknowledge such a repeat again (its first acknowledgment was lost)
    /// asks [`Server::already_received`] first.
    pub fn receive(&mut self, message: &ClientMessage) -> Result<Receipt> {
        message.header.check(&self.state.binding)?;
        let from = message.header.client;
        let RoundStatus::Collecting(stage) = self.state.status.clone() else {
            return Err(SecAggError::State(format!(
                "the round is over ({:?})",
                self.state.status
            )));
        };
        let got = message.payload.stage();
        if got != stage {
            return Err(SecAggError::WrongStage {
                expected: stage,
                got,
            });
        }
        let eligible = match stage {
            Stage::AdvertiseKeys => self.graph.contains(from),
            Stage::ShareKeys => self.state.u1.contains(&from),
            Stage::MaskedInput => self.state.u2.contains(&from),
            Stage::ConsistencyCheck => self.state.u3.contains(&from),
            Stage::Unmasking => self.unmaskers().any(|id| id == from),
        };
        if !eligible {
            return Err(SecAggError::UnexpectedParty {
                id: from,
                reason: format!("not a participant of stage {}", stage.name()),
            });
        }
        let digest: [u8; 32] = Sha256::digest(crate::messages::encode(&message.payload)).into();
        if let Some(prev) = self.state.digests.get(&(stage, from)) {
            return if *prev == digest {
                Ok(Receipt::Duplicate)
            } else {
                Err(SecAggError::Conflict(from))
            };
        }
        match &message.payload {
            ClientPayload::AdvertiseKeys { .. } | ClientPayload::SignedKeys(_)
                if matches!(message.payload, ClientPayload::SignedKeys(_)) != self.active() =>
            {
                return Err(SecAggError::Violation(format!(
                    "client {from} advertised {} keys in a round of the {} mode",
                    if self.active() { "unsigned" } else { "signed" },
                    self.state.config.threat_model.name()
                )));
            }
            ClientPayload::AdvertiseKeys { cipher_pk, mask_pk } => {
                self.check_new_keys(from, cipher_pk, mask_pk)?;
                self.state.keys.insert(
                    from,
                    PeerKeys {
                        id: from,
                        cipher_pk: *cipher_pk,
                        mask_pk: *mask_pk,
                    },
                );
            }
            ClientPayload::SignedKeys(k) => {
                if k.id != from {
                    return Err(SecAggError::Violation(format!(
                        "client {from} sent keys signed for id {}",
                        k.id
                    )));
                }
                self.check_new_keys(from, &k.cipher_pk, &k.mask_pk)?;
                let signed =
                    identity::keys_message(&self.state.binding, from, &k.cipher_pk, &k.mask_pk);
                if !identity::check(&k.device, &signed, &k.signature) {
                    return Err(SecAggError::Signature(format!(
                        "client {from}'s round keys are not signed by the device key it names"
                    )));
                }
                if self.state.signed.values().any(|o| o.device == k.device) {
                    return Err(SecAggError::Violation(format!(
                        "client {from}'s device key is already used by another client"
                    )));
                }
                self.state.keys.insert(from, k.peer_keys());
                self.state.signed.insert(from, *k);
            }
            ClientPayload::Consistency { signature } => {
                let u3: Vec<ClientId> = self.state.u3.iter().copied().collect();
                let message = identity::survivors_message(&self.state.keys_binding, &u3);
                if !identity::check(&self.state.signed[&from].device, &message, signature) {
                    return Err(SecAggError::Signature(format!(
                        "client {from}'s signature is not on this round's U3"
                    )));
                }
                self.state.consistency.insert(
                    from,
                    SurvivorSignature {
                        id: from,
                        signature: *signature,
                    },
                );
            }
            ClientPayload::ShareKeys { shares } => self.receive_shares(from, shares)?,
            ClientPayload::MaskedInput { packed } => {
                let values = unpack(packed, self.state.config.bits, self.state.config.dim)?;
                let m = crate::mask::modulus_mask(self.state.config.bits);
                for (acc, v) in self.state.masked_sum.iter_mut().zip(values) {
                    *acc = acc.wrapping_add(v) & m;
                }
                self.state.masked_from.insert(from);
            }
            ClientPayload::Unmasking {
                self_mask,
                mask_key,
            } => self.receive_unmasking(from, self_mask, mask_key)?,
        }
        self.state.digests.insert((stage, from), digest);
        Ok(Receipt::Accepted)
    }

    /// Refuses small-order keys and keys (compared canonically) that another client already
    /// advertised, before anyone relays them.
    fn check_new_keys(
        &self,
        from: ClientId,
        cipher_pk: &[u8; 32],
        mask_pk: &[u8; 32],
    ) -> Result<()> {
        let (c, m) = (
            crypto::canonical_public(cipher_pk),
            crypto::canonical_public(mask_pk),
        );
        if c == m {
            return Err(SecAggError::Violation(format!(
                "client {from}'s two public keys are the same"
            )));
        }
        if crypto::is_small_order(cipher_pk) || crypto::is_small_order(mask_pk) {
            return Err(SecAggError::Violation(format!(
                "client {from}'s public key has small order"
            )));
        }
        let clash = self.state.keys.values().any(|k| {
            let (kc, km) = (
                crypto::canonical_public(&k.cipher_pk),
                crypto::canonical_public(&k.mask_pk),
            );
            kc == c || kc == m || km == c || km == m
        });
        if clash {
            return Err(SecAggError::Violation(format!(
                "client {from}'s public keys repeat another client's"
            )));
        }
        Ok(())
    }

    /// Who answers the unmasking stage: U3, or in the active mode the survivors that signed U3.
    fn unmaskers(&self) -> impl Iterator<Item = ClientId> + '_ {
        let s = &self.state;
        let active = self.active();
        s.u3.iter()
            .copied()
            .filter(move |id| !active || s.consistency.contains_key(id))
    }

    fn receive_shares(&mut self, from: ClientId, shares: &[SealedShares]) -> Result<()> {
        let expected: BTreeSet<ClientId> = self.neighbours_in(from, &self.state.u1);
        let got: BTreeSet<ClientId> = shares.iter().map(|s| s.peer).collect();
        if got.len() != shares.len() || got != expected {
            return Err(SecAggError::Violation(format!(
                "client {from} must send exactly one ciphertext to each of its {} neighbours \
                 that advertised keys",
                expected.len()
            )));
        }
        let len = SharePlaintext::LEN + 16;
        if let Some(s) = shares.iter().find(|s| s.ciphertext.len() != len) {
            return Err(SecAggError::Malformed(format!(
                "ciphertext for client {} has {} bytes, expected {len}",
                s.peer,
                s.ciphertext.len()
            )));
        }
        let mut sorted = shares.to_vec();
        sorted.sort_unstable_by_key(|s| s.peer);
        self.state.sealed.insert(from, sorted);
        Ok(())
    }

    fn receive_unmasking(
        &mut self,
        from: ClientId,
        self_mask: &[OwnedShare],
        mask_key: &[OwnedShare],
    ) -> Result<()> {
        let (survivors, dropped) = self.unmask_lists(from);
        let expected_survivors: BTreeSet<ClientId> =
            survivors.into_iter().filter(|&v| v != from).collect();
        let got_s: BTreeSet<ClientId> = self_mask.iter().map(|s| s.owner).collect();
        let got_d: BTreeSet<ClientId> = mask_key.iter().map(|s| s.owner).collect();
        if got_s.len() != self_mask.len()
            || got_d.len() != mask_key.len()
            || got_s != expected_survivors
            || got_d != dropped.into_iter().collect()
        {
            return Err(SecAggError::Violation(format!(
                "client {from}'s unmasking shares do not match the request it was sent"
            )));
        }
        if let Some(s) = self_mask
            .iter()
            .chain(mask_key)
            .find(|s| s.share.x != from || s.share.y.iter().any(|&v| v >= shamir::P))
        {
            return Err(SecAggError::Violation(format!(
                "client {from} sent a malformed share of client {}",
                s.owner
            )));
        }
        self.state.responses.insert(
            from,
            UnmaskResponse {
                self_mask: self_mask.to_vec(),
                mask_key: mask_key.to_vec(),
            },
        );
        Ok(())
    }

    fn neighbours_in(&self, u: ClientId, set: &BTreeSet<ClientId>) -> BTreeSet<ClientId> {
        self.graph
            .neighbours(u)
            .into_iter()
            .filter(|v| set.contains(v))
            .collect()
    }

    /// Survivors (including `u`) and dropped clients among `u`'s neighbours in U2.
    fn unmask_lists(&self, u: ClientId) -> (Vec<ClientId>, Vec<ClientId>) {
        let s = &self.state;
        let mut survivors = vec![u];
        let mut dropped = Vec::new();
        for v in self.neighbours_in(u, &s.u2) {
            if s.u3.contains(&v) {
                survivors.push(v);
            } else {
                dropped.push(v);
            }
        }
        survivors.sort_unstable();
        (survivors, dropped)
    }

    /// Removes, until none is left, clients with fewer than `t` neighbours in the set.
    fn prune(&self, mut set: BTreeSet<ClientId>) -> BTreeSet<ClientId> {
        let t = self.state.config.threshold as usize;
        loop {
            let weak: Vec<ClientId> = set
                .iter()
                .copied()
                .filter(|&u| self.neighbours_in(u, &set).len() < t)
                .collect();
            if weak.is_empty() {
                return set;
            }
            for u in weak {
                set.remove(&u);
            }
        }
    }

    /// The message client `id` needs to answer the current stage, or an error if it is not part
    /// of it.
    pub fn message_for(&self, id: ClientId) -> Result<ServerMessage> {
        let s = &self.state;
        let payload = match s.status {
            RoundStatus::Collecting(Stage::ShareKeys) if s.u1.contains(&id) && self.active() => {
                ServerPayload::SignedKeyList {
                    entries: s.u1.iter().map(|v| s.signed[v]).collect(),
                }
            }
            RoundStatus::Collecting(Stage::ShareKeys) if s.u1.contains(&id) => {
                ServerPayload::Keys {
                    peers: self
                        .neighbours_in(id, &s.u1)
                        .into_iter()
                        .map(|v| s.keys[&v])
                        .collect(),
                }
            }
            RoundStatus::Collecting(Stage::MaskedInput) if s.u2.contains(&id) => {
                ServerPayload::Shares {
                    shares: self
                        .neighbours_in(id, &s.u2)
                        .into_iter()
                        .map(|v| {
                            let from_v = &s.sealed[&v];
                            let at = from_v
                                .binary_search_by_key(&id, |c| c.peer)
                                .expect("validated: one ciphertext per neighbour in U1");
                            let sealed = &from_v[at];
                            SealedShares {
                                peer: v,
                                ciphertext: sealed.ciphertext.clone(),
                            }
                        })
                        .collect(),
                }
            }
            RoundStatus::Collecting(Stage::ConsistencyCheck) if s.u3.contains(&id) => {
                ServerPayload::Survivors {
                    u3: s.u3.iter().copied().collect(),
                }
            }
            RoundStatus::Collecting(Stage::Unmasking)
                if self.active() && s.consistency.contains_key(&id) =>
            {
                ServerPayload::SignedSurvivors {
                    signatures: s
                        .consistency
                        .values()
                        .filter(|sig| self.graph.are_neighbours(id, sig.id))
                        .copied()
                        .collect(),
                }
            }
            RoundStatus::Collecting(Stage::Unmasking) if !self.active() && s.u3.contains(&id) => {
                let (survivors, dropped) = self.unmask_lists(id);
                ServerPayload::Unmask { survivors, dropped }
            }
            _ => {
                return Err(SecAggError::UnexpectedParty {
                    id,
                    reason: format!("has no part in the round's current state ({:?})", s.status),
                });
            }
        };
        Ok(ServerMessage {
            header: Header::new(s.binding, id),
            payload,
        })
    }

    /// Closes the current stage (all expected clients answered, or its deadline passed) and
    /// returns the new status. Too few clients left aborts the round.
    pub fn close_stage(&mut self) -> Result<&RoundStatus> {
        let RoundStatus::Collecting(stage) = self.state.status.clone() else {
            return Err(SecAggError::State(format!(
                "the round is over ({:?})",
                self.state.status
            )));
        };
        let t = self.state.config.threshold as usize;
        let next = match stage {
            Stage::AdvertiseKeys if self.active() => {
                // Everyone who advertised signed keys is in U1; the graph is derived over U1
                // from the whole key list, so it is regular and nobody needs pruning.
                let u1: BTreeSet<ClientId> = self.state.signed.keys().copied().collect();
                if let Some(reason) = self.too_few(u1.len(), "clients advertised keys") {
                    return Ok(self.abort(reason));
                }
                let entries: Vec<SignedKeys> = self.state.signed.values().copied().collect();
                self.state.keys_binding = key_list_binding(&self.state.binding, &entries);
                self.graph = active_graph(&self.state.config, &u1, &self.state.keys_binding);
                self.state.u1 = u1;
                RoundStatus::Collecting(Stage::ShareKeys)
            }
            Stage::AdvertiseKeys => {
                let u1 = self.prune(self.state.keys.keys().copied().collect());
                if let Some(reason) = self.too_few(u1.len(), "clients advertised keys") {
                    return Ok(self.abort(reason));
                }
                self.state.u1 = u1;
                RoundStatus::Collecting(Stage::ShareKeys)
            }
            Stage::ShareKeys => {
                let u2 = self.prune(self.state.sealed.keys().copied().collect());
                if let Some(reason) = self.too_few(u2.len(), "clients shared keys") {
                    return Ok(self.abort(reason));
                }
                self.state.u2 = u2;
                RoundStatus::Collecting(Stage::MaskedInput)
            }
            Stage::MaskedInput => {
                self.state.u3 = self.state.masked_from.clone();
                if let Some(reason) = self.too_few(self.state.u3.len(), "clients sent masked input")
                {
                    return Ok(self.abort(reason));
                }
                if let Some(u) = self
                    .state
                    .u2
                    .iter()
                    .find(|&&u| self.neighbours_in(u, &self.state.u3).len() < t)
                {
                    let reason =
                        format!("client {u} has fewer than {t} neighbours left to hold its shares");
                    return Ok(self.abort(reason));
                }
                if self.active() {
                    RoundStatus::Collecting(Stage::ConsistencyCheck)
                } else {
                    RoundStatus::Collecting(Stage::Unmasking)
                }
            }
            Stage::ConsistencyCheck => {
                let u4: BTreeSet<ClientId> = self.state.consistency.keys().copied().collect();
                if let Some(reason) = self.too_few(u4.len(), "survivors signed U3") {
                    return Ok(self.abort(reason));
                }
                if let Some(u) = self
                    .state
                    .u2
                    .iter()
                    .find(|&&u| self.neighbours_in(u, &u4).len() < t)
                {
                    let reason = format!(
                        "client {u} has fewer than {t} neighbours left that signed U3 to hold \
                         its shares"
                    );
                    return Ok(self.abort(reason));
                }
                RoundStatus::Collecting(Stage::Unmasking)
            }
            Stage::Unmasking => match self.unmask() {
                Ok(aggregate) => {
                    self.state.output = Some(aggregate);
                    RoundStatus::Finished
                }
                Err(SecAggError::Aborted(reason)) => return Ok(self.abort(reason)),
                Err(e) => return Ok(self.abort(e.to_string())),
            },
        };
        self.state.status = next;
        Ok(&self.state.status)
    }

    /// Why the round cannot go on with `count` clients, if it cannot: a sum needs more than `t`
    /// of them.
    fn too_few(&self, count: usize, what: &str) -> Option<String> {
        let t = self.state.config.threshold as usize;
        (count < t + 1).then(|| format!("{count} {what}, at least {} needed", t + 1))
    }

    fn abort(&mut self, reason: String) -> &RoundStatus {
        // Drop everything that came from clients; keep only why.
        self.state = State::empty(self.state.config.clone(), RoundStatus::Aborted(reason));
        &self.state.status
    }

    fn unmask(&self) -> Result<Aggregate> {
        let s = &self.state;
        let t = s.config.threshold as usize;
        let bits = s.config.bits;
        let mut self_shares: BTreeMap<ClientId, Vec<Share>> = BTreeMap::new();
        let mut key_shares: BTreeMap<ClientId, Vec<Share>> = BTreeMap::new();
        for r in s.responses.values() {
            for o in &r.self_mask {
                self_shares
                    .entry(o.owner)
                    .or_default()
                    .push(o.share.clone());
            }
            for o in &r.mask_key {
                key_shares.entry(o.owner).or_default().push(o.share.clone());
            }
        }
        let dropped: Vec<ClientId> = s.u2.difference(&s.u3).copied().collect();
        let mut sum = s.masked_sum.clone();
        let mut rejected = BTreeSet::new();
        for &u in &s.u3 {
            let shares = self_shares.remove(&u).unwrap_or_default();
            let seed = reconstruct(shares, t, &mut rejected, || {
                format!("client {u}'s self-mask")
            })?;
            apply_mask(&mut sum, &seed, bits, Sign::Subtract);
        }
        for &v in &dropped {
            let shares = key_shares.remove(&v).unwrap_or_default();
            let secret = StaticSecret::from(*reconstruct(shares, t, &mut rejected, || {
                format!("dropped client {v}'s mask key")
            })?);
            for u in self.neighbours_in(v, &s.u3) {
                let seed =
                    crypto::pair_mask_seed(&secret, &s.keys[&u].mask_pk, &s.keys_binding, v, u)?;
                // u added the mask if u < v and subtracted it otherwise; undo that.
                let sign = if u < v { Sign::Subtract } else { Sign::Add };
                apply_mask(&mut sum, &seed, bits, sign);
            }
        }
        Ok(Aggregate {
            sum,
            survivors: s.u3.iter().copied().collect(),
            dropped,
            rejected_shares: rejected.into_iter().collect(),
        })
    }
}

/// One secret from its shares by [`shamir::decode`]: shares of senders already found wrong
/// (on another secret) are left out first, so a liar costs at most one decoding, and the
/// senders found wrong here join `rejected`. Fewer than `t` shares left: `Aborted`; wrong
/// shares beyond what the extra shares trace: `UntraceableShares`.
fn reconstruct(
    shares: Vec<Share>,
    t: usize,
    rejected: &mut BTreeSet<ClientId>,
    what: impl Fn() -> String,
) -> Result<zeroize::Zeroizing<[u8; 32]>> {
    let shares: Vec<Share> = shares
        .into_iter()
        .filter(|s| !rejected.contains(&s.x))
        .collect();
    if shares.len() < t {
        return Err(SecAggError::Aborted(format!(
            "{} shares of {} arrived from senders not found wrong, the threshold is {t}",
            shares.len(),
            what()
        )));
    }
    let decoded = shamir::decode(&shares, t).map_err(|e| match e {
        SecAggError::UntraceableShares(why) => {
            SecAggError::UntraceableShares(format!("{}: {why}", what()))
        }
        other => other,
    })?;
    rejected.extend(decoded.rejected.iter().copied());
    Ok(decoded.secret)
}
