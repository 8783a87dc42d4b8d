//! The protocol's messages, as data. Every message carries a [`Header`]: the protocol version,
//! the round's binding (digest of its configuration, including the session id) and the client
//! it is from (client → server) or for (server → client). On the wire they are postcard
//! (a compact, self-delimiting serde format); [`encode`] and [`decode`] refuse trailing bytes.

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use sha2::{Digest, Sha256};

use crate::config::PROTOCOL_VERSION;
use crate::error::{Result, SecAggError};
use crate::identity::SignatureBytes;
use crate::ids::ClientId;
pub use crate::ids::Stage;
use crate::mask::modulus_mask;
use crate::shamir::Share;

/// Version, round binding and the client a message is from or for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub version: u32,
    /// [`crate::RoundConfig::binding`] of the round.
    pub binding: [u8; 32],
    /// Sender (client → server) or recipient (server → client).
    pub client: ClientId,
}

impl Header {
    /// A header of this protocol version.
    pub fn new(binding: [u8; 32], client: ClientId) -> Self {
        Header {
            version: PROTOCOL_VERSION,
            binding,
            client,
        }
    }

    /// Checks version and binding.
    pub fn check(&self, binding: &[u8; 32]) -> Result<()> {
        if self.version != PROTOCOL_VERSION {
            return Err(SecAggError::Version {
                expected: PROTOCOL_VERSION,
                got: self.version,
            });
        }
        if &self.binding != binding {
            return Err(SecAggError::WrongSession);
        }
        Ok(())
    }
}

/// A ciphertext of shares, addressed to one neighbour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedShares {
    /// The neighbour it is for (client → server) or from (server → client).
    pub peer: ClientId,
    /// ChaCha20-Poly1305 ciphertext of the sender and receiver ids and the receiver's shares of
    /// the sender's mask key and self-mask seed (88 bytes of plaintext).
    #[serde(with = "serde_bytes")]
    pub ciphertext: Vec<u8>,
}

/// A neighbour's public keys, as the server relays them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerKeys {
    /// The neighbour.
    pub id: ClientId,
    /// X25519 public key for share encryption.
    pub cipher_pk: [u8; 32],
    /// X25519 public key for pairwise masks.
    pub mask_pk: [u8; 32],
}

/// A client's round keys signed by its device key (active mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedKeys {
    /// The client's id in the round.
    pub id: ClientId,
    /// X25519 public key for share encryption.
    pub cipher_pk: [u8; 32],
    /// X25519 public key for pairwise masks.
    pub mask_pk: [u8; 32],
    /// The device's Ed25519 verifying key.
    pub device: [u8; 32],
    /// Ed25519 signature of the round binding, the id and both keys under `device`.
    #[serde(with = "serde_bytes")]
    pub signature: SignatureBytes,
}

impl SignedKeys {
    /// The keys without the signature.
    pub fn peer_keys(&self) -> PeerKeys {
        PeerKeys {
            id: self.id,
            cipher_pk: self.cipher_pk,
            mask_pk: self.mask_pk,
        }
    }
}

/// The binding of an active round after its first stage: SHA-256 of the round's binding and
/// every advertised signed key, in id order. Every later key derivation and the survivors'
/// signatures use it, so clients shown different key lists cannot finish a round together.
pub fn key_list_binding(binding: &[u8; 32], entries: &[SignedKeys]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"privfed/secagg/v1/key-list");
    h.update(binding);
    h.update((entries.len() as u64).to_be_bytes());
    for e in entries {
        h.update(e.id.to_be_bytes());
        h.update(e.cipher_pk);
        h.update(e.mask_pk);
        h.update(e.device);
        h.update(e.signature);
    }
    h.finalize().into()
}

/// One survivor's signature on U3 (active mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SurvivorSignature {
    /// The signer.
    pub id: ClientId,
    /// Ed25519 signature of the key-list binding and U3 under the signer's device key.
    #[serde(with = "serde_bytes")]
    pub signature: SignatureBytes,
}

/// A share held by the sender of an unmasking response, of the secret of `owner`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedShare {
    /// Whose secret it is a share of.
    pub owner: ClientId,
    /// The share (its point is the sender's id).
    pub share: Share,
}

