//! The client's state machine.
//!
//! ```text
//! new ──AdvertiseKeys──▶ Advertised ──on_keys──▶ Shared ──on_shares──▶ Masked ──on_unmask──▶ Done
//!                                                      active mode: Masked ──on_survivors──▶ Signed ──on_unmask──▶ Done
//!                                 any fatal error (see SecAggError::is_fatal) ──▶ Aborted
//! ```
//!
//! Secrets (both X25519 secret keys, the self-mask seed, the shares received) live only in the
//! state that needs them and are zeroized when it is left. A client answers one unmasking
//! request at most and never reveals both the self-mask share and the key share of one peer.
//!
//! * **Honest-but-curious mode**: the client checks the unmasking request against what it saw —
//!   survivors and dropped disjoint, together exactly the neighbours it received shares from
//!   (plus itself among the survivors), at least the threshold surviving. These checks are local:
//!   a server that tells different clients different stories passes all of them and can recover
//!   an input (the neighbour-share attack in [`crate::adversary`]).
//! * **Active mode** ([`Client::new_active`]): the client signs its round keys with its device
//!   key; it accepts only the whole key list of round 1, every entry signed (and enrolled, when
//!   the round names a roster), derives its neighbours and the key-list binding itself; it signs
//!   the survivor set U3 only if every neighbour in U3 masked with it; and it unmasks only with
//!   `t` valid signatures of its neighbours on that same U3, deriving survivors (N(u) ∩ U3) and
//!   dropped clients (the share senders not in U3) itself.

use std::collections::{BTreeMap, BTreeSet};

use rand::{CryptoRng, Rng};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::config::{ClientId, Graph, RoundConfig, ThreatModel};
use crate::crypto;
use crate::error::{Result, SecAggError};
use crate::identity::{self, Credentials};
use crate::mask::{Sign, apply_mask, modulus_mask};
use crate::messages::{
    ClientMessage, ClientPayload, Header, OwnedShare, PeerKeys, SealedShares, ServerMessage,
    ServerPayload, SharePlaintext, SignedKeys, Stage, SurvivorSignature, decode, key_list_binding,
    max_server_message_len, pack,
};
use crate::policy::ClientPolicy;
use crate::shamir::{self, Share};

/// Shares a client received from one neighbour.
struct Received {
    mask_key: Share,
    self_mask: Share,
}

enum State {
    Advertised {
        cipher_sk: StaticSecret,
        mask_sk: StaticSecret,
    },
    Shared {
        cipher_sk: StaticSecret,
        mask_sk: StaticSecret,
        self_seed: Zeroizing<[u8; 32]>,
        peers: BTreeMap<ClientId, PeerKeys>,
    },
    Masked {
        received: BTreeMap<ClientId, Received>,
    },
    Signed {
        received: BTreeMap<ClientId, Received>,
        u3: Vec<ClientId>,
    },
    Done,
    Aborted,
}

/// One client's side of one round.
pub struct Client {
    config: RoundConfig,
    graph: Graph,
    binding: [u8; 32],
    /// The binding every key derivation uses: the round's binding, or in the active mode the
    /// key-list binding once round 1's list is known.
    derive_binding: [u8; 32],
    id: ClientId,
    state: State,
    /// Active mode: the device key and roster.
    credentials: Option<Credentials>,
    /// Active mode: the device key of each client of U1.
    devices: BTreeMap<ClientId, [u8; 32]>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("stage", &self.next_stage())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Joins the round as client `id` under the default [`ClientPolicy`]: generates both key
    /// pairs and returns the message that advertises their public halves.
    pub fn new<R: Rng + CryptoRng + ?Sized>(
        config: RoundConfig,
        id: ClientId,
        rng: &mut R,
    ) -> Result<(Self, ClientMessage)> {
        Self::new_with_policy(config, id, &ClientPolicy::default(), rng)
    }

    /// [`Client::new`] under `policy`: a round the policy refuses is
    /// [`SecAggError::Refused`] before any key is made or any message sent.
    pub fn new_with_policy<R: Rng + CryptoRng + ?Sized>(
        config: RoundConfig,
        id: ClientId,
        policy: &ClientPolicy,
        rng: &mut R,
    ) -> Result<(Self, ClientMessage)> {
        if config.threat_model.is_active() {
            return Err(SecAggError::Policy(
                "the round is in the active mode: join it with Client::new_active and the \
                 device's credentials"
                    .into(),
            ));
        }
        Self::join(config, id, None, policy, rng)
    }

