//! Choosing SecAgg+'s degree `k` and threshold `t` (Bell et al. 2020, §4) for a cohort, in
//! either threat model.
//!
//! Model (as Bell et al.): ⌈δn⌉ clients drop out and ⌈γn⌉ are corrupted (collude with the
//! server), chosen independently of the random graph. A client's `k` neighbours are then a
//! uniform sample of the other n − 1, so they hold `D ~ Hypergeometric(n − 1, ⌈δn⌉, k)` dropouts
//! and `C ~ Hypergeometric(n − 1, ⌈γn⌉, k)` corrupted clients (for the complete graph, exactly
//! all of them).
//!
//! * **Correctness** fails if some client keeps fewer than `t` surviving neighbours (its
//!   secrets cannot be reconstructed): probability ≤ n·P[D > k − t] (union bound).
//! * **Secrets** ([`plan_secagg_plus`], honest-but-curious): colluders that reveal both kinds of
//!   share of a client: `2t ≤ k + C`. Probability ≤ n·P[C ≥ 2t − k]. This is the only security
//!   bound of the honest-but-curious mode, and it does **not** protect against a server that
//!   lies about dropouts: the neighbour-share attack ([`crate::adversary`]) needs no colluder.
//!
//! The active mode ([`plan_active`]) adds, for a server that lies about dropouts and places
//! nobody itself (the graph is derived from the whole signed key list):
//! * **Connectivity** of the honest survivors: a client that unmasks has at least `t` surviving
//!   neighbours (it checks), at most `C` of them colluders; with `t − C > k/2` honest ones, no
//!   run of `k/2` ring places next to an honest survivor is empty of honest survivors, so the
//!   sum cannot split into small groups (Bell et al.'s condition). Fails with probability
//!   ≤ n·P[C ≥ t − k/2]; since `t − k/2 ≤ 2t − k`, this bound always dominates the secrets bound.
//! * **Grinding**: the server can change the placement only by changing who is in U1; a server
//!   that tries 2^G placements multiplies both security bounds by 2^G (union bound), so they are
//!   held below 2^-(S+G).
//! * **Complete graph**: one survivor set U3 needs `t` signatures, honest clients sign one set
//!   and colluders any, so two sets cannot both gather `t` when `2t > n + c` (c = ⌈γn⌉); the
//!   threshold is `⌊(n + c)/2⌋ + 1` (as FCP's threshold finder accounts for the colluding
//!   fraction).
//!
//! The plan is the smallest even `k` (then the smallest `t`) with every bound below its target
//! (2^-40 and 2^-20 by default); when no `k < n − 1` does, the complete graph with its best `t`.
//! [`SecAggPlusPlan::decided_by`] names the bound with the least slack.

use serde::Serialize;

use crate::config::{GraphSpec, RoundConfig, ThreatModel};
use crate::error::{Result, SecAggError};
use privfed_special::{ln_binomial, log_sum_exp};

/// The chosen graph and threshold, with the failure bounds they meet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecAggPlusPlan {
    /// Complete or Harary with the degree below.
    pub graph: GraphSpec,
    /// Neighbours per client.
    pub degree: u32,
    /// Shares needed to reconstruct a secret.
    pub threshold: u32,
    /// log2 of the bound on the probability that a lying server learns a client's input
    /// (`"-inf"` when it is impossible: more than the corrupted clients would be needed).
    #[serde(serialize_with = "log2_json")]
    pub security_log2: f64,
    /// log2 of the bound on the probability that the round cannot finish (`"-inf"` when it
    /// cannot fail).
    #[serde(serialize_with = "log2_json")]
    pub correctness_log2: f64,
    /// `honest-but-curious` or `active`.
    pub threat_model: &'static str,
    /// The bound with the least slack at this plan: `secrets`, `connectivity`, `correctness`,
    /// or `complete-graph` (the active complete graph's `2t > n + γn`).
    pub decided_by: &'static str,
    /// log2 of the placements a grinding server is assumed to try (active mode; 0 otherwise).
    pub grinding_bits: f64,
}

/// A log2 probability for JSON, which has no infinities: −∞ (probability 0) as `"-inf"`.
pub(crate) fn log2_json<S: serde::Serializer>(
    v: &f64,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_str("-inf")
    }
}