/// What a client sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientPayload {
    /// Stage 0: the client's two public keys.
    AdvertiseKeys {
        /// For share encryption.
        cipher_pk: [u8; 32],
        /// For pairwise masks.
        mask_pk: [u8; 32],
    },
    /// Stage 1: one ciphertext per neighbour that advertised keys.
    ShareKeys {
        /// Ciphertexts, `peer` = the recipient.
        shares: Vec<SealedShares>,
    },
    /// Stage 2: the input plus all masks, mod 2^b, bit-packed (see [`pack`]).
    MaskedInput {
        /// `dim` values of `bits` bits each, little-endian bit order.
        #[serde(with = "serde_bytes")]
        packed: Vec<u8>,
    },
    /// Stage 3: self-mask shares of surviving neighbours, key shares of dropped neighbours.
    Unmasking {
        /// Shares of the self-mask seeds of neighbours that sent masked input.
        self_mask: Vec<OwnedShare>,
        /// Shares of the mask secret keys of neighbours that did not.
        mask_key: Vec<OwnedShare>,
    },
    /// Stage 0, active mode: the two public keys signed by the device key.
    SignedKeys(SignedKeys),
    /// Consistency check (active mode): the client's signature on the U3 it was shown.
    Consistency {
        /// Ed25519 signature of the key-list binding and U3.
        #[serde(with = "serde_bytes")]
        signature: SignatureBytes,
    },
}

impl ClientPayload {
    /// The stage this payload belongs to.
    pub fn stage(&self) -> Stage {
        match self {
            ClientPayload::AdvertiseKeys { .. } | ClientPayload::SignedKeys(_) => {
                Stage::AdvertiseKeys
            }
            ClientPayload::ShareKeys { .. } => Stage::ShareKeys,
            ClientPayload::MaskedInput { .. } => Stage::MaskedInput,
            ClientPayload::Consistency { .. } => Stage::ConsistencyCheck,
            ClientPayload::Unmasking { .. } => Stage::Unmasking,
        }
    }
}

/// A client's message to the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientMessage {
    /// `client` is the sender.
    pub header: Header,
    /// The stage's content.
    pub payload: ClientPayload,
}

/// What the server sends a client to start its next stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ServerPayload {
    /// Starts stage 1: the keys of the client's neighbours that advertised.
    Keys {
        /// Neighbours' keys, by increasing id.
        peers: Vec<PeerKeys>,
    },
    /// Starts stage 2: the ciphertexts the client's neighbours sealed for it.
    Shares {
        /// Ciphertexts, `peer` = the sender.
        shares: Vec<SealedShares>,
    },
    /// Starts stage 3: which of the client's neighbours that shared keys survived (sent masked
    /// input) and which dropped.
    Unmask {
        /// Neighbours (and the client itself) whose masked input the server holds.
        survivors: Vec<ClientId>,
        /// Neighbours that shared keys but sent no masked input.
        dropped: Vec<ClientId>,
    },
    /// Starts stage 1 in the active mode: every signed key advertised in round 1 (U1), in id
    /// order; the client derives its neighbours and the round's key-list binding from it.
    SignedKeyList {
        /// U1's signed keys, by increasing id.
        entries: Vec<SignedKeys>,
    },
    /// Starts the consistency check (active mode): the set U3 of clients whose masked input
    /// the server holds.
    Survivors {
        /// U3, by increasing id.
        u3: Vec<ClientId>,
    },
    /// Starts unmasking in the active mode: the survivors' signatures on U3. The client
    /// answers only with `t` valid signatures of its neighbours on the U3 it signed itself,
    /// and derives survivors and dropped clients from that U3.
    SignedSurvivors {
        /// Signatures, by increasing signer id.
        signatures: Vec<SurvivorSignature>,
    },
}

impl ServerPayload {
    /// The stage the client answers this payload in.
    pub fn stage(&self) -> Stage {
        match self {
            ServerPayload::Keys { .. } | ServerPayload::SignedKeyList { .. } => Stage::ShareKeys,
            ServerPayload::Shares { .. } => Stage::MaskedInput,
            ServerPayload::Survivors { .. } => Stage::ConsistencyCheck,
            ServerPayload::Unmask { .. } | ServerPayload::SignedSurvivors { .. } => {
                Stage::Unmasking
            }
        }
    }
}

/// The server's message to one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerMessage {
    /// `client` is the recipient.
    pub header: Header,
    /// The next stage's input.
    pub payload: ServerPayload,
}

