//! Long-term identities for the active mode: each device's Ed25519 signing key, the roster of
//! enrolled devices signed by an enrollment authority, and the signatures the protocol makes.
//!
//! Who holds which key:
//! * the **enrollment authority** (an operator's offline key, *not* the aggregation server's)
//!   signs the [`Roster`]: the list of device verifying keys allowed to take part, with a
//!   version number and an expiry time, so that a device removed from the roster cannot be
//!   brought back by a server that relays an older one;
//! * every **device** holds its own [`DeviceKey`] and the authority's verifying key (shipped
//!   with the app, or provisioned at enrollment); it accepts a roster only with the authority's
//!   signature, not expired by its own clock and not older than the newest version it has
//!   accepted before ([`Roster::verify`] with a [`RosterCheck`]; the device keeps that version);
//! * the **server** relays the roster and the signed keys; it holds no key that lets it speak
//!   for a device.
//!
//! Signatures are Ed25519 (RFC 8032, `ed25519-dalek`, verified with `verify_strict`, which
//! refuses small-order and non-canonical keys and signatures). Every signed message starts with
//! its own domain label, so a signature of one kind is never valid as another.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand::{CryptoRng, Rng};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::error::{Result, SecAggError};
use crate::ids::ClientId;

const ROSTER_LABEL: &[u8] = b"privfed/secagg/v2/roster";
const KEYS_LABEL: &[u8] = b"privfed/secagg/v1/round-keys";
const SURVIVORS_LABEL: &[u8] = b"privfed/secagg/v1/survivors";
const JOIN_LABEL: &[u8] = b"privfed/secagg/v1/join";

/// An Ed25519 signature (64 bytes).
pub type SignatureBytes = [u8; 64];

/// A device's long-term Ed25519 signing key (zeroized on drop, every copy).
#[derive(Clone)]
pub struct DeviceKey(SigningKey);

impl std::fmt::Debug for DeviceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DeviceKey")
            .field(&self.verifying_key())
            .finish()
    }
}

impl DeviceKey {
    /// A fresh key from 256 bits of `rng` (a CSPRNG: the OS's in production).
    pub fn generate<R: Rng + CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(seed.as_mut());
        DeviceKey(SigningKey::from_bytes(&seed))
    }

    /// The key from its 32-byte secret seed (as stored on the device).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        DeviceKey(SigningKey::from_bytes(seed))
    }

    /// The public half, as 32 bytes.
    pub fn verifying_key(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }

    fn sign(&self, message: &[u8]) -> SignatureBytes {
        self.0.sign(message).to_bytes()
    }

    /// The device's credential for joining round `round` (a coordinator's round id) whose
    /// configuration has `binding`: a signature no other round accepts (the binding covers the
    /// round's fresh session id).
    pub fn sign_join(&self, binding: &[u8; 32], round: &str) -> SignatureBytes {
        self.sign(&join_message(binding, round))
    }
}

fn join_message(binding: &[u8; 32], round: &str) -> Vec<u8> {
    [JOIN_LABEL, binding, round.as_bytes()].concat()
}

/// Whether `signature` is `device`'s credential for joining `round` ([`DeviceKey::sign_join`]).
pub fn verify_join(
    device: &[u8; 32],
    binding: &[u8; 32],
    round: &str,
    signature: &SignatureBytes,
) -> bool {
    verify(device, &join_message(binding, round), signature)
}

/// Checks `signature` on `message` under `key` (strict: no small-order or non-canonical keys).
fn verify(key: &[u8; 32], message: &[u8], signature: &SignatureBytes) -> bool {
    let Ok(vk) = VerifyingKey::from_bytes(key) else {
        return false;
    };
    vk.verify_strict(message, &Signature::from_bytes(signature))
        .is_ok()
}

/// The list of enrolled devices, signed by the enrollment authority, with a version and an
/// expiry time.
///
/// **Versions and expiry** close a replay: without them a server could keep relaying a roster
/// the authority has since replaced (one that still lists a device removed for cause), and
/// devices would accept it forever. The authority gives every new roster a higher `version` and
/// a `not_after` time; a device refuses a roster whose `not_after` has passed by its own clock
/// or whose version is lower than the newest it has accepted ([`RosterCheck`]). What remains: a
/// device that has never seen the newer roster accepts the older one until it expires, so the
/// authority should keep `not_after` short (days) and re-sign the roster before it runs out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roster {
    /// The roster's version: each roster an authority signs has a higher one than the last.
    pub version: u64,
    /// The last moment the roster is valid, in seconds since the Unix epoch.
    pub not_after: u64,
    /// The devices' Ed25519 verifying keys, sorted, without repeats.
    pub devices: Vec<[u8; 32]>,
    /// The authority's signature on
    /// `"privfed/secagg/v2/roster" ‖ version ‖ not_after ‖ count ‖ devices` (integers as 8
    /// big-endian bytes).
    #[serde(with = "serde_bytes")]
    pub signature: SignatureBytes,
}

/// What a device requires of a roster besides the authority's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RosterCheck {
    /// The device's clock, seconds since the Unix epoch: a roster with `not_after < now` is
    /// refused.
    pub now: u64,
    /// The lowest version the device accepts: the highest version it has accepted before (0 on
    /// a device that has seen none).
    pub min_version: u64,
}