/// ln P[X ≥ a] for X ~ Hypergeometric(population, marked, draws): `draws` taken without
/// replacement from `population` of which `marked` are marked.
fn ln_tail(population: u32, marked: u32, draws: u32, a: u32) -> f64 {
    if a == 0 {
        return 0.0;
    }
    let hi = marked.min(draws);
    if a > hi {
        return f64::NEG_INFINITY;
    }
    let (pop, m, k) = (population as f64, marked as f64, draws as f64);
    let ln_total = ln_binomial(pop, k);
    let terms: Vec<f64> = (a..=hi)
        .filter(|&i| draws - i <= population - marked)
        .map(|i| ln_binomial(m, i as f64) + ln_binomial(pop - m, k - i as f64) - ln_total)
        .collect();
    if terms.is_empty() {
        return f64::NEG_INFINITY;
    }
    log_sum_exp(&terms).min(0.0)
}

/// log2 of the two failure bounds for degree `k`, threshold `t`.
fn bounds(n: u32, k: u32, t: u32, dropout: f64, corrupt: f64) -> (f64, f64) {
    let b = all_bounds(n, k, t, dropout, corrupt);
    (b.secrets, b.correctness)
}

/// log2 of every failure bound for degree `k`, threshold `t` (no grinding).
struct Bounds {
    secrets: f64,
    connectivity: f64,
    correctness: f64,
}

fn all_bounds(n: u32, k: u32, t: u32, dropout: f64, corrupt: f64) -> Bounds {
    let others = n.saturating_sub(1);
    let dropped = ((dropout * n as f64).ceil() as u32).min(others);
    let corrupted = ((corrupt * n as f64).ceil() as u32).min(others);
    bounds_for_counts(n, k, t, dropped, corrupted)
}

/// [`all_bounds`] for `dropped` dropouts and `corrupted` colluders, counted.
fn bounds_for_counts(n: u32, k: u32, t: u32, dropped: u32, corrupted: u32) -> Bounds {
    let ln_n = (n as f64).ln();
    let others = n.saturating_sub(1);
    let secrets = ln_n + ln_tail(others, corrupted, k, (2 * t).saturating_sub(k));
    let connectivity = ln_n + ln_tail(others, corrupted, k, t.saturating_sub(k / 2));
    let correctness = ln_n + ln_tail(others, dropped, k, k - t + 1);
    let l2 = std::f64::consts::LN_2;
    Bounds {
        secrets: secrets / l2,
        connectivity: connectivity / l2,
        correctness: correctness / l2,
    }
}

