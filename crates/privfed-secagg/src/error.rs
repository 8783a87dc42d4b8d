//! Typed errors of the protocol. Each names what was wrong; none carries secret material.

use crate::ids::{ClientId, Stage};

/// Why an operation of the protocol failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecAggError {
    /// A configuration parameter is out of range.
    #[error("invalid configuration: {name} = {value}: {reason}")]
    InvalidConfig {
        /// The parameter.
        name: &'static str,
        /// Its value, printed.
        value: String,
        /// What it must satisfy.
        reason: String,
    },
    /// A message could not be decoded (truncated, tampered framing, unknown variant).
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The message was made for another protocol version.
    #[error("protocol version {got} is not supported (this side speaks {expected})")]
    Version {
        /// The version this side speaks.
        expected: u32,
        /// The version in the message.
        got: u32,
    },
    /// The message belongs to another session or configuration (its binding differs).
    #[error("message is bound to another session or configuration")]
    WrongSession,
    /// The message is for another stage than the one in progress (a replay or a reordering).
    #[error("message for stage {got:?} while the round is at stage {expected:?}")]
    WrongStage {
        /// The stage in progress.
        expected: Stage,
        /// The stage the message is for.
        got: Stage,
    },
    /// The message names a sender or recipient that is not this party or not in the round.
    #[error("unexpected party {id}: {reason}")]
    UnexpectedParty {
        /// The client id in question.
        id: ClientId,
        /// Why it is unexpected.
        reason: String,
    },
    /// A client sent a different message for a stage it had already answered.
    #[error("client {0} already sent a different message for this stage")]
    Conflict(ClientId),
    /// A message's content contradicts the protocol (duplicate keys, missing shares, ...).
    #[error("protocol violation: {0}")]
    Violation(String),
    /// A share ciphertext failed authentication (forged, tampered, or for another pair/session).
    #[error("share ciphertext from client {sender} failed authentication")]
    Decryption {
        /// The claimed sender.
        sender: ClientId,
    },
    /// The server asked for both the self-mask share and the key share of one client, or changed
    /// its account of who survived: an honest client aborts rather than answer.
    #[error("inconsistent unmasking request: {0}")]
    InconsistentRequest(String),
    /// The client's input vector is not in Z_{2^b}^d.
    #[error("input: {0}")]
    Input(String),
    /// Fewer than the threshold of parties remain: the round aborts and reveals nothing.
    #[error("round aborted: {0}")]
    Aborted(String),
    /// Shares do not lie on one polynomial (a corrupted share).
    #[error("shares are inconsistent: {0}")]
    InconsistentShares(String),
    /// Shares are inconsistent and too few extra shares arrived to tell which are wrong
    /// (`e` wrong shares need `t + 2e`): nothing is reconstructed.
    #[error("inconsistent shares, not traceable with these extra shares: {0}")]
    UntraceableShares(String),
    /// A signature, a roster or a device key failed its check (active mode): a forged,
    /// unsigned or wrongly signed key, a device not on the roster, a bad survivor signature.
    #[error("signature check failed: {0}")]
    Signature(String),
    /// A client's sealed round state ([`crate::crypto::open_seed`]) does not open: sealed
    /// under another key, for another binding (round, node, client, time), altered, or cut.
    #[error("the round's sealed state does not open: {0}")]
    SealedState(String),
    /// The server's account of the round contradicts itself or what the client derived
    /// (active mode): a U3 signed by fewer than `t` neighbours, a U3 other than the one the
    /// client signed, a key list without the client's own keys.
    #[error("inconsistent view of the round: {0}")]
    Inconsistent(String),
    /// The client's policy refuses the round's parameters (too small a cohort or threshold,
    /// the wrong threat model).
    #[error("the client's policy refuses this round: {0}")]
    Policy(String),
    /// The client's [`crate::policy::ClientPolicy`] refuses the round: `rule` is the policy's
    /// field, `value` the round's, `limit` what the rule asks.
    #[error("the client's policy refuses this round: {rule}: {value}, the policy asks {limit}")]
    Refused {
        /// The rule broken (a [`crate::policy::ClientPolicy`] field name).
        rule: &'static str,
        /// The round's value, printed.
        value: String,
        /// What the rule asks, printed.
        limit: String,
    },
    /// A server message is longer than the largest one an honest server sends at this stage
    /// of this round ([`crate::messages::max_server_message_len`]); it is refused unread.
    #[error("a {stage:?} message of {len} bytes exceeds the round's cap of {cap} bytes")]
    TooLarge {
        /// The stage the client waits for.
        stage: Stage,
        /// The message's length (or its announced length), in bytes.
        len: u64,
        /// The cap, in bytes.
        cap: u64,
    },
    /// The operation is not possible in the party's current state.
    #[error("not possible now: {0}")]
    State(String),
}

impl SecAggError {
    /// Whether a client that hit this error must abort the round (drop its secrets) rather than
    /// ignore the offending message. Stale or misaddressed messages are ignored; anything that
    /// shows the server or a peer misbehaving, or a round that cannot finish, aborts.
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            SecAggError::WrongStage { .. }
                | SecAggError::WrongSession
                | SecAggError::Version { .. }
                | SecAggError::Malformed(_)
                | SecAggError::Input(_)
                | SecAggError::State(_)
        )
    }

    pub(crate) fn config(
        name: &'static str,
        value: impl ToString,
        reason: impl Into<String>,
    ) -> Self {
        SecAggError::InvalidConfig {
            name,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Result of the protocol's operations.
pub type Result<T> = std::result::Result<T, SecAggError>;
