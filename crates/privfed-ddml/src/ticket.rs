//! The rules of draw tickets, as data (sans-I/O): whether a draw may take a ticket and which
//! place it takes ([`issue`], [`quota`]), and what a presented ticket is worth ([`redeem`]).
//! The stores of `privfed-server` keep the tickets — the embedded store in a ring of slots, the
//! Redis store as keys that its Lua scripts read and write atomically — and only carry out what
//! these functions decide; the Redis scripts are tested case by case against them.
//!
//! The rules, with their reasons:
//! * **No unused ticket is forgotten before its step time.** A full book reuses the oldest place
//!   whose ticket was used, has expired, or is at least the step time (`min_age`) old, looking
//!   past at most `scan` younger unused ones; if there is none the draw is refused
//!   ([`TicketsFull`], answered 429 with `Retry-After` = the step time minus the age of the
//!   oldest ticket in the way). Draws are anonymous and free: without this rule a flood of draws
//!   would void every honest device's ticket.
//! * **One client holds at most `per_client` tickets within the step time** ([`quota`]); the
//!   next draw waits until its oldest counted draw is `window` old.
//! * **A ticket is redeemed once** ([`redeem`]): unknown → refused; expired → refused; used →
//!   its first outcome again (a retry); being redeemed by a concurrent request → busy; issued by
//!   another incarnation of the model → refused; its instance value is no longer available
//!   (overwritten and not kept) → refused; otherwise fresh, and held in progress.

use std::time::Duration;

/// A model's tickets are all younger than the step time (or one client holds its cap of them):
/// the draw must wait (answered 429 with `Retry-After`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the model's tickets are all in use: retry in {} ms", retry_after.as_millis())]
pub struct TicketsFull {
    /// When the oldest ticket in the way reaches the step time.
    pub retry_after: Duration,
}

/// A ticket's place as the issue rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Time since the ticket was issued.
    pub age: Duration,
    /// Whether its lifetime is over.
    pub expired: bool,
    /// Whether its update came (it is remembered only to answer retries).
    pub used: bool,
}

impl Held {
    /// Whether the ticket may be forgotten to make room: used, expired, or at least `min_age`
    /// (the step time) old.
    pub fn may_be_forgotten(&self, min_age: Duration) -> bool {
        self.expired || self.used || self.age >= min_age
    }
}

/// Where a draw's ticket goes in a book of at most `cap` places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issue {
    /// A new place at the end (the book is not full).
    Append,
    /// Reuse place `at`, forgetting its ticket.
    Reuse {
        /// The place reused.
        at: usize,
    },
}

/// The issue rule of a book of at most `cap` places holding `len` (`len ≤ cap`), whose oldest
/// place is `next`: a new place while `len < cap`; else the first of the `scan` places from
/// `next` on (in ring order) whose ticket [`may be forgotten`](Held::may_be_forgotten); else
/// [`TicketsFull`] with the wait until the ticket at `next` is `min_age` old. `held(i)` is
/// place `i`'s ticket.
pub fn issue(
    len: usize,
    cap: usize,
    next: usize,
    scan: usize,
    min_age: Duration,
    held: impl Fn(usize) -> Held,
) -> Result<Issue, TicketsFull> {
    if len < cap || len == 0 {
        return Ok(Issue::Append);
    }
    let start = next % len;
    (0..scan.min(len))
        .map(|i| (start + i) % len)
        .find(|&i| held(i).may_be_forgotten(min_age))
        .map(|at| Issue::Reuse { at })
        .ok_or_else(|| TicketsFull {
            retry_after: min_age.saturating_sub(held(start).age),
        })
}

/// The per-client cap: a client that holds `count` draws counted within `window`, the oldest
/// `oldest_age` old, may draw if `count < per_client`; else it waits until that oldest draw is
/// `window` old.
pub fn quota(
    count: usize,
    oldest_age: Duration,
    per_client: usize,
    window: Duration,
) -> Result<(), TicketsFull> {
    if count < per_client.max(1) {
        Ok(())
    } else {
        Err(TicketsFull {
            retry_after: window.saturating_sub(oldest_age),
        })
    }
}

/// A presented ticket's record, as the redemption rule sees it (`O`: the outcome remembered
/// for retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<O> {
    /// Issued and not yet redeemed (or its in-progress hold lapsed: its request died).
    Issued {
        /// Whether it was issued by this incarnation of the model (a model deleted and created
        /// again under the same name refuses its predecessor's tickets).
        same_model: bool,
        /// Whether the instance value it drew is still at hand (current, or kept for tickets).
        base_available: bool,
    },
    /// Being redeemed by a request that is still running.
    InProgress,
    /// Used: the outcome of its first redemption.
    Used(O),
}

/// Why a ticket is refused (the device draws again; answered 409 with [`Refusal::reason`] as
/// the body's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No such ticket (never issued, forgotten, or forged).
    #[error("unknown ticket")]
    Unknown,
    /// Its lifetime is over.
    #[error("expired ticket")]
    Expired,
    /// Issued by an earlier incarnation of the model.
    #[error("ticket of another model")]
    OtherModel,
    /// The instance value it drew was overwritten and is no longer kept.
    #[error("the instance drawn was overwritten")]
    Overwritten,
}

impl Refusal {
    /// The stable machine-readable reason of a 409 (`reason` in the error body):
    /// `ticket_unknown`, `ticket_expired`, `ticket_for_another_model` or
    /// `instance_overwritten`.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Unknown => "ticket_unknown",
            Refusal::Expired => "ticket_expired",
            Refusal::OtherModel => "ticket_for_another_model",
            Refusal::Overwritten => "instance_overwritten",
        }
    }
}

