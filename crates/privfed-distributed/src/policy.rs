//! The client's policy on the server's distributed-DP plan: how little local noise and how
//! large a clip norm a device agrees to encode its update with. Checked by whatever decodes the
//! server's plan on the device (the Python bindings' `check_plan`, the Flower mod).
//!
//! | rule | default | refuses |
//! |---|---|---|
//! | `allow_no_noise` | false | a plan with local noise `σ = 0`: the sum the server decodes is then the exact sum, with no differential privacy at all |
//! | `min_local_noise_stddev` | 0 (only the rule above) | `σ < min` |
//! | `max_clip` | none | `c > max`: the server could raise the clip (the sensitivity) until the noise it planned protects nothing |
//!
//! Why no default floor on `σ` or cap on `c`: both are in the units of the client's update,
//! which only the client (its model and data scale) knows; a fixed number would refuse sound
//! plans of one model and pass weak plans of another. A device that knows its scale sets them
//! (the Flower mod's `min_local_noise_stddev` / `max_clip`); together they bound the noise
//! multiplier `σ / c` the client accepts.

use serde::{Deserialize, Serialize};

use crate::error::{DistributedError, Result};
use crate::params::SkellamParams;

/// The distributed-DP plans a client agrees to encode with. [`PlanPolicy::default`] refuses
/// only a plan without noise; [`PlanPolicy::permissive`] accepts every valid plan.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlanPolicy {
    /// Whether a plan with no local noise (`σ = 0`) is accepted (default false).
    pub allow_no_noise: bool,
    /// Smallest local noise standard deviation `σ` accepted, in the update's units (default 0).
    pub min_local_noise_stddev: f64,
    /// Largest clip norm `c` accepted, in the update's units (default: no cap).
    pub max_clip: Option<f64>,
}

impl Default for PlanPolicy {
    fn default() -> Self {
        PlanPolicy {
            allow_no_noise: false,
            min_local_noise_stddev: 0.0,
            max_clip: None,
        }
    }
}

impl PlanPolicy {
    /// Every rule off (tests and experiments that want the exact sum).
    pub fn permissive() -> Self {
        PlanPolicy {
            allow_no_noise: true,
            min_local_noise_stddev: 0.0,
            max_clip: None,
        }
    }

    /// Checks the policy's own values: `min_local_noise_stddev` finite and ≥ 0, `max_clip`
    /// finite and > 0.
    pub fn validate(&self) -> Result<()> {
        let m = self.min_local_noise_stddev;
        if !(m.is_finite() && m >= 0.0) {
            return Err(DistributedError::invalid(
                "min_local_noise_stddev",
                m,
                "must be finite and ≥ 0",
            ));
        }
        if let Some(c) = self.max_clip
            && !(c.is_finite() && c > 0.0)
        {
            return Err(DistributedError::invalid(
                "max_clip",
                c,
                "must be finite and > 0",
            ));
        }
        Ok(())
    }

    /// Checks the server's plan against every rule; the first broken is
    /// [`DistributedError::Refused`], naming the rule, the plan's value and the limit.
    pub fn check(&self, params: &SkellamParams) -> Result<()> {
        self.validate()?;
        let sd = params.local_noise_stddev();
        let refuse = |rule: &'static str, value: String, limit: String| {
            Err(DistributedError::Refused { rule, value, limit })
        };
        if sd <= 0.0 && !self.allow_no_noise {
            return refuse(
                "allow_no_noise",
                format!("local_noise_stddev = {sd}"),
                "local_noise_stddev > 0".into(),
            );
        }
        if sd < self.min_local_noise_stddev {
            return refuse(
                "min_local_noise_stddev",
                format!("local_noise_stddev = {sd}"),
                format!("local_noise_stddev ≥ {}", self.min_local_noise_stddev),
            );
        }
        if let Some(max) = self.max_clip
            && params.clip() > max
        {
            return refuse(
                "max_clip",
                format!("clip = {}", params.clip()),
                format!("clip ≤ {max}"),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::SkellamConfig;
    use crate::planner::{NoiseTarget, PlanRequest, plan};

    fn params(sd: f64, clip: f64) -> SkellamParams {
        SkellamParams::new(SkellamConfig {
            dim: 8,
            clip,
            bits: 16,
            scale: 10.0,
            local_noise_stddev: sd,
            beta: 0.0,
            k: 4.0,
        })
        .unwrap()
    }

    fn rule(r: Result<()>) -> &'static str {
        match r {
            Err(DistributedError::Refused { rule, .. }) => rule,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn no_noise_is_refused_by_default() {
        let p = PlanPolicy::default();
        let e = p.check(&params(0.0, 1.0));
        assert!(format!("{e:?}").contains("local_noise_stddev = 0"));
        assert_eq!(rule(e), "allow_no_noise");
        assert!(p.check(&params(1e-9, 1.0)).is_ok());
        assert!(PlanPolicy::permissive().check(&params(0.0, 1.0)).is_ok());
    }

    #[test]
    fn noise_floor_and_clip_cap_at_their_boundaries() {
        let p = PlanPolicy {
            min_local_noise_stddev: 0.5,
            max_clip: Some(2.0),
            ..PlanPolicy::default()
        };
        assert!(p.check(&params(0.5, 2.0)).is_ok());
        assert_eq!(rule(p.check(&params(0.499, 1.0))), "min_local_noise_stddev");
        assert_eq!(rule(p.check(&params(0.5, 2.001))), "max_clip");
        let bad = PlanPolicy {
            max_clip: Some(0.0),
            ..p
        };
        assert!(matches!(
            bad.check(&params(1.0, 1.0)),
            Err(DistributedError::InvalidParameter {
                name: "max_clip",
                ..
            })
        ));
    }

    /// Every plan the planner makes for a noise target passes the default policy.
    #[test]
    fn default_passes_planned_rounds_with_noise() {
        let p = PlanPolicy::default();
        for clients in [2, 5, 20, 100, 1000] {
            for sd in [0.01, 0.05, 0.5] {
                let req = PlanRequest {
                    dim: 100,
                    clip: 1.0,
                    bits: 20,
                    clients,
                    max_contributors: None,
                    k: 4.0,
                    beta: 0.0,
                    noise: NoiseTarget::LocalStddev(sd),
                    delta: None,
                    sampling_rate: 1.0,
                    rounds: 1,
                    share: Default::default(),
                    colluding_fraction: 0.0,
                };
                let planned = plan(&req).unwrap();
                p.check(&planned.params).unwrap();
            }
        }
    }
}
