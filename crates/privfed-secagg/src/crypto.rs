//! Key agreement, key derivation and share encryption.
//!
//! * X25519 (RFC 7748) for both key pairs of a client: the *cipher* pair encrypts the shares a
//!   client sends its neighbours, the *mask* pair gives the pairwise mask seeds.
//! * HKDF-SHA256 (RFC 5869) with salt `"privfed/secagg/v1"`, the X25519 output as input key
//!   material, and an info string `label ‖ binding ‖ a ‖ b` — the label separates uses (pair
//!   mask, share encryption), the binding (the round configuration's digest, which includes the
//!   session id) separates rounds, and `a`, `b` (4 bytes each, big-endian) the pair. A share key
//!   is directional (`a` = sender, `b` = receiver) so the two directions never share a key; a
//!   pair-mask seed uses (min, max) so both ends derive the same seed.
//! * ChaCha20-Poly1305 (RFC 8439) for shares, keyed by the share key with an all-zero nonce
//!   (every key seals exactly one message) and associated data
//!   `"privfed/secagg/v1/share" ‖ binding ‖ sender ‖ receiver`.
//! * ChaCha20-Poly1305 again for a client's **sealed round state** ([`seal_seed`],
//!   [`open_seed`]): the 32-byte master seed a client's round secrets are derived from, kept
//!   between stages by a caller that cannot keep the client in memory (a Flower ClientApp),
//!   sealed as `nonce ‖ ciphertext ‖ tag` under a node-local key with a fresh 12-byte nonce and
//!   the caller's associated data (what the seal is bound to: round, node, client, time).

use chacha20poly1305::ChaCha20Poly1305;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroizing;

use crate::error::{Result, SecAggError};
use crate::ids::ClientId;

const SALT: &[u8] = b"privfed/secagg/v1";
const SHARE_AD: &[u8] = b"privfed/secagg/v1/share";

/// Length of a sealed seed: 12-byte nonce, 32-byte ciphertext, 16-byte tag.
pub const SEALED_SEED_LEN: usize = 12 + 32 + 16;