    /// Joins an active-mode round as client `id` with the device's `credentials`: generates
    /// both key pairs and returns the message that advertises them, signed by the device key.
    /// The round must be in the active mode, and name the credentials' roster (or none, when the
    /// credentials have none).
    /// The default [`ClientPolicy`] applies.
    pub fn new_active<R: Rng + CryptoRng + ?Sized>(
        config: RoundConfig,
        id: ClientId,
        credentials: Credentials,
        rng: &mut R,
    ) -> Result<(Self, ClientMessage)> {
        Self::new_active_with_policy(config, id, credentials, &ClientPolicy::default(), rng)
    }

    /// [`Client::new_active`] under `policy` (checked before any key is made or message sent).
    pub fn new_active_with_policy<R: Rng + CryptoRng + ?Sized>(
        config: RoundConfig,
        id: ClientId,
        credentials: Credentials,
        policy: &ClientPolicy,
        rng: &mut R,
    ) -> Result<(Self, ClientMessage)> {
        let ThreatModel::Active { roster } = config.threat_model else {
            return Err(SecAggError::Policy(
                "the round is honest-but-curious; a client with credentials expects the active \
                 mode"
                    .into(),
            ));
        };
        match (roster, &credentials.roster) {
            (Some(want), Some(have)) if want == have.digest() => {}
            (None, None) => {}
            (Some(_), None) => {
                return Err(SecAggError::Policy(
                    "the round names a roster and this device has none".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(SecAggError::Policy(
                    "the round names no roster, so anyone could join it; this device has a \
                     roster and refuses"
                        .into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(SecAggError::Policy(
                    "the round names another roster than the one this device trusts".into(),
                ));
            }
        }
        if let Some(r) = &credentials.roster
            && !r.contains(&credentials.device.verifying_key())
        {
            return Err(SecAggError::Policy(
                "this device is not on the roster".into(),
            ));
        }
        Self::join(config, id, Some(credentials), policy, rng)
    }

    fn join<R: Rng + CryptoRng + ?Sized>(
        config: RoundConfig,
        id: ClientId,
        credentials: Option<Credentials>,
        policy: &ClientPolicy,
        rng: &mut R,
    ) -> Result<(Self, ClientMessage)> {
        let graph = config.validate()?;
        policy.check(&config)?;
        if !graph.contains(id) {
            return Err(SecAggError::config(
                "id",
                id,
                format!("must be in 1..={}", config.clients),
            ));
        }
        let binding = config.binding();
        let cipher_sk = StaticSecret::random_from_rng(rng);
        let mask_sk = StaticSecret::random_from_rng(rng);
        let cipher_pk = PublicKey::from(&cipher_sk).to_bytes();
        let mask_pk = PublicKey::from(&mask_sk).to_bytes();
        let payload = match &credentials {
            None => ClientPayload::AdvertiseKeys { cipher_pk, mask_pk },
            Some(c) => ClientPayload::SignedKeys(SignedKeys {
                id,
                cipher_pk,
                mask_pk,
                device: c.device.verifying_key(),
                signature: identity::sign(
                    &c.device,
                    &identity::keys_message(&binding, id, &cipher_pk, &mask_pk),
                ),
            }),
        };
        let message = ClientMessage {
            header: Header::new(binding, id),
            payload,
        };
        let client = Client {
            config,
            graph,
            binding,
            derive_binding: binding,
            id,
            state: State::Advertised { cipher_sk, mask_sk },
            credentials,
            devices: BTreeMap::new(),
        };
        Ok((client, message))
    }

    /// This client's id.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The round's configuration.
    pub fn config(&self) -> &RoundConfig {
        &self.config
    }

    /// The stage whose server message the client waits for, or `None` when it is finished or
    /// aborted.
    pub fn next_stage(&self) -> Option<Stage> {
        match self.state {
            State::Advertised { .. } => Some(Stage::ShareKeys),
            State::Shared { .. } => Some(Stage::MaskedInput),
            State::Masked { .. } if self.credentials.is_some() => Some(Stage::ConsistencyCheck),
            State::Masked { .. } | State::Signed { .. } => Some(Stage::Unmasking),
            State::Done | State::Aborted => None,
        }
    }

    /// Whether the client aborted the round (and dropped its secrets).
    pub fn is_aborted(&self) -> bool {
        matches!(self.state, State::Aborted)
    }

    /// The largest server message this client accepts now: the longest an honest server sends
    /// for the stage it waits for ([`max_server_message_len`]), or 0 when it waits for none.
    pub fn max_message_len(&self) -> usize {
        self.next_stage()
            .map_or(0, |stage| max_server_message_len(&self.config, stage))
    }

    /// [`Client::handle`] for an encoded message: a message longer than
    /// [`Client::max_message_len`] is refused ([`SecAggError::TooLarge`], which aborts) before
    /// it is decoded.
    pub fn handle_bytes<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        bytes: &[u8],
        input: &[u64],
        rng: &mut R,
    ) -> Result<ClientMessage> {
        if let Some(stage) = self.next_stage() {
            let cap = max_server_message_len(&self.config, stage);
            if bytes.len() > cap {
                self.state = State::Aborted;
                return Err(SecAggError::TooLarge {
                    stage,
                    len: bytes.len() as u64,
                    cap: cap as u64,
                });
            }
        }
        let message = decode::<ServerMessage>(bytes)?;
        self.handle(&message, input, rng)
    }

    /// Handles the server's message for the next stage and returns the client's answer. The
    /// `input` (the client's vector in Z_{2^b}^d) is used by the masked-input stage only.
    /// A fatal error aborts the client (see [`SecAggError::is_fatal`]).
    pub fn handle<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        message: &ServerMessage,
        input: &[u64],
        rng: &mut R,
    ) -> Result<ClientMessage> {
        let result = self.dispatch(message, input, rng);
        if let Err(e) = &result
            && e.is_fatal()
        {
            self.state = State::Aborted;
        }
        result
    }

    fn dispatch<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        message: &ServerMessage,
        input: &[u64],
        rng: &mut R,
    ) -> Result<ClientMessage> {
        message.header.check(&self.binding)?;
        if message.header.client != self.id {
            return Err(SecAggError::UnexpectedParty {
                id: message.header.client,
                reason: format!("message is for another client (this is {})", self.id),
            });
        }
        let Some(expected) = self.next_stage() else {
            return Err(SecAggError::State(
                "the client has finished or aborted this round".into(),
            ));
        };
        let got = message.payload.stage();
        if got != expected {
            return Err(SecAggError::WrongStage { expected, got });
        }
        let active = self.credentials.is_some();
        let payload = match &message.payload {
            ServerPayload::Keys { peers } if !active => self.on_keys(peers, rng)?,
            ServerPayload::SignedKeyList { entries } if active => {
                let peers = self.on_key_list(entries)?;
                self.on_keys(&peers, rng)?
            }
            ServerPayload::Shares { shares } => self.on_shares(shares, input)?,
            ServerPayload::Unmask { survivors, dropped } if !active => {
                self.on_unmask(survivors, dropped)?
            }
            ServerPayload::Survivors { u3 } if active => self.on_survivors(u3)?,
            ServerPayload::SignedSurvivors { signatures } if active => {
                self.on_signed_survivors(signatures)?
            }
            _ => {
                return Err(SecAggError::Violation(format!(
                    "a {} message in a round of the {} mode",
                    match message.payload {
                        ServerPayload::Keys { .. } | ServerPayload::Unmask { .. } => {
                            "honest-but-curious"
                        }
                        _ => "active-mode",
                    },
                    self.config.threat_model.name()
                )));
            }
        };
        Ok(ClientMessage {
            header: Header::new(self.binding, self.id),
            payload,
        })
    }

    fn on_keys<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        peers: &[PeerKeys],
        rng: &mut R,
    ) -> Result<ClientPayload> {
        let State::Advertised { cipher_sk, mask_sk } = &self.state else {
            unreachable!("stage checked by dispatch");
        };
        let own_cipher = PublicKey::from(cipher_sk).to_bytes();
        let own_mask = PublicKey::from(mask_sk).to_bytes();
        let mut seen_keys: BTreeSet<[u8; 32]> = [
            crypto::canonical_public(&own_cipher),
            crypto::canonical_public(&own_mask),
        ]
        .into();
        let mut table = BTreeMap::new();
        for p in peers {
            if !self.graph.are_neighbours(self.id, p.id) {
                return Err(SecAggError::UnexpectedParty {
                    id: p.id,
                    reason: "not a neighbour of this client".into(),
                });
            }
            if !seen_keys.insert(crypto::canonical_public(&p.cipher_pk))
                || !seen_keys.insert(crypto::canonical_public(&p.mask_pk))
            {
                return Err(SecAggError::Violation(format!(
                    "client {}'s public keys repeat a key already seen",
                    p.id
                )));
            }
            if table.insert(p.id, *p).is_some() {
                return Err(SecAggError::Violation(format!(
                    "client {} listed twice",
                    p.id
                )));
            }
        }
        self.require_threshold(table.len(), "neighbours advertised keys")?;
        let mut self_seed = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(self_seed.as_mut());
        let xs: Vec<ClientId> = table.keys().copied().collect();
        let t = self.config.threshold as usize;
        let key_bytes = Zeroizing::new(mask_sk.to_bytes());
        let key_shares = shamir::split(&key_bytes, t, &xs, rng)?;
        let seed_shares = shamir::split(&self_seed, t, &xs, rng)?;
        let mut sealed = Vec::with_capacity(xs.len());
        for ((peer, key_share), seed_share) in table.values().zip(key_shares).zip(seed_shares) {
            let plaintext = SharePlaintext {
                sender: self.id,
                receiver: peer.id,
                mask_key: key_share,
                self_mask: seed_share,
            }
            .to_bytes();
            let ciphertext = crypto::seal(
                cipher_sk,
                &peer.cipher_pk,
                &self.derive_binding,
                self.id,
                peer.id,
                &plaintext,
            )?;
            sealed.push(SealedShares {
                peer: peer.id,
                ciphertext,
            });
        }
        let State::Advertised { cipher_sk, mask_sk } =
            std::mem::replace(&mut self.state, State::Aborted)
        else {
            unreachable!()
        };
        self.state = State::Shared {
            cipher_sk,
            mask_sk,
            self_seed,
            peers: table,
        };
        Ok(ClientPayload::ShareKeys { shares: sealed })
    }