fn roster_message(version: u64, not_after: u64, devices: &[[u8; 32]]) -> Vec<u8> {
    let mut m = Vec::with_capacity(ROSTER_LABEL.len() + 24 + 32 * devices.len());
    m.extend_from_slice(ROSTER_LABEL);
    m.extend_from_slice(&version.to_be_bytes());
    m.extend_from_slice(&not_after.to_be_bytes());
    m.extend_from_slice(&(devices.len() as u64).to_be_bytes());
    for d in devices {
        m.extend_from_slice(d);
    }
    m
}

impl Roster {
    /// The authority signs the list of `devices` (sorted and deduplicated here) as roster
    /// `version`, valid until `not_after` (seconds since the Unix epoch).
    pub fn sign(
        authority: &DeviceKey,
        mut devices: Vec<[u8; 32]>,
        version: u64,
        not_after: u64,
    ) -> Self {
        devices.sort_unstable();
        devices.dedup();
        let signature = authority.sign(&roster_message(version, not_after, &devices));
        Roster {
            version,
            not_after,
            devices,
            signature,
        }
    }

    /// Checks the authority's signature, that the list is sorted without repeats, and `check`:
    /// not expired at `check.now`, not older than `check.min_version`. Only a verified roster
    /// is a [`TrustedRoster`]; the device should then remember its version as its new
    /// `min_version`.
    pub fn verify(self, authority: &[u8; 32], check: RosterCheck) -> Result<TrustedRoster> {
        if !self.devices.windows(2).all(|w| w[0] < w[1]) {
            return Err(SecAggError::Signature(
                "the roster is not sorted or lists a device twice".into(),
            ));
        }
        if !verify(
            authority,
            &roster_message(self.version, self.not_after, &self.devices),
            &self.signature,
        ) {
            return Err(SecAggError::Signature(
                "the roster is not signed by the enrollment authority this device trusts".into(),
            ));
        }
        if self.not_after < check.now {
            return Err(SecAggError::Policy(format!(
                "the roster (version {}) expired at {} (Unix seconds); this device's clock says \
                 {}: ask the enrollment authority for a current one",
                self.version, self.not_after, check.now
            )));
        }
        if self.version < check.min_version {
            return Err(SecAggError::Policy(format!(
                "the roster is version {}, older than version {} this device has already \
                 accepted: a server relaying an old roster could bring back removed devices",
                self.version, check.min_version
            )));
        }
        let digest = self.digest();
        Ok(TrustedRoster {
            roster: self,
            digest,
        })
    }

    /// SHA-256 of the signed roster: what [`crate::ThreatModel::Active`] names.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(roster_message(self.version, self.not_after, &self.devices));
        h.update(self.signature);
        h.finalize().into()
    }
}

/// A roster whose authority signature has been checked.
#[derive(Debug, Clone)]
pub struct TrustedRoster {
    roster: Roster,
    digest: [u8; 32],
}

impl TrustedRoster {
    /// Whether `device` is enrolled.
    pub fn contains(&self, device: &[u8; 32]) -> bool {
        self.roster.devices.binary_search(device).is_ok()
    }

    /// The roster's digest.
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// The signed roster itself.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// The roster's version (what the device keeps as its next `min_version`).
    pub fn version(&self) -> u64 {
        self.roster.version
    }
}

/// What a client needs to take part in an active-mode round: its device key and, when the round
/// names a roster, that roster verified against the authority it trusts.
#[derive(Debug)]
pub struct Credentials {
    /// The device's long-term key.
    pub device: DeviceKey,
    /// The enrolled devices, or `None` for a round without a roster.
    pub roster: Option<TrustedRoster>,
}

/// The bytes a device signs to advertise its round keys: the round's binding, its id in the
/// round and both X25519 public keys.
pub(crate) fn keys_message(
    binding: &[u8; 32],
    id: ClientId,
    cipher_pk: &[u8; 32],
    mask_pk: &[u8; 32],
) -> Vec<u8> {
    [
        KEYS_LABEL,
        binding,
        &id.to_be_bytes(),
        cipher_pk.as_slice(),
        mask_pk.as_slice(),
    ]
    .concat()
}

/// The bytes a survivor signs in the consistency round: the binding of the key list and U3.
pub(crate) fn survivors_message(keys_binding: &[u8; 32], u3: &[ClientId]) -> Vec<u8> {
    let mut m = Vec::with_capacity(SURVIVORS_LABEL.len() + 40 + 4 * u3.len());
    m.extend_from_slice(SURVIVORS_LABEL);
    m.extend_from_slice(keys_binding);
    m.extend_from_slice(&(u3.len() as u64).to_be_bytes());
    for id in u3 {
        m.extend_from_slice(&id.to_be_bytes());
    }
    m
}

pub(crate) fn sign(device: &DeviceKey, message: &[u8]) -> SignatureBytes {
    device.sign(message)
}