/// An upper bound on the encoded length of any [`ClientMessage`] an honest client of a round
/// with this configuration sends, in any stage: a coordinator refuses longer bodies before
/// reading them. Postcard's varints are counted at their widest (5 bytes for a `u32`, 10 for a
/// `u64` or a length).
pub fn max_client_message_len(config: &crate::RoundConfig) -> usize {
    const U32: usize = 5;
    const LEN: usize = 10;
    const U64: usize = 10;
    let degree = config.degree() as usize;
    let header = U32 + 32 + U32;
    let keys = U32 + 3 * 32 + LEN + 64;
    let sealed = U32 + LEN + SharePlaintext::LEN + 16;
    let share_keys = LEN + degree * sealed;
    let masked = LEN + (config.dim as u128 * config.bits as u128).div_ceil(8) as usize;
    let owned = U32 + U32 + 5 * U64;
    let unmasking = 2 * LEN + degree * owned;
    let consistency = LEN + 64;
    header
        + U32
        + keys
            .max(share_keys)
            .max(masked)
            .max(unmasking)
            .max(consistency)
}

/// An upper bound on the encoded length of any [`ServerMessage`] an honest server sends a
/// client of a round with this configuration to open `stage` (0 for
/// [`Stage::AdvertiseKeys`], which the client opens itself). A client refuses longer messages
/// before reading them, so a server cannot make it buffer more than the round needs. With `n`
/// clients, `k` neighbours and postcard's varints at their widest:
///
/// * [`Stage::ShareKeys`]: `k` neighbours' keys, or in the active mode the signed key list of
///   all `n` clients;
/// * [`Stage::MaskedInput`]: `k` share ciphertexts;
/// * [`Stage::ConsistencyCheck`]: a survivor set of at most `n` ids;
/// * [`Stage::Unmasking`]: at most `k + 1` survivors and `k` dropped ids, or in the active mode
///   at most `n` survivors' signatures.
pub fn max_server_message_len(config: &crate::RoundConfig, stage: Stage) -> usize {
    const U32: usize = 5;
    const LEN: usize = 10;
    let n = config.clients as usize;
    let degree = config.degree() as usize;
    let active = config.threat_model.is_active();
    let header = U32 + 32 + U32;
    let signature = LEN + 64;
    let payload = match stage {
        Stage::AdvertiseKeys => return 0,
        Stage::ShareKeys if active => LEN + n * (U32 + 3 * 32 + signature),
        Stage::ShareKeys => LEN + degree * (U32 + 2 * 32),
        Stage::MaskedInput => LEN + degree * (U32 + LEN + SharePlaintext::LEN + 16),
        Stage::ConsistencyCheck => LEN + n * U32,
        Stage::Unmasking if active => LEN + n * (U32 + signature),
        Stage::Unmasking => 2 * LEN + (2 * degree + 1) * U32,
    };
    header + U32 + payload
}

/// Serializes a message for the wire.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    postcard::to_allocvec(message).expect("protocol messages always serialize")
}

/// Parses a message from the wire; truncated, oversized or malformed input is a typed error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|e| SecAggError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(SecAggError::Malformed(format!(
            "{} trailing bytes after the message",
            rest.len()
        )));
    }
    Ok(value)
}

/// Packs values below 2^`bits` into ⌈len·bits/8⌉ bytes, little-endian bit order.
pub fn pack(values: &[u64], bits: u32) -> Vec<u8> {
    let total_bits = values.len() as u128 * bits as u128;
    let mut out = Vec::with_capacity(total_bits.div_ceil(8) as usize);
    if bits.is_multiple_of(8) {
        let width = (bits / 8) as usize;
        for v in values {
            out.extend_from_slice(&v.to_le_bytes()[..width]);
        }
        return out;
    }
    let mut acc: u128 = 0;
    let mut filled = 0u32;
    for &v in values {
        acc |= (v as u128) << filled;
        filled += bits;
        while filled >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            filled -= 8;
        }
    }
    if filled > 0 {
        out.push(acc as u8);
    }
    out
}