    fn on_shares(&mut self, shares: &[SealedShares], input: &[u64]) -> Result<ClientPayload> {
        if input.len() != self.config.dim {
            return Err(SecAggError::Input(format!(
                "the input has {} coordinates, the round sums {}",
                input.len(),
                self.config.dim
            )));
        }
        let m = modulus_mask(self.config.bits);
        if let Some(i) = input.iter().position(|&v| v > m) {
            return Err(SecAggError::Input(format!(
                "coordinate {i} is {}, outside Z_2^{}",
                input[i], self.config.bits
            )));
        }
        let State::Shared {
            cipher_sk,
            mask_sk,
            self_seed,
            peers,
        } = &self.state
        else {
            unreachable!("stage checked by dispatch");
        };
        let mut received = BTreeMap::new();
        for s in shares {
            let Some(peer) = peers.get(&s.peer) else {
                return Err(SecAggError::UnexpectedParty {
                    id: s.peer,
                    reason: "shares from a client whose keys this client was not given".into(),
                });
            };
            let plain = crypto::open(
                cipher_sk,
                &peer.cipher_pk,
                &self.derive_binding,
                s.peer,
                self.id,
                &s.ciphertext,
            )?;
            let p = SharePlaintext::from_bytes(&plain)?;
            if p.sender != s.peer || p.receiver != self.id {
                return Err(SecAggError::Violation(format!(
                    "sealed shares name {} → {}, delivered as {} → {}",
                    p.sender, p.receiver, s.peer, self.id
                )));
            }
            if received
                .insert(
                    s.peer,
                    Received {
                        mask_key: p.mask_key,
                        self_mask: p.self_mask,
                    },
                )
                .is_some()
            {
                return Err(SecAggError::Violation(format!(
                    "shares from client {} delivered twice",
                    s.peer
                )));
            }
        }
        self.require_threshold(received.len(), "neighbours sent shares")?;
        let bits = self.config.bits;
        let mut masked = input.to_vec();
        apply_mask(&mut masked, self_seed, bits, Sign::Add);
        for &v in received.keys() {
            let seed = crypto::pair_mask_seed(
                mask_sk,
                &peers[&v].mask_pk,
                &self.derive_binding,
                self.id,
                v,
            )?;
            let sign = if self.id < v {
                Sign::Add
            } else {
                Sign::Subtract
            };
            apply_mask(&mut masked, &seed, bits, sign);
        }
        debug_assert!(masked.iter().all(|&v| v <= m));
        let packed = pack(&masked, bits);
        self.state = State::Masked { received };
        Ok(ClientPayload::MaskedInput { packed })
    }