fn check_plan_args(
    clients: u32,
    dropout: f64,
    corrupt: f64,
    targets: &[(&'static str, f64)],
) -> Result<()> {
    if clients < 3 {
        return Err(SecAggError::config(
            "clients",
            clients,
            "must be at least 3",
        ));
    }
    for (name, v) in [("dropout", dropout), ("corrupt", corrupt)] {
        if !(0.0..1.0).contains(&v) {
            return Err(SecAggError::config(name, v, "must be in [0, 1)"));
        }
    }
    for &(name, v) in targets {
        if !(v.is_finite() && v >= 0.0) || (name != "grinding_bits" && v == 0.0) {
            return Err(SecAggError::config(
                name,
                v,
                if name == "grinding_bits" {
                    "must be finite and non-negative"
                } else {
                    "must be positive"
                },
            ));
        }
    }
    Ok(())
}

/// log2 of the planner's bound on a neighbourhood holding too many colluders to keep a
/// client's secrets, for one placement (no grinding): `n · P[X ≥ 2t − k]` with
/// `X ~ Hypergeometric(n − 1, ⌈γ·n⌉, k)` the colluders among a client's `k` neighbours when the
/// graph is a uniformly random Harary placement (Bell et al. 2020, the union bound over the
/// `n` clients). [`plan_active`] charges `2^grinding_bits` times the larger of this and the
/// connectivity bound.
pub fn secrets_bound_log2(clients: u32, degree: u32, threshold: u32, corrupt: f64) -> f64 {
    all_bounds(clients, degree, threshold, 0.0, corrupt).secrets
}

/// [`secrets_bound_log2`] for exactly `colluders` colluding clients (instead of `⌈γ·n⌉`):
/// `n · P[X ≥ 2t − k]`, `X ~ Hypergeometric(n − 1, colluders, k)`. Divided by `n` it is the
/// probability that one uniformly random placement puts `2t − k` of the colluders among a given
/// honest client's `k` neighbours — the event a grinding server re-tries for
/// ([`crate::adversary::grind_placement`]).
pub fn secrets_bound_log2_colluders(
    clients: u32,
    degree: u32,
    threshold: u32,
    colluders: u32,
) -> f64 {
    let others = clients.saturating_sub(1);
    bounds_for_counts(clients, degree, threshold, 0, colluders.min(others)).secrets
}

/// The complete graph's threshold in the active mode: `⌊(n + c)/2⌋ + 1` with `c = ⌈γn⌉`
/// colluders, so that two survivor sets can never both gather `t` signatures.
pub fn active_complete_threshold(clients: u32, corrupt: f64) -> u32 {
    let c = (corrupt * clients as f64).ceil() as u32;
    (clients + c.min(clients)) / 2 + 1
}

/// Plans the active mode for `clients` with dropout rate `dropout` and colluding fraction
/// `corrupt`: every security bound (secrets, connectivity) times 2^`grinding_bits` at most
/// 2^-`security_bits`, the correctness bound at most 2^-`correctness_bits`. The complete graph
/// (when no sparser one fits) uses [`active_complete_threshold`].
pub fn plan_active(
    clients: u32,
    dropout: f64,
    corrupt: f64,
    security_bits: f64,
    correctness_bits: f64,
    grinding_bits: f64,
) -> Result<SecAggPlusPlan> {
    check_plan_args(
        clients,
        dropout,
        corrupt,
        &[
            ("security_bits", security_bits),
            ("correctness_bits", correctness_bits),
            ("grinding_bits", grinding_bits),
        ],
    )?;
    let fits = |k: u32| -> Option<(u32, Bounds)> {
        (k / 2 + 1..=k).find_map(|t| {
            let b = all_bounds(clients, k, t, dropout, corrupt);
            let security = b.secrets.max(b.connectivity) + grinding_bits;
            (security <= -security_bits && b.correctness <= -correctness_bits).then_some((t, b))
        })
    };
    let mut k = 2;
    while k < clients - 1 {
        if let Some((t, b)) = fits(k) {
            let security = b.secrets.max(b.connectivity) + grinding_bits;
            let decided_by = if -correctness_bits - b.correctness < -security_bits - security {
                "correctness"
            } else if b.connectivity >= b.secrets {
                "connectivity"
            } else {
                "secrets"
            };
            return Ok(SecAggPlusPlan {
                graph: GraphSpec::Harary { degree: k },
                degree: k,
                threshold: t,
                security_log2: security,
                correctness_log2: b.correctness,
                threat_model: "active",
                decided_by,
                grinding_bits,
            });
        }
        k += 2;
    }
    let k = clients - 1;
    let t = active_complete_threshold(clients, corrupt);
    let dropped = (dropout * clients as f64).ceil() as u32;
    // Every survivor needs t surviving neighbours: n − dropped − 1 ≥ t.
    if t > k || clients.saturating_sub(dropped + 1) < t {
        return Err(SecAggError::config(
            "clients",
            clients,
            format!(
                "the active complete graph needs t = {t} surviving neighbours per client, which \
                 {clients} clients with dropout {dropout} cannot keep: use more clients, or \
                 accept a lower dropout or colluding fraction"
            ),
        ));
    }
    Ok(SecAggPlusPlan {
        graph: GraphSpec::Complete,
        degree: k,
        threshold: t,
        security_log2: f64::NEG_INFINITY,
        correctness_log2: f64::NEG_INFINITY,
        threat_model: "active",
        decided_by: "complete-graph",
        grinding_bits: 0.0,
    })
}

/// Plans SecAgg+ for `clients` with dropout rate `dropout` and corrupted fraction `corrupt`,
/// so that the security bound is at most 2^-`security_bits` and the correctness bound at most
/// 2^-`correctness_bits`.
pub fn plan_secagg_plus(
    clients: u32,
    dropout: f64,
    corrupt: f64,
    security_bits: f64,
    correctness_bits: f64,
) -> Result<SecAggPlusPlan> {
    check_plan_args(
        clients,
        dropout,
        corrupt,
        &[
            ("security_bits", security_bits),
            ("correctness_bits", correctness_bits),
        ],
    )?;
    let fits = |k: u32| -> Option<(u32, f64, f64)> {
        (k / 2 + 1..=k).find_map(|t| {
            let (s, c) = bounds(clients, k, t, dropout, corrupt);
            (s <= -security_bits && c <= -correctness_bits).then_some((t, s, c))
        })
    };
    let mut k = 2;
    while k < clients - 1 {
        if let Some((t, s, c)) = fits(k) {
            return Ok(SecAggPlusPlan {
                graph: GraphSpec::Harary { degree: k },
                degree: k,
                threshold: t,
                security_log2: s,
                correctness_log2: c,
                threat_model: "honest-but-curious",
                decided_by: hbc_decided_by(s, c, security_bits, correctness_bits),
                grinding_bits: 0.0,
            });
        }
        k += 2;
    }
    let k = clients - 1;
    match fits(k) {
        Some((t, s, c)) => Ok(SecAggPlusPlan {
            graph: GraphSpec::Complete,
            degree: k,
            threshold: t,
            security_log2: s,
            correctness_log2: c,
            threat_model: "honest-but-curious",
            decided_by: hbc_decided_by(s, c, security_bits, correctness_bits),
            grinding_bits: 0.0,
        }),
        None => Err(SecAggError::config(
            "clients",
            clients,
            format!(
                "no threshold meets 2^-{security_bits} security and 2^-{correctness_bits} \
                 correctness at dropout {dropout} and corrupted fraction {corrupt}, even with \
                 the complete graph: use more clients, or accept a lower dropout or corruption \
                 rate"
            ),
        )),
    }
}

fn hbc_decided_by(s: f64, c: f64, security_bits: f64, correctness_bits: f64) -> &'static str {
    if -correctness_bits - c < -security_bits - s {
        "correctness"
    } else {
        "secrets"
    }
}

/// log2 of the placements a grinding server is assumed to try when the active mode is planned
/// by [`round_config_for`]: 2^40 re-derivations of the graph, each a choice of U1.
pub const DEFAULT_GRINDING_BITS: f64 = 40.0;

/// Fraction of clients assumed to collude with the server when SecAgg+ is planned by
/// [`round_config`].
pub const DEFAULT_CORRUPT_FRACTION: f64 = 0.1;

/// Cohorts up to this size use the complete graph under [`GraphChoice::Auto`]; larger ones
/// SecAgg+.
pub const COMPLETE_GRAPH_UP_TO: u32 = 128;

/// How [`round_config`] chooses the graph and threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphChoice {
    /// The complete graph up to [`COMPLETE_GRAPH_UP_TO`] clients; above, SecAgg+ planned for
    /// 2^-40 security and 2^-20 correctness (the complete graph if no plan fits).
    Auto,
    /// The complete graph with the smallest safe threshold, ⌊(n−1)/2⌋ + 1.
    Complete,
    /// SecAgg+ planned for the dropout rate and [`DEFAULT_CORRUPT_FRACTION`].
    Plus,
    /// A Harary graph of this degree and threshold, as given (validated like any
    /// configuration).
    Harary {
        /// Neighbours per client (even).
        degree: u32,
        /// Threshold.
        threshold: u32,
    },
}

