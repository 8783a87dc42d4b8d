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