    fn on_unmask(&mut self, survivors: &[ClientId], dropped: &[ClientId]) -> Result<ClientPayload> {
        let State::Masked { received } = &self.state else {
            unreachable!("stage checked by dispatch");
        };
        let alive: BTreeSet<ClientId> = survivors.iter().copied().collect();
        let gone: BTreeSet<ClientId> = dropped.iter().copied().collect();
        if alive.len() != survivors.len() || gone.len() != dropped.len() {
            return Err(SecAggError::InconsistentRequest(
                "a client is listed twice".into(),
            ));
        }
        if let Some(v) = alive.intersection(&gone).next() {
            return Err(SecAggError::InconsistentRequest(format!(
                "client {v} is listed both as survivor and as dropped"
            )));
        }
        if !alive.contains(&self.id) {
            return Err(SecAggError::InconsistentRequest(
                "this client is not listed among the survivors".into(),
            ));
        }
        let mut expected: BTreeSet<ClientId> = received.keys().copied().collect();
        expected.insert(self.id);
        let listed: BTreeSet<ClientId> = alive.union(&gone).copied().collect();
        if listed != expected {
            return Err(SecAggError::InconsistentRequest(
                "survivors and dropped are not exactly the neighbours this client exchanged \
                 shares with"
                    .into(),
            ));
        }
        // The survivors other than this client must reach the threshold, or the sum would
        // expose too few inputs.
        if alive.len() - 1 < self.config.threshold as usize {
            return Err(SecAggError::Aborted(format!(
                "{} neighbours survived, the threshold is {}",
                alive.len() - 1,
                self.config.threshold
            )));
        }
        let self_mask = alive
            .iter()
            .filter(|&&v| v != self.id)
            .map(|&v| OwnedShare {
                owner: v,
                share: received[&v].self_mask.clone(),
            })
            .collect();
        let mask_key = gone
            .iter()
            .map(|&v| OwnedShare {
                owner: v,
                share: received[&v].mask_key.clone(),
            })
            .collect();
        self.state = State::Done;
        Ok(ClientPayload::Unmasking {
            self_mask,
            mask_key,
        })
    }