/// A validated honest-but-curious round configuration for `clients` expecting `dropout`, with
/// the graph and threshold `choice` gives. `session_id` must be fresh randomness.
pub fn round_config(
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    choice: GraphChoice,
    session_id: [u8; 32],
) -> Result<RoundConfig> {
    round_config_for(
        ThreatModel::HonestButCurious,
        clients,
        bits,
        dim,
        dropout,
        choice,
        session_id,
    )
}

/// A validated round configuration in `threat_model`: as [`round_config`], with the active
/// mode's thresholds ([`active_complete_threshold`] on the complete graph, [`plan_active`] for
/// SecAgg+ with [`DEFAULT_CORRUPT_FRACTION`] and [`DEFAULT_GRINDING_BITS`]). On a cohort too
/// small for that γ the complete graph's threshold is capped at `n − 1`;
/// [`round_config_for_colluding`] with an explicit γ refuses such a cohort instead.
pub fn round_config_for(
    threat_model: ThreatModel,
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    choice: GraphChoice,
    session_id: [u8; 32],
) -> Result<RoundConfig> {
    sized_round_config(
        threat_model,
        clients,
        bits,
        dim,
        dropout,
        choice,
        session_id,
        None,
    )
}

/// [`round_config_for`] sized for a colluding fraction γ = `colluding_fraction` instead of
/// [`DEFAULT_CORRUPT_FRACTION`]: the active complete graph's threshold is
/// `⌊(n + ⌈γn⌉)/2⌋ + 1` ([`active_complete_threshold`]), SecAgg+ is planned by [`plan_active`]
/// (or [`plan_secagg_plus`] for honest-but-curious rounds) with `corrupt = γ`. The same γ should
/// be the one the distributed-DP accounting assumes (`privfed_distributed`'s
/// `PlanRequest::colluding_fraction`). A γ outside `[0, 1)`, or one the cohort cannot be sized
/// for (an active complete graph whose threshold would exceed `n − 1`) is
/// [`SecAggError::InvalidConfig`] naming `colluding_fraction`; `GraphChoice::Plus` without a
/// SecAgg+ plan for γ is the planner's error.
#[allow(clippy::too_many_arguments)]
pub fn round_config_for_colluding(
    threat_model: ThreatModel,
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    choice: GraphChoice,
    session_id: [u8; 32],
    colluding_fraction: f64,
) -> Result<RoundConfig> {
    sized_round_config(
        threat_model,
        clients,
        bits,
        dim,
        dropout,
        choice,
        session_id,
        Some(colluding_fraction),
    )
}

