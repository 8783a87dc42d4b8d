//! The client's policy: which rounds a device agrees to join, checked against the server's
//! [`RoundConfig`] before the client sends anything.
//!
//! [`RoundConfig::validate`] checks that a configuration is *well formed* (the protocol can run
//! it). A server that wants an input can still ask for a well-formed round that protects
//! nothing: two clients (each learns the other's input from the sum), or a threshold of one.
//! A [`ClientPolicy`] is the device's own floor, and its defaults are on:
//!
//! | rule | default | refuses |
//! |---|---|---|
//! | `min_clients` | 3 | `n < 3`: with two clients the sum and one's own input give the other's |
//! | `min_threshold` | 2 | `t < 2`: one share reconstructs a secret, so any single neighbour (or the server with one share) unmasks the client |
//! | `min_threshold_fraction` | 1/2 (strict) | `t ≤ f·k`: a minority of the `k` neighbours (for the complete graph, of the other `n − 1` clients) reconstructs a secret |
//! | `min_degree` | 2 | `k < min(min_degree, n − 1)`: too few neighbours share each client's secrets |
//! | `accept_honest_but_curious` | true | honest-but-curious rounds, when false (a server that lies about dropouts recovers an input in that mode) |
//! | `accept_active_without_roster` | true | active rounds naming no roster, when false (the server can join as any number of clients) |
//!
//! Every round privfed's planners produce ([`crate::round_config`], [`crate::plan_secagg_plus`],
//! [`crate::plan_active`]) for `n ≥ 3` passes the defaults (`tests::defaults_pass_every_planned_round`
//! checks them over a range of cohorts, dropout and colluding fractions); `n = 2, t = 1` does
//! not. [`ClientPolicy::permissive`] turns every rule off, for tests and experiments only.

use serde::{Deserialize, Serialize};

use crate::config::{RoundConfig, ThreatModel};
use crate::error::{Result, SecAggError};

/// The rounds a client agrees to join. [`ClientPolicy::default`] is the safe floor; relax a
/// field explicitly, or use [`ClientPolicy::permissive`] (every rule off) in tests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientPolicy {
    /// Smallest cohort `n` (default 3).
    pub min_clients: u32,
    /// Smallest threshold `t` (default 2).
    pub min_threshold: u32,
    /// The threshold must exceed this fraction of each client's neighbours:
    /// `t > f·k` (default 1/2; for the complete graph `k = n − 1`, so `t = 1` of 100 is refused).
    pub min_threshold_fraction: f64,
    /// Smallest SecAgg+ degree `k`, capped at `n − 1` (the complete graph always passes):
    /// `k ≥ min(min_degree, n − 1)` (default 2).
    pub min_degree: u32,
    /// Whether honest-but-curious rounds are joined (default true).
    pub accept_honest_but_curious: bool,
    /// Whether active rounds that name no roster are joined (default true).
    pub accept_active_without_roster: bool,
}

impl Default for ClientPolicy {
    fn default() -> Self {
        ClientPolicy {
            min_clients: 3,
            min_threshold: 2,
            min_threshold_fraction: 0.5,
            min_degree: 2,
            accept_honest_but_curious: true,
            accept_active_without_roster: true,
        }
    }
}

impl ClientPolicy {
    /// Every rule off: any round that [`RoundConfig::validate`] accepts is joined. For tests and
    /// experiments; a device should never run with it.
    pub fn permissive() -> Self {
        ClientPolicy {
            min_clients: 0,
            min_threshold: 0,
            min_threshold_fraction: 0.0,
            min_degree: 0,
            accept_honest_but_curious: true,
            accept_active_without_roster: true,
        }
    }

    /// The default policy that joins active rounds only (an honest-but-curious server that lies
    /// about dropouts recovers an input).
    pub fn active_only() -> Self {
        ClientPolicy {
            accept_honest_but_curious: false,
            ..ClientPolicy::default()
        }
    }

    /// Checks the policy's own values (a fraction in `[0, 1)`).
    pub fn validate(&self) -> Result<()> {
        let f = self.min_threshold_fraction;
        if !(f.is_finite() && (0.0..1.0).contains(&f)) {
            return Err(SecAggError::config(
                "min_threshold_fraction",
                f,
                "must be in [0, 1)",
            ));
        }
        Ok(())
    }