    /// Active mode, round 1's outcome: checks the whole signed key list, derives the graph over
    /// U1 and the key-list binding, and returns the neighbours' keys.
    fn on_key_list(&mut self, entries: &[SignedKeys]) -> Result<Vec<PeerKeys>> {
        let State::Advertised { cipher_sk, mask_sk } = &self.state else {
            unreachable!("stage checked by dispatch");
        };
        let credentials = self.credentials.as_ref().expect("active mode");
        if !entries.windows(2).all(|w| w[0].id < w[1].id) {
            return Err(SecAggError::Inconsistent(
                "the key list is not in increasing id order without repeats".into(),
            ));
        }
        let own = entries.iter().find(|e| e.id == self.id).ok_or_else(|| {
            SecAggError::Inconsistent("the key list leaves this client out".into())
        })?;
        if own.cipher_pk != PublicKey::from(cipher_sk).to_bytes()
            || own.mask_pk != PublicKey::from(mask_sk).to_bytes()
            || own.device != credentials.device.verifying_key()
        {
            return Err(SecAggError::Inconsistent(
                "the key list carries other keys under this client's id".into(),
            ));
        }
        let mut devices = BTreeMap::new();
        let mut seen_devices = BTreeSet::new();
        for e in entries {
            if !(1..=self.config.clients).contains(&e.id) {
                return Err(SecAggError::UnexpectedParty {
                    id: e.id,
                    reason: format!("ids are 1..={}", self.config.clients),
                });
            }
            if let Some(r) = &credentials.roster
                && !r.contains(&e.device)
            {
                return Err(SecAggError::Signature(format!(
                    "client {}'s device is not on the roster",
                    e.id
                )));
            }
            if !identity::check(
                &e.device,
                &identity::keys_message(&self.binding, e.id, &e.cipher_pk, &e.mask_pk),
                &e.signature,
            ) {
                return Err(SecAggError::Signature(format!(
                    "client {}'s round keys are not signed by its device key",
                    e.id
                )));
            }
            if !seen_devices.insert(e.device) {
                return Err(SecAggError::Violation(format!(
                    "client {}'s device key is used by another client of the round",
                    e.id
                )));
            }
            devices.insert(e.id, e.device);
        }
        let t = self.config.threshold as usize;
        if entries.len() < t + 1 {
            return Err(SecAggError::Aborted(format!(
                "{} clients advertised keys, at least {} needed",
                entries.len(),
                t + 1
            )));
        }
        let keys_binding = key_list_binding(&self.binding, entries);
        self.graph = Graph::for_members(
            entries.iter().map(|e| e.id).collect(),
            self.config.graph,
            &crypto::active_graph_seed(&self.config.session_id, &keys_binding),
        );
        self.derive_binding = keys_binding;
        self.devices = devices;
        Ok(entries
            .iter()
            .filter(|e| self.graph.are_neighbours(self.id, e.id))
            .map(SignedKeys::peer_keys)
            .collect())
    }