/// The `reason` of a 409 for a ticket held by a concurrent request ([`Redeem::InProgress`]).
pub const IN_PROGRESS_REASON: &str = "ticket_in_progress";

/// What a presented ticket is worth. `B` is what a fresh ticket hands over: nothing from the
/// rule itself ([`redeem`]); the instance value it drew from a store (the embedded store's
/// handle, the Redis store's weights).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeem<O, B = ()> {
    /// Valid and unused: its update may be decided; the ticket is now held in progress.
    Fresh(B),
    /// Used before: answer its first outcome again.
    Replay(O),
    /// Being redeemed by a concurrent request.
    InProgress,
    /// Refused.
    Refuse(Refusal),
}

impl<O, B> Redeem<O, B> {
    /// The same answer with a fresh ticket's payload `b` (`f` is not called otherwise).
    pub fn with_base<C>(self, f: impl FnOnce(B) -> C) -> Redeem<O, C> {
        match self {
            Redeem::Fresh(b) => Redeem::Fresh(f(b)),
            Redeem::Replay(o) => Redeem::Replay(o),
            Redeem::InProgress => Redeem::InProgress,
            Redeem::Refuse(r) => Redeem::Refuse(r),
        }
    }
}

/// The redemption rule: `record` is the ticket's record (`None` if there is none), `expired`
/// whether its lifetime is over. In this order: no record → [`Refusal::Unknown`]; expired →
/// [`Refusal::Expired`]; used → [`Redeem::Replay`]; in progress → [`Redeem::InProgress`];
/// another incarnation's → [`Refusal::OtherModel`]; its value gone → [`Refusal::Overwritten`];
/// else [`Redeem::Fresh`].
pub fn redeem<O>(record: Option<Record<O>>, expired: bool) -> Redeem<O> {
    match record {
        None => Redeem::Refuse(Refusal::Unknown),
        Some(_) if expired => Redeem::Refuse(Refusal::Expired),
        Some(Record::Used(o)) => Redeem::Replay(o),
        Some(Record::InProgress) => Redeem::InProgress,
        Some(Record::Issued {
            same_model: false, ..
        }) => Redeem::Refuse(Refusal::OtherModel),
        Some(Record::Issued {
            base_available: false,
            ..
        }) => Redeem::Refuse(Refusal::Overwritten),
        Some(Record::Issued { .. }) => Redeem::Fresh(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(30);

    fn young(secs: u64) -> Held {
        Held {
            age: Duration::from_secs(secs),
            expired: false,
            used: false,
        }
    }

    /// A book with room appends; a full book of young unused tickets refuses with the wait
    /// until the oldest is the step time old; a used, expired or old ticket within the scan is
    /// reused, the first in ring order from the oldest; one past the scan is not looked at.
    #[test]
    fn the_issue_rule_never_forgets_a_young_unused_ticket() {
        assert_eq!(issue(3, 4, 0, 64, S, |_| young(0)), Ok(Issue::Append));
        let ages = [10u64, 5, 4, 3];
        let full = issue(4, 4, 0, 64, S, |i| young(ages[i]));
        assert_eq!(
            full,
            Err(TicketsFull {
                retry_after: Duration::from_secs(20)
            })
        );
        let with = |k: usize, h: Held| move |i: usize| if i == k { h } else { young(ages[i]) };
        let used = Held {
            used: true,
            ..young(1)
        };
        let expired = Held {
            expired: true,
            ..young(1)
        };
        assert_eq!(
            issue(4, 4, 1, 64, S, with(2, used)),
            Ok(Issue::Reuse { at: 2 })
        );
        assert_eq!(
            issue(4, 4, 3, 64, S, with(0, expired)),
            Ok(Issue::Reuse { at: 0 })
        );
        assert_eq!(
            issue(4, 4, 0, 64, S, with(1, young(30))),
            Ok(Issue::Reuse { at: 1 })
        );
        // Scanning 2 places from place 0 does not reach place 2.
        assert!(issue(4, 4, 0, 2, S, with(2, used)).is_err());
    }

    /// The cap counts draws below it and refuses at it with the wait for the oldest.
    #[test]
    fn the_quota_refuses_at_the_cap() {
        assert_eq!(quota(0, Duration::ZERO, 2, S), Ok(()));
        assert_eq!(quota(1, Duration::from_secs(3), 2, S), Ok(()));
        assert_eq!(
            quota(2, Duration::from_secs(3), 2, S),
            Err(TicketsFull {
                retry_after: Duration::from_secs(27)
            })
        );
        // A cap of 0 is a cap of 1.
        assert_eq!(quota(0, Duration::ZERO, 0, S), Ok(()));
    }

    /// Every record, expired or not, gets the decision of the rule's order.
    #[test]
    fn the_redemption_rule_in_order() {
        let issued = |same_model, base_available| {
            Some(Record::<u8>::Issued {
                same_model,
                base_available,
            })
        };
        assert_eq!(redeem::<u8>(None, false), Redeem::Refuse(Refusal::Unknown));
        for r in [
            issued(true, true),
            Some(Record::Used(7)),
            Some(Record::InProgress),
        ] {
            assert_eq!(redeem(r, true), Redeem::Refuse(Refusal::Expired));
        }
        assert_eq!(redeem(Some(Record::Used(7)), false), Redeem::Replay(7));
        assert_eq!(
            redeem::<u8>(Some(Record::InProgress), false),
            Redeem::InProgress
        );
        assert_eq!(
            redeem(issued(false, true), false),
            Redeem::Refuse(Refusal::OtherModel)
        );
        assert_eq!(
            redeem(issued(true, false), false),
            Redeem::Refuse(Refusal::Overwritten)
        );
        assert_eq!(redeem(issued(true, true), false), Redeem::Fresh(()));
    }
}
