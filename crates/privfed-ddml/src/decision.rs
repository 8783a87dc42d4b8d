//! The server's decisions about an update, as data (sans-I/O): given a model's policy, the
//! instance the update's ticket drew, the spam filter's statistics and the update, the engine
//! says what to do — overwrite instance `j` with the update, or count a rejection — and the
//! stores of `privfed-server` only persist that decision (and replay it after a crash). So
//! the embedded and the Redis store cannot disagree on a rule: both call
//! [`decide_update`], and a log of decisions replayed into either store gives the same model.
//! The spam filter's statistics follow the decisions through [`SpamStats`]'s transitions, and a
//! refusal names itself ([`Rejection::reason`]).
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

/// How many overwrites [`SpamStats`] follows with running sums before it recomputes them from
/// the instances (bounds the sums' rounding error: see [`InstanceStats`]).
pub const SPAM_RECOMPUTE_EVERY: u64 = 4096;

/// The spam filter's statistics of a model: the per-weight mean and sample variance across its
/// `k` instances ([`InstanceStats`]), kept as running sums, and the overwrites since they were
/// last computed afresh. Its transitions are the engine's, so every store follows the same ones:
///
/// * [`SpamStats::new`]: `μ_j = (1/k)·Σ_i x_ij`, `s²_j = Σ_i (x_ij − μ_j)²/(k − 1)`, two-pass
///   (a model's creation, a store's start-up, and every recomputation);
/// * [`SpamStats::on_write`] (a [`Decision::Write`] of instance `i` from `old` to `new`): each
///   weight's sums `Σ d`, `Σ d²` (deviations `d` from the shift) lose `old_j` and gain `new_j`,
///   O(p); it answers whether the sums must now be recomputed — after every
///   [`SPAM_RECOMPUTE_EVERY`]-th overwrite, or when they may have lost their precision
///   ([`InstanceStats::replace`]) — and the store then calls [`SpamStats::recompute`] with the
///   instances as they are once the write is installed;
/// * a [`Decision::Reject`] leaves them as they are (nothing is written).
///
/// The filter reads them through [`SpamStats::instances`] ([`decide_update`]'s `stats`).
#[derive(Debug, Clone, PartialEq)]
pub struct SpamStats {
    instances: InstanceStats,
    overwrites: u64,
}

impl SpamStats {
    /// Statistics of `instances` (all of the same length, finite, at least one), computed
    /// afresh.
    pub fn new<T: Copy + Into<f64>, S: AsRef<[T]>>(instances: &[S]) -> crate::Result<Self> {
        Ok(Self {
            instances: InstanceStats::from_instances(instances)?,
            overwrites: 0,
        })
    }

    /// The per-weight statistics the filter reads.
    pub fn instances(&self) -> &InstanceStats {
        &self.instances
    }

    /// Overwrites followed since the last computation afresh.
    pub fn overwrites(&self) -> u64 {
        self.overwrites
    }

    /// Follows an overwrite of an instance from `old` to `new` (both of length `p`, finite);
    /// `true` if the sums must now be recomputed ([`SpamStats::recompute`]).
    pub fn on_write<T: Copy + Into<f64>>(&mut self, old: &[T], new: &[T]) -> bool {
        self.overwrites += 1;
        let precise = self.instances.replace(old, new);
        !precise || self.overwrites.is_multiple_of(SPAM_RECOMPUTE_EVERY)
    }

    /// Computes the statistics afresh from `instances` (the model's as they are now); on an
    /// error (instances of unequal length or non-finite) they stay as they were.
    pub fn recompute<T: Copy + Into<f64>, S: AsRef<[T]>>(
        &mut self,
        instances: &[S],
    ) -> crate::Result<()> {
        self.instances = InstanceStats::from_instances(instances)?;
        Ok(())
    }
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
    use rand::RngExt;

    /// The transitions: a write moves the statistics to those of the instances after it (within
    /// the running sums' stated precision), a recomputation gives exactly the statistics
    /// computed afresh, every `SPAM_RECOMPUTE_EVERY`-th write asks for one, and a write that
    /// removes a value far larger than the spread (precision lost) asks for one at once.
    #[test]
    fn spam_stats_transitions() {
        let mut rng = seeded_rng_for_experiments(36);
        let (k, p) = (5usize, 3usize);
        let mut inst: Vec<Vec<f32>> = (0..k)
            .map(|_| (0..p).map(|_| rng.random_range(-1.0f32..1.0)).collect())
            .collect();
        let mut stats = SpamStats::new(&inst).unwrap();
        let mut asked = Vec::new();
        for n in 1..=2 * SPAM_RECOMPUTE_EVERY {
            let i = rng.random_range(0..k);
            let new: Vec<f32> = (0..p).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            if stats.on_write(&inst[i], &new) {
                asked.push(n);
            }
            inst[i] = new;
            if asked.last() == Some(&n) {
                stats.recompute(&inst).unwrap();
            }
            let fresh = InstanceStats::from_instances(&inst).unwrap();
            for j in 0..p {
                let sd = fresh.variance(j).sqrt();
                assert!((stats.instances().mean(j) - fresh.mean(j)).abs() <= 2f64.powi(-29) * sd);
                let rel =
                    (stats.instances().variance(j) - fresh.variance(j)).abs() / fresh.variance(j);
                assert!(rel <= 2f64.powi(-17), "write {n}, weight {j}: {rel}");
            }
        }
        assert_eq!(asked, [SPAM_RECOMPUTE_EVERY, 2 * SPAM_RECOMPUTE_EVERY]);
        assert_eq!(stats.overwrites(), 2 * SPAM_RECOMPUTE_EVERY);
        // After a recomputation: exactly the statistics computed afresh.
        assert_eq!(
            stats.instances(),
            &InstanceStats::from_instances(&inst).unwrap()
        );

        // A huge value replaced by an ordinary one: the sums lost their precision.
        let mut big = inst.clone();
        big[0] = vec![1e30; p];
        let mut stats = SpamStats::new(&big).unwrap();
        assert!(stats.on_write(&big[0], &inst[0]));
        stats.recompute(&inst).unwrap();
        assert_eq!(
            stats.instances(),
            &InstanceStats::from_instances(&inst).unwrap()
        );
        // A failed recomputation leaves them as they were.
        let before = stats.clone();
        assert!(stats.recompute(&[vec![1.0f32], vec![1.0, 2.0]]).is_err());
        assert_eq!(stats, before);
    }

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
