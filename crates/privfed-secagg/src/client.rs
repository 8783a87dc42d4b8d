//! The client's state machine.
//!
//! ```text
//! new ──AdvertiseKeys──▶ Advertised ──on_keys──▶ Shared ──on_shares──▶ Masked ──on_unmask──▶ Done
//!                                 any fatal error (see SecAggError::is_fatal) ──▶ Aborted
//! ```
//!
//! Secrets (both X25519 secret keys, the self-mask seed, the shares received) live only in the
//! state that needs them and are zeroized when it is left. A client answers one unmasking
//! request at most and checks it against what it saw: the survivors and the dropped must be
//! disjoint, together exactly the neighbours it received shares from (plus itself among the
//! survivors), and at least the threshold must have survived. So an honest client never reveals
//! both the self-mask share and the key share of one peer.

use std::collections::{BTreeMap, BTreeSet};

use rand::{CryptoRng, Rng};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::config::{ClientId, Graph, RoundConfig};
use crate::crypto;
use crate::error::{Result, SecAggError};
use crate::mask::{Sign, apply_mask, modulus_mask};
use crate::messages::{
    ClientMessage, ClientPayload, Header, OwnedShare, PeerKeys, SealedShares, ServerMessage,
    ServerPayload, SharePlaintext, Stage, pack,
};
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
    Done,
    Aborted,
}

/// One client's side of one round.
pub struct Client {
    config: RoundConfig,
    graph: Graph,
    binding: [u8; 32],
    id: ClientId,
    state: State,
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
    /// Joins the round as client `id`: generates both key pairs and returns the message that
    /// advertises their public halves.
    pub fn new<R: Rng + CryptoRng + ?Sized>(
        config: RoundConfig,
        id: ClientId,
        rng: &mut R,
    ) -> Result<(Self, ClientMessage)> {
        let graph = config.validate()?;
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
        let message = ClientMessage {
            header: Header::new(binding, id),
            payload: ClientPayload::AdvertiseKeys {
                cipher_pk: PublicKey::from(&cipher_sk).to_bytes(),
                mask_pk: PublicKey::from(&mask_sk).to_bytes(),
            },
        };
        let client = Client {
            config,
            graph,
            binding,
            id,
            state: State::Advertised { cipher_sk, mask_sk },
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
            State::Masked { .. } => Some(Stage::Unmasking),
            State::Done | State::Aborted => None,
        }
    }

    /// Whether the client aborted the round (and dropped its secrets).
    pub fn is_aborted(&self) -> bool {
        matches!(self.state, State::Aborted)
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
        let payload = match &message.payload {
            ServerPayload::Keys { peers } => self.on_keys(peers, rng)?,
            ServerPayload::Shares { shares } => self.on_shares(shares, input)?,
            ServerPayload::Unmask { survivors, dropped } => self.on_unmask(survivors, dropped)?,
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
        let mut seen_keys: BTreeSet<[u8; 32]> = [own_cipher, own_mask].into();
        let mut table = BTreeMap::new();
        for p in peers {
            if !self.graph.are_neighbours(self.id, p.id) {
                return Err(SecAggError::UnexpectedParty {
                    id: p.id,
                    reason: "not a neighbour of this client".into(),
                });
            }
            if !seen_keys.insert(p.cipher_pk) || !seen_keys.insert(p.mask_pk) {
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
                &self.binding,
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
                &self.binding,
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
            let seed =
                crypto::pair_mask_seed(mask_sk, &peers[&v].mask_pk, &self.binding, self.id, v)?;
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