/// The one body of [`round_config_for`] (γ = `None`: the default, thresholds capped) and
/// [`round_config_for_colluding`] (an explicit γ, refused when the cohort cannot hold it).
#[allow(clippy::too_many_arguments)]
fn sized_round_config(
    threat_model: ThreatModel,
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    choice: GraphChoice,
    session_id: [u8; 32],
    colluding_fraction: Option<f64>,
) -> Result<RoundConfig> {
    let active = threat_model.is_active();
    let gamma = colluding_fraction.unwrap_or(DEFAULT_CORRUPT_FRACTION);
    if !(gamma.is_finite() && (0.0..1.0).contains(&gamma)) {
        return Err(SecAggError::config(
            "colluding_fraction",
            gamma,
            "must be in [0, 1)",
        ));
    }
    let complete_threshold = || -> Result<u32> {
        let t = active_complete_threshold(clients, gamma);
        let cap = clients.saturating_sub(1);
        if colluding_fraction.is_some() && t > cap {
            return Err(SecAggError::config(
                "colluding_fraction",
                gamma,
                format!(
                    "an active round of {clients} clients cannot be sized for it: the complete \
                     graph's threshold ⌊(n + ⌈γn⌉)/2⌋ + 1 = {t} exceeds n − 1 = {cap}"
                ),
            ));
        }
        Ok(t.min(cap))
    };
    let needs_complete = matches!(choice, GraphChoice::Complete)
        || matches!(choice, GraphChoice::Auto if clients <= COMPLETE_GRAPH_UP_TO);
    let complete = RoundConfig {
        session_id,
        clients,
        threshold: if active && needs_complete {
            complete_threshold()?
        } else if active {
            active_complete_threshold(clients, gamma).min(clients.saturating_sub(1))
        } else {
            clients.saturating_sub(1) / 2 + 1
        },
        bits,
        dim,
        graph: GraphSpec::Complete,
        threat_model,
    };
    let plus = || -> Result<RoundConfig> {
        let p = if active {
            plan_active(clients, dropout, gamma, 40.0, 20.0, DEFAULT_GRINDING_BITS)?
        } else {
            plan_secagg_plus(clients, dropout, gamma, 40.0, 20.0)?
        };
        Ok(RoundConfig {
            threshold: p.threshold,
            graph: p.graph,
            ..complete.clone()
        })
    };
    let config = match choice {
        GraphChoice::Complete => complete,
        GraphChoice::Plus => plus()?,
        GraphChoice::Harary { degree, threshold } => RoundConfig {
            threshold,
            graph: GraphSpec::Harary { degree },
            ..complete
        },
        GraphChoice::Auto if clients <= COMPLETE_GRAPH_UP_TO => complete,
        GraphChoice::Auto => match plus() {
            Ok(c) => c,
            // No sparser graph: the complete one, sized for the same γ.
            Err(_) if active => RoundConfig {
                threshold: complete_threshold()?,
                ..complete
            },
            Err(_) => complete,
        },
    };
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The active complete graph's threshold follows γ; the default γ keeps `round_config_for`'s
    /// round; a γ the cohort cannot hold is refused, where the default caps it.
    #[test]
    fn round_config_is_sized_for_the_colluding_fraction_it_is_given() {
        let active = ThreatModel::Active { roster: None };
        let sized = |n, gamma, choice| {
            round_config_for_colluding(active, n, 16, 4, 0.0, choice, [1; 32], gamma)
        };
        for n in [5u32, 10, 40, 100] {
            let default =
                round_config_for(active, n, 16, 4, 0.0, GraphChoice::Auto, [1; 32]).unwrap();
            let same = sized(n, DEFAULT_CORRUPT_FRACTION, GraphChoice::Auto).unwrap();
            assert_eq!(default, same, "n = {n}");
            for gamma in [0.0, 0.2, 0.3] {
                let c = (gamma * n as f64).ceil() as u32;
                let want = (n + c) / 2 + 1;
                match sized(n, gamma, GraphChoice::Auto) {
                    Ok(cfg) => {
                        assert_eq!(cfg.threshold, want, "n = {n}, γ = {gamma}");
                        assert!(want < n);
                    }
                    Err(e) => {
                        assert!(want > n - 1, "n = {n}, γ = {gamma}: {e}");
                        assert!(e.to_string().contains("colluding_fraction"), "{e}");
                    }
                }
            }
        }
        // n = 5, γ = 0.3: c = 2, t = 4 ≤ 4 holds; γ = 0.5: c = 3, t = 5 > 4 is refused, and
        // the default path caps the same threshold at 4.
        assert_eq!(sized(5, 0.3, GraphChoice::Complete).unwrap().threshold, 4);
        assert!(matches!(
            sized(5, 0.5, GraphChoice::Complete),
            Err(SecAggError::InvalidConfig {
                name: "colluding_fraction",
                ..
            })
        ));
        for bad in [-0.1, 1.0, f64::NAN] {
            assert!(matches!(
                sized(10, bad, GraphChoice::Auto),
                Err(SecAggError::InvalidConfig {
                    name: "colluding_fraction",
                    ..
                })
            ));
        }
        // Honest-but-curious rounds: the complete threshold does not depend on γ.
        let hbc = round_config_for_colluding(
            ThreatModel::HonestButCurious,
            10,
            16,
            4,
            0.0,
            GraphChoice::Auto,
            [1; 32],
            0.4,
        )
        .unwrap();
        assert_eq!(hbc.threshold, (10 - 1) / 2 + 1);
    }

    #[test]
    fn hypergeometric_tail_against_direct_sums() {
        // P[X ≥ 2], X ~ Hypergeometric(20, 7, 5): Σ_{i=2}^{5} C(7,i)C(13,5−i)/C(20,5)
        // = (21·286 + 35·78 + 35·13 + 21·1)/15504 = 9212/15504.
        let want = 9212.0 / 15504.0;
        assert!((ln_tail(20, 7, 5, 2).exp() - want).abs() < 1e-12);
        assert_eq!(ln_tail(20, 7, 5, 0), 0.0);
        assert_eq!(ln_tail(20, 7, 5, 6), f64::NEG_INFINITY);
        // Drawing everyone: the count is exactly the marked.
        assert!(ln_tail(20, 7, 20, 7).abs() < 1e-12);
        assert_eq!(ln_tail(20, 7, 20, 8), f64::NEG_INFINITY);
    }

    #[test]
    fn plans_meet_their_targets_and_are_minimal() {
        for (n, drop, corrupt) in [
            (100, 0.2, 0.05),
            (1000, 0.2, 0.05),
            (1000, 0.1, 0.2),
            (10_000, 0.3, 0.1),
        ] {
            let p = plan_secagg_plus(n, drop, corrupt, 40.0, 20.0).unwrap();
            assert!(
                p.security_log2 <= -40.0 && p.correctness_log2 <= -20.0,
                "{p:?}"
            );
            assert!(2 * p.threshold > p.degree && p.threshold <= p.degree);
            if let GraphSpec::Harary { degree } = p.graph
                && degree > 2
            {
                // No smaller degree meets both targets with any threshold.
                let k = degree - 2;
                assert!((k / 2 + 1..=k).all(|t| {
                    let (s, c) = bounds(n, k, t, drop, corrupt);
                    s > -40.0 || c > -20.0
                }));
            }
        }
        // Larger cohorts need (relatively) fewer neighbours.
        let small = plan_secagg_plus(1000, 0.2, 0.05, 40.0, 20.0).unwrap();
        let large = plan_secagg_plus(100_000, 0.2, 0.05, 40.0, 20.0).unwrap();
        assert!((large.degree as f64 / 100_000.0) < (small.degree as f64 / 1000.0));
    }

    #[test]
    fn large_cohorts_get_secagg_plus() {
        let c = round_config(1000, 16, 10, 0.2, GraphChoice::Auto, [1u8; 32]).unwrap();
        assert!(matches!(c.graph, GraphSpec::Harary { .. }), "{c:?}");
        assert!(c.degree() < 999);
        let c = round_config(50, 16, 10, 0.2, GraphChoice::Auto, [1u8; 32]).unwrap();
        assert_eq!(c.graph, GraphSpec::Complete);
        assert_eq!(c.threshold, 25);
        assert!(round_config(50, 0, 10, 0.2, GraphChoice::Auto, [1u8; 32]).is_err());
    }

    #[test]
    fn active_plans_meet_every_bound_and_name_the_deciding_one() {
        for (n, drop, corrupt) in [(200, 0.2, 0.05), (1000, 0.2, 0.1), (10_000, 0.1, 0.1)] {
            let p = plan_active(n, drop, corrupt, 40.0, 20.0, 40.0).unwrap();
            assert_eq!(p.threat_model, "active");
            assert!(
                p.security_log2 <= -40.0 && p.correctness_log2 <= -20.0,
                "{p:?}"
            );
            if let GraphSpec::Harary { degree } = p.graph {
                let b = all_bounds(n, degree, p.threshold, drop, corrupt);
                assert!(b.connectivity >= b.secrets);
                assert!(b.connectivity + 40.0 <= -40.0, "{p:?}");
                // The honest-but-curious plan is never sparser than needed for the same
                // targets, and the active one is at least as dense (it meets more bounds).
                let hbc = plan_secagg_plus(n, drop, corrupt, 40.0, 20.0).unwrap();
                assert!(degree >= hbc.degree, "{p:?} vs {hbc:?}");
                assert!(["connectivity", "correctness"].contains(&p.decided_by));
            }
        }
        // Small cohorts: the complete graph with t = ⌊(n + ⌈γn⌉)/2⌋ + 1.
        assert_eq!(active_complete_threshold(20, 0.1), 12);
        assert_eq!(active_complete_threshold(11, 0.1), 7);
        // Too many dropouts for that threshold: a clear error.
        assert!(plan_active(10, 0.5, 0.3, 40.0, 20.0, 40.0).is_err());
        assert!(plan_active(200, 0.2, 0.1, 40.0, 20.0, -1.0).is_err());
        let c = round_config_for(
            ThreatModel::Active { roster: None },
            50,
            16,
            10,
            0.2,
            GraphChoice::Auto,
            [1u8; 32],
        )
        .unwrap();
        assert_eq!((c.graph, c.threshold), (GraphSpec::Complete, 28));
    }

    #[test]
    fn impossible_targets_are_a_clear_error() {
        let e = plan_secagg_plus(10, 0.5, 0.45, 40.0, 20.0).unwrap_err();
        assert!(e.to_string().contains("more clients"), "{e}");
        assert!(plan_secagg_plus(100, 1.0, 0.0, 40.0, 20.0).is_err());
        assert!(plan_secagg_plus(100, 0.1, 0.1, f64::NAN, 20.0).is_err());
    }
}
