//! The names every other module uses: a client's id and the stages of a round. A leaf module
//! (it imports nothing from the crate), so `error` can name them without importing `config` or
//! `messages`, which import `error`. Public as `config::ClientId` and `messages::Stage`.

use serde::{Deserialize, Serialize};

/// A client's id in a round: 1..=n (0 is never an id; it is Shamir's secret point).
pub type ClientId = u32;

/// The stages of a round, in order, named by what the clients send in them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Clients send their two public keys.
    AdvertiseKeys,
    /// Clients send encrypted shares of their secrets to their neighbours.
    ShareKeys,
    /// Clients send their masked input.
    MaskedInput,
    /// Active mode only: survivors sign the set U3 of clients whose masked input the server
    /// holds.
    ConsistencyCheck,
    /// Clients send the shares that remove the masks.
    Unmasking,
}

impl Stage {
    /// All stages in order (an honest-but-curious round skips [`Stage::ConsistencyCheck`]:
    /// see [`crate::RoundConfig::stages`]).
    pub const ALL: [Stage; 5] = [
        Stage::AdvertiseKeys,
        Stage::ShareKeys,
        Stage::MaskedInput,
        Stage::ConsistencyCheck,
        Stage::Unmasking,
    ];

    /// A short name (for logs, metrics and reports).
    pub fn name(self) -> &'static str {
        match self {
            Stage::AdvertiseKeys => "advertise_keys",
            Stage::ShareKeys => "share_keys",
            Stage::MaskedInput => "masked_input",
            Stage::ConsistencyCheck => "consistency_check",
            Stage::Unmasking => "unmasking",
        }
    }
}