/// Seals a round's 32-byte master `seed` under `key`: `nonce ‖ ChaCha20-Poly1305(key, nonce,
/// seed, aad)` (RFC 8439), the nonce 12 bytes from `rng` (a random nonce per seal: the key
/// seals many seeds, and 2^-96 per pair bounds a nonce collision). [`open_seed`] opens it with
/// the same key and `aad` only.
pub fn seal_seed<R: rand::Rng + rand::CryptoRng + ?Sized>(
    key: &[u8; 32],
    aad: &[u8],
    seed: &[u8; 32],
    rng: &mut R,
) -> Result<Vec<u8>> {
    let mut nonce = [0u8; 12];
    rng.fill_bytes(&mut nonce);
    let cipher = ChaCha20Poly1305::new(key.into());
    let sealed = cipher
        .encrypt(&nonce.into(), Payload { msg: seed, aad })
        .map_err(|_| SecAggError::SealedState("sealing failed".into()))?;
    let mut out = Vec::with_capacity(SEALED_SEED_LEN);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// Opens a seed sealed by [`seal_seed`] (or by any ChaCha20-Poly1305 implementation in the
/// same `nonce ‖ ciphertext ‖ tag` layout) under `key` with associated data `aad`; the seed is
/// zeroized when dropped. [`SecAggError::SealedState`] when it does not authenticate (another
/// key or `aad`, altered bytes) or has the wrong length.
pub fn open_seed(key: &[u8; 32], aad: &[u8], sealed: &[u8]) -> Result<Zeroizing<[u8; 32]>> {
    if sealed.len() != SEALED_SEED_LEN {
        return Err(SecAggError::SealedState(format!(
            "{} bytes, a sealed seed has {SEALED_SEED_LEN}",
            sealed.len()
        )));
    }
    let (nonce, body) = sealed.split_at(12);
    let nonce: [u8; 12] = nonce.try_into().expect("split at 12");
    let cipher = ChaCha20Poly1305::new(key.into());
    let plain = Zeroizing::new(
        cipher
            .decrypt(&nonce.into(), Payload { msg: body, aad })
            .map_err(|_| {
                SecAggError::SealedState(
                    "it was sealed under another key, for another binding, or altered".into(),
                )
            })?,
    );
    let mut seed = Zeroizing::new([0u8; 32]);
    seed.copy_from_slice(&plain);
    Ok(seed)
}

/// HKDF-SHA256 expansion of `ikm` to 32 bytes under `info`.
fn hkdf32(ikm: &[u8], info: &[&[u8]]) -> Zeroizing<[u8; 32]> {
    let hk = Hkdf::<Sha256>::new(Some(SALT), ikm);
    let info: Vec<u8> = info.concat();
    let mut okm = Zeroizing::new([0u8; 32]);
    hk.expand(&info, okm.as_mut())
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    okm
}

/// A public 256-bit value derived from the session id (e.g. the Harary graph's permutation).
pub fn derive_public(session_id: &[u8; 32], label: &[u8]) -> [u8; 32] {
    *hkdf32(session_id, &[label])
}

/// The seed of an active-mode round's graph permutation: HKDF of the session id and the
/// key-list binding, so the placement is fixed only once every round-1 key is, and a server
/// can change it only by changing who is in U1 (grinding; the planner accounts for it).
pub fn active_graph_seed(session_id: &[u8; 32], keys_binding: &[u8; 32]) -> [u8; 32] {
    *hkdf32(session_id, &[b"harary-permutation/active", keys_binding])
}

/// The canonical encoding of an X25519 public key (RFC 7748 §5: the top bit ignored, the
/// u-coordinate reduced mod 2^255 − 19), so two encodings of one key compare equal.
pub fn canonical_public(key: &[u8; 32]) -> [u8; 32] {
    let mut k = *key;
    k[31] &= 0x7f;
    // p = 2^255 − 19: little-endian 0xed, 0xff × 30, 0x7f. A value ≥ p is below 2p, so one
    // subtraction of p (adding 19 and clearing bit 255) reduces it.
    let ge_p = k[0] >= 0xed && k[1..31].iter().all(|&b| b == 0xff) && k[31] == 0x7f;
    if ge_p {
        let mut carry = 19u16;
        for b in k.iter_mut() {
            let v = *b as u16 + carry;
            *b = v as u8;
            carry = v >> 8;
        }
        k[31] &= 0x7f;
    }
    k
}

/// Whether an X25519 public key has small order (its shared secret with anyone is known).
pub fn is_small_order(key: &[u8; 32]) -> bool {
    let probe = StaticSecret::from([0x5au8; 32]);
    !probe
        .diffie_hellman(&PublicKey::from(*key))
        .was_contributory()
}

/// X25519, refusing a peer key of small order (the output would be all zeros, known to anyone).
fn agree(mine: &StaticSecret, theirs: &[u8; 32], peer: ClientId) -> Result<Zeroizing<[u8; 32]>> {
    let shared = mine.diffie_hellman(&PublicKey::from(*theirs));
    if !shared.was_contributory() {
        return Err(SecAggError::Violation(format!(
            "client {peer}'s public key has small order"
        )));
    }
    Ok(Zeroizing::new(shared.to_bytes()))
}

/// The seed of the pairwise mask between `me` and `peer`, from my mask secret and the peer's
/// mask public key. Both ends (and the server, once it reconstructs a dropped client's mask
/// secret) derive the same seed.
pub fn pair_mask_seed(
    mine: &StaticSecret,
    theirs: &[u8; 32],
    binding: &[u8; 32],
    me: ClientId,
    peer: ClientId,
) -> Result<Zeroizing<[u8; 32]>> {
    let shared = agree(mine, theirs, peer)?;
    let (a, b) = (me.min(peer), me.max(peer));
    Ok(hkdf32(
        shared.as_ref(),
        &[b"pair-mask", binding, &a.to_be_bytes(), &b.to_be_bytes()],
    ))
}

/// The one-message key for shares sent from `sender` to `receiver`.
fn share_key(
    mine: &StaticSecret,
    theirs: &[u8; 32],
    binding: &[u8; 32],
    sender: ClientId,
    receiver: ClientId,
    peer: ClientId,
) -> Result<Zeroizing<[u8; 32]>> {
    let shared = agree(mine, theirs, peer)?;
    Ok(hkdf32(
        shared.as_ref(),
        &[
            b"share-encryption",
            binding,
            &sender.to_be_bytes(),
            &receiver.to_be_bytes(),
        ],
    ))
}

fn aad(binding: &[u8; 32], sender: ClientId, receiver: ClientId) -> Vec<u8> {
    [
        SHARE_AD,
        binding,
        &sender.to_be_bytes(),
        &receiver.to_be_bytes(),
    ]
    .concat()
}

/// Encrypts `plaintext` from `sender` (holding `mine`) to `receiver` (whose cipher public key is
/// `theirs`).
pub fn seal(
    mine: &StaticSecret,
    theirs: &[u8; 32],
    binding: &[u8; 32],
    sender: ClientId,
    receiver: ClientId,
    plaintext: &[u8],
) -> Result<Vec<u8>> {
    let key = share_key(mine, theirs, binding, sender, receiver, receiver)?;
    let cipher = ChaCha20Poly1305::new((&*key).into());
    cipher
        .encrypt(
            &[0u8; 12].into(),
            Payload {
                msg: plaintext,
                aad: &aad(binding, sender, receiver),
            },
        )
        .map_err(|_| SecAggError::Violation("share encryption failed".into()))
}

/// Decrypts and authenticates a ciphertext that `sender` (cipher public key `theirs`) sealed for
/// `receiver` (holding `mine`).
pub fn open(
    mine: &StaticSecret,
    theirs: &[u8; 32],
    binding: &[u8; 32],
    sender: ClientId,
    receiver: ClientId,
    ciphertext: &[u8],
) -> Result<Zeroizing<Vec<u8>>> {
    let key = share_key(mine, theirs, binding, sender, receiver, sender)?;
    let cipher = ChaCha20Poly1305::new((&*key).into());
    cipher
        .decrypt(
            &[0u8; 12].into(),
            Payload {
                msg: ciphertext,
                aad: &aad(binding, sender, receiver),
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| SecAggError::Decryption { sender })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed seed opens with its key and associated data only; any flipped bit, another
    /// key, another binding or a cut blob is refused; two seals of one seed differ (fresh nonce).
    #[test]
    fn a_sealed_seed_opens_only_with_its_key_and_binding() {
        use rand::{SeedableRng, rngs::ChaCha20Rng};
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (key, seed, aad) = ([7u8; 32], [9u8; 32], b"round 1, node 2".as_slice());
        let sealed = seal_seed(&key, aad, &seed, &mut rng).unwrap();
        assert_eq!(sealed.len(), SEALED_SEED_LEN);
        assert_eq!(*open_seed(&key, aad, &sealed).unwrap(), seed);
        assert_ne!(sealed, seal_seed(&key, aad, &seed, &mut rng).unwrap());
        assert!(!sealed.windows(32).any(|w| w == seed));
        let refused = |r: Result<Zeroizing<[u8; 32]>>| {
            assert!(matches!(r, Err(SecAggError::SealedState(_))), "{r:?}")
        };
        refused(open_seed(&[8; 32], aad, &sealed));
        refused(open_seed(&key, b"round 1, node 3", &sealed));
        refused(open_seed(&key, aad, &sealed[..SEALED_SEED_LEN - 1]));
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            refused(open_seed(&key, aad, &bad));
        }
    }

    /// RFC 8439 §2.8.2's AEAD test vector, in the sealed layout (nonce ‖ ciphertext ‖ tag),
    /// opened by `open_seed`'s cipher: the construction is the standard one, so a seed sealed
    /// by another implementation (Python's `cryptography`) opens.
    #[test]
    fn the_cipher_is_rfc_8439s_aead() {
        let key: [u8; 32] = std::array::from_fn(|i| 0x80 + i as u8);
        let nonce = [
            0x07, 0, 0, 0, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
        ];
        let aad = [
            0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
        ];
        let msg = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let tag = [
            0x1a, 0xe1, 0x0b, 0x59, 0x4f, 0x09, 0xe2, 0x6a, 0x7e, 0x90, 0x2e, 0xcb, 0xd0, 0x60,
            0x06, 0x91,
        ];
        let cipher = ChaCha20Poly1305::new((&key).into());
        let out = cipher
            .encrypt(&nonce.into(), Payload { msg, aad: &aad })
            .unwrap();
        assert_eq!(&out[out.len() - 16..], &tag);
        assert_eq!(&out[..4], &[0xd3, 0x1a, 0x8d, 0x34]);
    }
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn keys(seed: u64) -> (StaticSecret, [u8; 32]) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let sk = StaticSecret::random_from_rng(&mut rng);
        let pk = PublicKey::from(&sk).to_bytes();
        (sk, pk)
    }

    #[test]
    fn both_ends_derive_the_same_pair_seed_and_it_is_separated() {
        let (a, apk) = keys(1);
        let (b, bpk) = keys(2);
        let binding = [5u8; 32];
        let s1 = pair_mask_seed(&a, &bpk, &binding, 3, 9).unwrap();
        let s2 = pair_mask_seed(&b, &apk, &binding, 9, 3).unwrap();
        assert_eq!(*s1, *s2);
        assert_ne!(*s1, *pair_mask_seed(&a, &bpk, &[6u8; 32], 3, 9).unwrap());
        assert_ne!(*s1, *pair_mask_seed(&a, &bpk, &binding, 3, 8).unwrap());
    }

    #[test]
    fn seal_open_round_trip_and_binding() {
        let (a, apk) = keys(1);
        let (b, bpk) = keys(2);
        let binding = [7u8; 32];
        let ct = seal(&a, &bpk, &binding, 1, 2, b"share bytes").unwrap();
        assert_eq!(
            &open(&b, &apk, &binding, 1, 2, &ct).unwrap()[..],
            b"share bytes"
        );
        // Another session, another claimed sender or receiver, or a flipped bit: refused.
        assert!(open(&b, &apk, &[8u8; 32], 1, 2, &ct).is_err());
        assert!(open(&b, &apk, &binding, 3, 2, &ct).is_err());
        assert!(open(&b, &apk, &binding, 1, 3, &ct).is_err());
        let mut bad = ct.clone();
        bad[0] ^= 1;
        assert!(matches!(
            open(&b, &apk, &binding, 1, 2, &bad),
            Err(SecAggError::Decryption { sender: 1 })
        ));
        assert!(open(&b, &apk, &binding, 1, 2, &ct[..ct.len() - 1]).is_err());
        // The two directions use different keys.
        let back = seal(&b, &apk, &binding, 2, 1, b"share bytes").unwrap();
        assert_ne!(ct, back);
    }

    #[test]
    fn canonical_encodings_compare_equal() {
        let (_, pk) = keys(3);
        let mut high = pk;
        high[31] |= 0x80;
        assert_eq!(canonical_public(&high), canonical_public(&pk));
        // u = p + 1 is the encoding of u = 1.
        let mut p_plus_one = [0xffu8; 32];
        p_plus_one[0] = 0xee;
        p_plus_one[31] = 0x7f;
        let mut one = [0u8; 32];
        one[0] = 1;
        assert_eq!(canonical_public(&p_plus_one), one);
        assert!(is_small_order(&[0u8; 32]) && is_small_order(&one));
        assert!(!is_small_order(&pk));
    }

    #[test]
    fn small_order_keys_are_refused() {
        let (a, _) = keys(1);
        assert!(pair_mask_seed(&a, &[0u8; 32], &[0u8; 32], 1, 2).is_err());
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(seal(&a, &one, &[0u8; 32], 1, 2, b"x").is_err());
    }
}