pub(crate) fn check(key: &[u8; 32], message: &[u8], signature: &SignatureBytes) -> bool {
    verify(key, message, signature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    #[test]
    fn a_roster_verifies_only_under_its_authority_and_unchanged() {
        let mut r = ChaCha20Rng::seed_from_u64(1);
        let authority = DeviceKey::generate(&mut r);
        let other = DeviceKey::generate(&mut r);
        let devices: Vec<[u8; 32]> = (0..5)
            .map(|_| DeviceKey::generate(&mut r).verifying_key())
            .collect();
        let roster = Roster::sign(&authority, devices.clone(), 3, 1_000);
        let trusted = roster
            .clone()
            .verify(&authority.verifying_key(), CHECK)
            .unwrap();
        assert!(devices.iter().all(|d| trusted.contains(d)));
        assert!(!trusted.contains(&other.verifying_key()));
        assert_eq!(trusted.digest(), roster.digest());
        assert!(matches!(
            roster.clone().verify(&other.verifying_key(), CHECK),
            Err(SecAggError::Signature(_))
        ));
        // A device added, removed or the signature altered: refused.
        let mut added = roster.clone();
        added.devices.push([0xff; 32]);
        assert!(added.verify(&authority.verifying_key(), CHECK).is_err());
        let mut removed = roster.clone();
        removed.devices.pop();
        assert!(removed.verify(&authority.verifying_key(), CHECK).is_err());
        let mut bad = roster.clone();
        bad.signature[5] ^= 1;
        assert!(bad.verify(&authority.verifying_key(), CHECK).is_err());
        // The version and the expiry are signed: neither can be raised by whoever relays it.
        let mut newer = roster.clone();
        newer.version += 1;
        assert!(matches!(
            newer.verify(&authority.verifying_key(), CHECK),
            Err(SecAggError::Signature(_))
        ));
        let mut longer = roster;
        longer.not_after += 1;
        assert!(matches!(
            longer.verify(&authority.verifying_key(), CHECK),
            Err(SecAggError::Signature(_))
        ));
    }

    const CHECK: RosterCheck = RosterCheck {
        now: 500,
        min_version: 0,
    };

    #[test]
    fn an_expired_or_older_roster_is_refused() {
        let mut r = ChaCha20Rng::seed_from_u64(3);
        let authority = DeviceKey::generate(&mut r);
        let key = authority.verifying_key();
        let removed = DeviceKey::generate(&mut r).verifying_key();
        let kept = DeviceKey::generate(&mut r).verifying_key();
        let v1 = Roster::sign(&authority, vec![removed, kept], 1, 1_000);
        let v2 = Roster::sign(&authority, vec![kept], 2, 2_000);
        // Valid until and including `not_after`.
        let at = |now, min_version| RosterCheck { now, min_version };
        assert!(v1.clone().verify(&key, at(1_000, 0)).is_ok());
        let expired = v1.clone().verify(&key, at(1_001, 0)).unwrap_err();
        assert!(
            matches!(&expired, SecAggError::Policy(m) if m.contains("expired")),
            "{expired}"
        );
        // A device that accepted version 2 refuses version 1, which still lists the removed
        // device, even before version 1 expires.
        let accepted = v2.clone().verify(&key, at(900, 0)).unwrap();
        assert_eq!(accepted.version(), 2);
        assert!(!accepted.contains(&removed));
        let replayed = v1.verify(&key, at(900, accepted.version())).unwrap_err();
        assert!(
            matches!(&replayed, SecAggError::Policy(m) if m.contains("older")),
            "{replayed}"
        );
        // The same version again is fine (rounds reuse the current roster).
        assert!(v2.verify(&key, at(900, 2)).is_ok());
    }

    #[test]
    fn signatures_are_separated_by_domain() {
        let mut r = ChaCha20Rng::seed_from_u64(2);
        let d = DeviceKey::generate(&mut r);
        let keys = keys_message(&[1u8; 32], 3, &[2u8; 32], &[4u8; 32]);
        let s = sign(&d, &keys);
        assert!(check(&d.verifying_key(), &keys, &s));
        assert!(!check(
            &d.verifying_key(),
            &keys_message(&[1u8; 32], 4, &[2u8; 32], &[4u8; 32]),
            &s
        ));
        let surv = survivors_message(&[1u8; 32], &[1, 2, 3]);
        assert!(!check(&d.verifying_key(), &surv, &s));
        let s2 = sign(&d, &surv);
        assert!(check(&d.verifying_key(), &surv, &s2));
        assert!(!check(
            &d.verifying_key(),
            &survivors_message(&[1u8; 32], &[1, 2]),
            &s2
        ));
        // A join credential is bound to its round and binding.
        let j = d.sign_join(&[1u8; 32], "r1");
        assert!(verify_join(&d.verifying_key(), &[1u8; 32], "r1", &j));
        assert!(!verify_join(&d.verifying_key(), &[1u8; 32], "r2", &j));
        assert!(!verify_join(&d.verifying_key(), &[2u8; 32], "r1", &j));
        assert!(!check(&d.verifying_key(), &keys, &j));
        // Small-order verifying keys never verify.
        assert!(!check(&[0u8; 32], &surv, &s2));
    }
}