/// Unpacks `len` values of `bits` bits; the byte count must be exact and unused trailing bits
/// zero (so one vector has one encoding).
pub fn unpack(bytes: &[u8], bits: u32, len: usize) -> Result<Vec<u64>> {
    let expected = (len as u128 * bits as u128).div_ceil(8);
    if bytes.len() as u128 != expected {
        return Err(SecAggError::Malformed(format!(
            "packed vector has {} bytes, {len} values of {bits} bits need {expected}",
            bytes.len()
        )));
    }
    let m = modulus_mask(bits);
    let mut out = Vec::with_capacity(len);
    if bits.is_multiple_of(8) {
        let width = (bits / 8) as usize;
        for w in bytes.chunks_exact(width) {
            let mut b = [0u8; 8];
            b[..width].copy_from_slice(w);
            out.push(u64::from_le_bytes(b));
        }
        return Ok(out);
    }
    let mut acc: u128 = 0;
    let mut filled = 0u32;
    let mut it = bytes.iter();
    for _ in 0..len {
        while filled < bits {
            let b = *it.next().expect("length checked above");
            acc |= (b as u128) << filled;
            filled += 8;
        }
        out.push(acc as u64 & m);
        acc >>= bits;
        filled -= bits;
    }
    if acc != 0 {
        return Err(SecAggError::Malformed(
            "packed vector has non-zero padding bits".into(),
        ));
    }
    Ok(out)
}

/// The plaintext sealed from a sender to a receiver: both ids and the receiver's share of each
/// of the sender's two secrets (mask secret key, self-mask seed).
pub(crate) struct SharePlaintext {
    pub sender: ClientId,
    pub receiver: ClientId,
    pub mask_key: Share,
    pub self_mask: Share,
}

impl SharePlaintext {
    /// 4 + 4 + 40 + 40 bytes.
    pub const LEN: usize = 88;

    pub fn to_bytes(&self) -> zeroize::Zeroizing<Vec<u8>> {
        let mut out = zeroize::Zeroizing::new(Vec::with_capacity(Self::LEN));
        out.extend_from_slice(&self.sender.to_be_bytes());
        out.extend_from_slice(&self.receiver.to_be_bytes());
        for v in self.mask_key.y.iter().chain(self.self_mask.y.iter()) {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != Self::LEN {
            return Err(SecAggError::Violation(format!(
                "share plaintext has {} bytes, expected {}",
                bytes.len(),
                Self::LEN
            )));
        }
        let word = |i: usize| u64::from_be_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        let sender = u32::from_be_bytes(bytes[0..4].try_into().unwrap());
        let receiver = u32::from_be_bytes(bytes[4..8].try_into().unwrap());
        let mut key = [0u64; 5];
        let mut mask = [0u64; 5];
        for i in 0..5 {
            key[i] = word(i);
            mask[i] = word(5 + i);
        }
        Ok(SharePlaintext {
            sender,
            receiver,
            mask_key: Share {
                x: receiver,
                y: key,
            },
            self_mask: Share {
                x: receiver,
                y: mask,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_round_trip_for_every_width() {
        for bits in 1..=64u32 {
            let m = modulus_mask(bits);
            for len in [0usize, 1, 7, 8, 9, 100] {
                let values: Vec<u64> = (0..len as u64)
                    .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & m)
                    .collect();
                let packed = pack(&values, bits);
                assert_eq!(packed.len(), (len * bits as usize).div_ceil(8));
                assert_eq!(
                    unpack(&packed, bits, len).unwrap(),
                    values,
                    "bits {bits} len {len}"
                );
            }
        }
    }

    #[test]
    fn unpack_refuses_wrong_lengths_and_dirty_padding() {
        let packed = pack(&[1, 2, 3], 5);
        assert_eq!(packed.len(), 2);
        assert!(unpack(&packed, 5, 4).is_err());
        assert!(unpack(&packed[..1], 5, 3).is_err());
        let mut dirty = packed.clone();
        dirty[1] |= 0x80; // bit 15: beyond the 15 used bits
        assert!(unpack(&dirty, 5, 3).is_err());
    }

    #[test]
    fn decode_refuses_truncation_and_trailing_bytes() {
        let msg = ClientMessage {
            header: Header::new([1u8; 32], 4),
            payload: ClientPayload::AdvertiseKeys {
                cipher_pk: [2u8; 32],
                mask_pk: [3u8; 32],
            },
        };
        let bytes = encode(&msg);
        assert_eq!(decode::<ClientMessage>(&bytes).unwrap(), msg);
        for cut in 0..bytes.len() {
            assert!(
                decode::<ClientMessage>(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode::<ClientMessage>(&long).is_err());
        assert!(decode::<ClientMessage>(&[0xff; 100]).is_err());
    }
}
