//! The server's decisions about an update, as data (sans-I/O): given a model's policy, the
//! instance the update's ticket drew, the spam filter's statistics and the update, the engine
//! says what to do — overwrite instance `j` with the update, or count a rejection — and the
//! stores of `privfed-server` only persist that decision (and replay it after a crash). So
//! the embedded and the Redis store cannot disagree on a rule: both call
//! [`decide_update`], and a log of decisions replayed into either store gives the same model.
//!
//! ```
//! use privfed_ddml::decision::{Decision, UpdatePolicy, decide_update};
//! use privfed_mechanisms::rng::seeded_rng_for_experiments;
//!
//! let policy = UpdatePolicy { k: 4, init_std: 0.0, guard: None, spam: None };
//! let mut rng = seeded_rng_for_experiments(3);
//! match decide_update(&policy, None, None, &[0.5, -0.5], &mut rng).unwrap() {
//!     Decision::Write { instance } => assert!(instance < 4),
//!     Decision::Reject(r) => panic!("no guard, no filter, yet rejected: {r}"),
//! }
//! ```

use crate::engine::{InstanceStats, SpamFilter, SpamRejection, replacement_index};
use crate::guard::{GuardRejection, GuardTest, StepGuard};
use rand::Rng;

/// Why an update was refused (counted durably as rejected).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejection {
    /// The update guard: not a plausible client step from the instance drawn
    /// ([`crate::guard`]).
    #[error("{0}")]
    Guard(GuardRejection),
    /// The spam filter of paper 003 §III-D4.
    #[error("{0}")]
    Spam(SpamRejection),
}

impl Rejection {
    /// The stable machine-readable reason of the 422 (`reason` in the error body): `spam_filter`,
    /// or the guard's failed test as `guard_max_abs_weight`, `guard_coordinate` or `guard_norm`.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::Spam(_) => "spam_filter",
            Rejection::Guard(g) => match g.test {
                GuardTest::MaxAbsWeight => "guard_max_abs_weight",
                GuardTest::Coordinate => "guard_coordinate",
                GuardTest::Norm => "guard_norm",
            },
        }
    }
}

/// What to do with an update: the data a store persists.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Overwrite instance `instance` (uniform on `0..k`, independent of the draw) with the
    /// update, and count it accepted.
    Write {
        /// The instance replaced.
        instance: usize,
    },
    /// Count the update rejected; nothing is written.
    Reject(Rejection),
}

/// A model's rules for its updates.
#[derive(Debug, Clone, Copy)]
pub struct UpdatePolicy<'a> {
    /// Number of instances.
    pub k: usize,
    /// The declared initialization spread (clamps the spam band, [`SpamFilter::band_sd`]).
    pub init_std: f64,
    /// The update guard, if the model has one (then every update needs the instance its ticket
    /// drew).
    pub guard: Option<&'a StepGuard>,
    /// The spam filter, if the model has one.
    pub spam: Option<&'a SpamFilter>,
}

/// An update the engine cannot decide on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// The model has an update guard and the update came without the instance it stepped from
    /// (no ticket).
    #[error("the model's update guard needs the instance the update stepped from (its ticket)")]
    TicketRequired,
}

/// Decides an update (finite, of the model's length: validate it first): the guard against
/// `base`, the instance its ticket drew (required when the policy has a guard); then the spam
/// filter against `stats` (skipped when `None`); if both pass, the instance to overwrite, drawn
/// from `rng`.
pub fn decide_update<R: Rng + ?Sized>(
    policy: &UpdatePolicy<'_>,
    base: Option<&[f32]>,
    stats: Option<&InstanceStats>,
    weights: &[f32],
    rng: &mut R,
) -> Result<Decision, DecisionError> {
    if let Some(g) = policy.guard {
        let base = base.ok_or(DecisionError::TicketRequired)?;
        if let Err(r) = g.check(base, weights) {
            return Ok(Decision::Reject(Rejection::Guard(r)));
        }
    }
    if let (Some(f), Some(stats)) = (policy.spam, stats)
        && let Err(r) = f.check(stats, weights, policy.init_std)
    {
        return Ok(Decision::Reject(Rejection::Spam(r)));
    }
    Ok(Decision::Write {
        instance: replacement_index(policy.k, rng),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;

    /// The spam filter rejects an update far outside the band, passes one inside it, and the
    /// instance written is uniform on `0..k` (each of 4 instances seen in 400 decisions; a miss
    /// has probability 4·(3/4)^400 < 1e-49).
    #[test]
    fn the_filter_decides_and_writes_are_uniform() {
        let instances = vec![
            vec![0.0f32, 1.0],
            vec![1.0, 0.0],
            vec![0.5, 0.5],
            vec![0.2, 0.8],
        ];
        let stats = InstanceStats::from_instances(&instances).unwrap();
        let spam = SpamFilter::new(3.0, 0.0).unwrap();
        let policy = UpdatePolicy {
            k: 4,
            init_std: 0.5,
            guard: None,
            spam: Some(&spam),
        };
        let mut rng = seeded_rng_for_experiments(9);
        let far = decide_update(&policy, None, Some(&stats), &[1e6, 0.0], &mut rng).unwrap();
        assert!(matches!(far, Decision::Reject(Rejection::Spam(_))));
        let mut seen = [false; 4];
        for _ in 0..400 {
            match decide_update(&policy, None, Some(&stats), &[0.4, 0.6], &mut rng).unwrap() {
                Decision::Write { instance } => seen[instance] = true,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(seen, [true; 4]);
    }
}