    /// Active mode, the consistency check: signs U3 if it is well formed, holds this client,
    /// and every neighbour in it masked with this client.
    fn on_survivors(&mut self, u3: &[ClientId]) -> Result<ClientPayload> {
        let State::Masked { received } = &self.state else {
            unreachable!("stage checked by dispatch");
        };
        if !u3.windows(2).all(|w| w[0] < w[1]) {
            return Err(SecAggError::Inconsistent(
                "U3 is not in increasing id order without repeats".into(),
            ));
        }
        if let Some(&v) = u3.iter().find(|&&v| !self.graph.contains(v)) {
            return Err(SecAggError::Inconsistent(format!(
                "U3 lists client {v}, which did not advertise keys"
            )));
        }
        if u3.binary_search(&self.id).is_err() {
            return Err(SecAggError::Inconsistent(
                "U3 leaves out this client, which sent its masked input".into(),
            ));
        }
        let t = self.config.threshold as usize;
        if u3.len() < t + 1 {
            return Err(SecAggError::Aborted(format!(
                "{} clients in U3, at least {} needed",
                u3.len(),
                t + 1
            )));
        }
        let alive: Vec<ClientId> = self
            .graph
            .neighbours(self.id)
            .into_iter()
            .filter(|v| u3.binary_search(v).is_ok())
            .collect();
        if let Some(v) = alive.iter().find(|v| !received.contains_key(v)) {
            return Err(SecAggError::Inconsistent(format!(
                "U3 lists neighbour {v}, whose shares this client never received (it did not \
                 mask with it)"
            )));
        }
        self.require_threshold(alive.len(), "neighbours are in U3")?;
        let credentials = self.credentials.as_ref().expect("active mode");
        let signature = identity::sign(
            &credentials.device,
            &identity::survivors_message(&self.derive_binding, u3),
        );
        let State::Masked { received } = std::mem::replace(&mut self.state, State::Aborted) else {
            unreachable!()
        };
        self.state = State::Signed {
            received,
            u3: u3.to_vec(),
        };
        Ok(ClientPayload::Consistency { signature })
    }