    /// Checks `config` against every rule, in the table's order; the first rule broken is
    /// returned as [`SecAggError::Refused`] with the rule's name, the round's value and the
    /// limit.
    pub fn check(&self, config: &RoundConfig) -> Result<()> {
        self.validate()?;
        let refuse = |rule: &'static str, value: String, limit: String| {
            Err(SecAggError::Refused { rule, value, limit })
        };
        let n = config.clients;
        let t = config.threshold;
        let k = config.degree();
        if n < self.min_clients {
            return refuse(
                "min_clients",
                format!("n = {n}"),
                format!("n ≥ {}", self.min_clients),
            );
        }
        if t < self.min_threshold {
            return refuse(
                "min_threshold",
                format!("t = {t}"),
                format!("t ≥ {}", self.min_threshold),
            );
        }
        let f = self.min_threshold_fraction;
        if f > 0.0 && (t as f64) <= f * k as f64 {
            return refuse(
                "min_threshold_fraction",
                format!("t = {t} of k = {k} neighbours"),
                format!("t > {f}·k = {}", f * k as f64),
            );
        }
        let want_k = self.min_degree.min(n.saturating_sub(1));
        if k < want_k {
            return refuse("min_degree", format!("k = {k}"), format!("k ≥ {want_k}"));
        }
        match config.threat_model {
            ThreatModel::HonestButCurious if !self.accept_honest_but_curious => refuse(
                "accept_honest_but_curious",
                "threat model honest-but-curious".into(),
                "active rounds only".into(),
            ),
            ThreatModel::Active { roster: None } if !self.accept_active_without_roster => refuse(
                "accept_active_without_roster",
                "an active round naming no roster".into(),
                "active rounds naming a roster only".into(),
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GraphSpec;
    use crate::plan::{GraphChoice, plan_active, plan_secagg_plus, round_config_for};

    fn config(n: u32, t: u32, graph: GraphSpec, threat_model: ThreatModel) -> RoundConfig {
        RoundConfig {
            session_id: [5; 32],
            clients: n,
            threshold: t,
            bits: 16,
            dim: 4,
            graph,
            threat_model,
        }
    }

    fn rule(e: SecAggError) -> &'static str {
        match e {
            SecAggError::Refused { rule, .. } => rule,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    const HBC: ThreatModel = ThreatModel::HonestButCurious;

    #[test]
    fn two_clients_are_refused_three_accepted() {
        let p = ClientPolicy::default();
        let e = p
            .check(&config(2, 1, GraphSpec::Complete, HBC))
            .unwrap_err();
        assert!(e.to_string().contains("n = 2") && e.to_string().contains("n ≥ 3"));
        assert_eq!(rule(e), "min_clients");
        assert!(p.check(&config(3, 2, GraphSpec::Complete, HBC)).is_ok());
        assert!(
            ClientPolicy::permissive()
                .check(&config(2, 1, GraphSpec::Complete, HBC))
                .is_ok()
        );
    }

    #[test]
    fn threshold_rules_at_their_boundaries() {
        let mut p = ClientPolicy::permissive();
        p.min_threshold = 2;
        // n = 2 (k = 1): t = 1 is the only well-formed threshold.
        assert_eq!(
            rule(
                p.check(&config(2, 1, GraphSpec::Complete, HBC))
                    .unwrap_err()
            ),
            "min_threshold"
        );
        assert!(p.check(&config(3, 2, GraphSpec::Complete, HBC)).is_ok());
        // The fraction: t = 6 of k = 9 passes 0.6 (6 > 5.4), 2/3 is the boundary (6 ≤ 6).
        let c = config(10, 6, GraphSpec::Complete, HBC);
        p.min_threshold_fraction = 0.6;
        assert!(p.check(&c).is_ok());
        p.min_threshold_fraction = 2.0 / 3.0;
        assert_eq!(rule(p.check(&c).unwrap_err()), "min_threshold_fraction");
        // One of 100 (a well-formed config cannot have it; the policy refuses it on its own).
        let mut one = config(100, 1, GraphSpec::Complete, HBC);
        assert_eq!(
            rule(ClientPolicy::default().check(&one).unwrap_err()),
            "min_threshold"
        );
        let mut q = ClientPolicy::permissive();
        q.min_threshold_fraction = 0.5;
        assert_eq!(rule(q.check(&one).unwrap_err()), "min_threshold_fraction");
        one.threshold = 50; // 50 ≤ 99/2 = 49.5 is false: accepted
        assert!(q.check(&one).is_ok());
        one.threshold = 49;
        assert!(q.check(&one).is_err());
        p.min_threshold_fraction = 1.0;
        assert!(matches!(
            p.check(&c),
            Err(SecAggError::InvalidConfig {
                name: "min_threshold_fraction",
                ..
            })
        ));
    }

    #[test]
    fn degree_rule_at_its_boundary_and_capped_by_the_cohort() {
        let mut p = ClientPolicy::permissive();
        p.min_degree = 6;
        let c = |k| config(50, k / 2 + 1, GraphSpec::Harary { degree: k }, HBC);
        assert!(p.check(&c(6)).is_ok());
        let e = p.check(&c(4)).unwrap_err();
        assert!(e.to_string().contains("k = 4") && e.to_string().contains("k ≥ 6"));
        assert_eq!(rule(e), "min_degree");
        // A cohort of 5 cannot have 6 neighbours: its complete graph (k = 4) passes.
        assert!(p.check(&config(5, 3, GraphSpec::Complete, HBC)).is_ok());
    }

    #[test]
    fn threat_model_rules() {
        let hbc = config(10, 6, GraphSpec::Complete, HBC);
        let open = config(
            10,
            6,
            GraphSpec::Complete,
            ThreatModel::Active { roster: None },
        );
        let enrolled = config(
            10,
            6,
            GraphSpec::Complete,
            ThreatModel::Active {
                roster: Some([1; 32]),
            },
        );
        let p = ClientPolicy::active_only();
        assert_eq!(
            rule(p.check(&hbc).unwrap_err()),
            "accept_honest_but_curious"
        );
        assert!(p.check(&open).is_ok() && p.check(&enrolled).is_ok());
        let p = ClientPolicy {
            accept_active_without_roster: false,
            ..p
        };
        assert_eq!(
            rule(p.check(&open).unwrap_err()),
            "accept_active_without_roster"
        );
        assert!(p.check(&enrolled).is_ok());
        assert!(ClientPolicy::default().check(&hbc).is_ok());
    }

    /// Nothing privfed plans today may be refused: every cohort size from 3, each dropout and
    /// colluding fraction the planners accept in a grid, both threat models and every graph
    /// choice.
    #[test]
    fn defaults_pass_every_planned_round() {
        let p = ClientPolicy::default();
        let mut checked = 0;
        let sizes: Vec<u32> = (3..=20).chain([33, 64, 100, 128, 129, 300, 1000]).collect();
        for &n in &sizes {
            for dropout in [0.0, 0.1, 0.3] {
                for tm in [
                    HBC,
                    ThreatModel::Active { roster: None },
                    ThreatModel::Active {
                        roster: Some([2; 32]),
                    },
                ] {
                    for choice in [GraphChoice::Auto, GraphChoice::Complete, GraphChoice::Plus] {
                        if let Ok(c) = round_config_for(tm, n, 16, 8, dropout, choice, [9; 32]) {
                            p.check(&c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
                            checked += 1;
                        }
                    }
                }
                for corrupt in [0.0, 0.1, 0.33] {
                    for plan in [
                        plan_secagg_plus(n, dropout, corrupt, 40.0, 20.0),
                        plan_active(n, dropout, corrupt, 40.0, 20.0, 40.0),
                        plan_active(n, dropout, corrupt, 40.0, 20.0, 0.0),
                    ]
                    .into_iter()
                    .flatten()
                    {
                        let c = config(n, plan.threshold, plan.graph, HBC);
                        c.validate().unwrap();
                        p.check(&c).unwrap_or_else(|e| panic!("{plan:?}: {e}"));
                        checked += 1;
                    }
                }
            }
        }
        // The grid is not vacuous: most of its points plan a round.
        assert!(checked > 300, "only {checked} planned rounds checked");
    }
}