    /// Active mode, unmasking: checks the survivors' signatures on the U3 this client signed,
    /// then reveals self-mask shares of its neighbours in U3 and key shares of the senders that
    /// are not in U3.
    fn on_signed_survivors(&mut self, signatures: &[SurvivorSignature]) -> Result<ClientPayload> {
        let State::Signed { received, u3 } = &self.state else {
            unreachable!("stage checked by dispatch");
        };
        let message = identity::survivors_message(&self.derive_binding, u3);
        let mut signers = BTreeSet::new();
        for s in signatures {
            if u3.binary_search(&s.id).is_err() {
                return Err(SecAggError::Inconsistent(format!(
                    "a survivor signature from client {}, which is not in U3",
                    s.id
                )));
            }
            if !signers.insert(s.id) {
                return Err(SecAggError::Inconsistent(format!(
                    "client {}'s signature is listed twice",
                    s.id
                )));
            }
            if !identity::check(&self.devices[&s.id], &message, &s.signature) {
                return Err(SecAggError::Signature(format!(
                    "client {}'s signature is not on the U3 this client signed",
                    s.id
                )));
            }
        }
        let neighbours_signed = signers
            .iter()
            .filter(|&&v| self.graph.are_neighbours(self.id, v))
            .count();
        let t = self.config.threshold as usize;
        if neighbours_signed < t {
            return Err(SecAggError::Inconsistent(format!(
                "{neighbours_signed} neighbours signed U3, the threshold is {t}"
            )));
        }
        let self_mask = received
            .iter()
            .filter(|(v, _)| u3.binary_search(v).is_ok())
            .map(|(&v, r)| OwnedShare {
                owner: v,
                share: r.self_mask.clone(),
            })
            .collect();
        let mask_key = received
            .iter()
            .filter(|(v, _)| u3.binary_search(v).is_err())
            .map(|(&v, r)| OwnedShare {
                owner: v,
                share: r.mask_key.clone(),
            })
            .collect();
        self.state = State::Done;
        Ok(ClientPayload::Unmasking {
            self_mask,
            mask_key,
        })
    }

    fn require_threshold(&self, count: usize, what: &str) -> Result<()> {
        if count < self.config.threshold as usize {
            return Err(SecAggError::Aborted(format!(
                "{count} {what}, the threshold is {}",
                self.config.threshold
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GraphSpec;
    use crate::messages::encode;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn config(n: u32, t: u32) -> RoundConfig {
        RoundConfig {
            session_id: [8; 32],
            clients: n,
            threshold: t,
            bits: 16,
            dim: 4,
            graph: GraphSpec::Complete,
            threat_model: ThreatModel::HonestButCurious,
        }
    }

    #[test]
    fn a_message_over_the_stage_cap_is_refused_unread_and_aborts() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let c = config(10, 6);
        let (mut client, _) = Client::new(c.clone(), 1, &mut rng).unwrap();
        let cap = client.max_message_len();
        assert_eq!(cap, max_server_message_len(&c, Stage::ShareKeys));
        // Nine neighbours' keys, the largest honest message of the stage, fit.
        let keys = ServerMessage {
            header: Header::new(c.binding(), 1),
            payload: ServerPayload::Keys {
                peers: (2..=10)
                    .map(|id| PeerKeys {
                        id,
                        cipher_pk: [id as u8; 32],
                        mask_pk: [id as u8 + 100; 32],
                    })
                    .collect(),
            },
        };
        assert!(encode(&keys).len() <= cap);
        // One byte over: refused before decoding (garbage bytes would otherwise be Malformed).
        let e = client
            .handle_bytes(&vec![0xff; cap + 1], &[0; 4], &mut rng)
            .unwrap_err();
        assert_eq!(
            e,
            SecAggError::TooLarge {
                stage: Stage::ShareKeys,
                len: cap as u64 + 1,
                cap: cap as u64
            }
        );
        assert!(client.is_aborted());
        // At the cap, garbage is decoded (and refused as malformed, which does not abort).
        let (mut other, _) = Client::new(c, 2, &mut rng).unwrap();
        let e = other
            .handle_bytes(&vec![0xff; cap], &[0; 4], &mut rng)
            .unwrap_err();
        assert!(matches!(e, SecAggError::Malformed(_)));
        assert!(!other.is_aborted());
    }

    #[test]
    fn the_default_policy_refuses_before_any_key_is_made() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let e = Client::new(config(2, 1), 1, &mut rng).unwrap_err();
        assert!(matches!(
            e,
            SecAggError::Refused {
                rule: "min_clients",
                ..
            }
        ));
        assert!(
            Client::new_with_policy(config(2, 1), 1, &ClientPolicy::permissive(), &mut rng).is_ok()
        );
    }
}
