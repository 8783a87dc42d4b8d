//! The three-adversary privacy report of a simulated deployment (paper 003 §IV,
//! `docs/ALGORITHMS.md` §4.3), in the simulator's report format. The numbers come from
//! [`privfed_accounting::analysis::draw_and_discard`], the one home of that analysis; this module
//! only names its fields as `privfed ddml simulate` prints them.

use privfed_accounting::AccountingError;
use privfed_accounting::analysis::draw_and_discard;
use privfed_learn::{LearnError, Result};
use serde::Serialize;

/// Privacy of one client update against the three adversaries of paper 003 §IV
/// (`docs/ALGORITHMS.md` §4.3), for a client update that is ε-LDP.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdversaryReport {
    /// I, channel listener (sees the model sent and returned): ε.
    pub channel_listener_epsilon: f64,
    /// II, internal threat (sees the `k` instances, not the pre-image): expected loss
    /// `((k − 1)/k)·(ε/2)` (Lemma 1).
    pub internal_expected_epsilon: f64,
    /// III, opportunistic: probability that the contribution was already discarded after `T`
    /// further updates to the instance, about `1 − 1/k` (as stated in §IV-D).
    pub opportunistic_discard_probability: f64,
    /// III when the contribution was not discarded: `min(ε, (ε/√(2T))·√(ln(1/(2δ_T))))` (the
    /// paper's approximation, capped at the local ε; see
    /// [`privfed_accounting::analysis::DrawAndDiscardReport::adversary_iii_epsilon`]).
    pub opportunistic_epsilon: f64,
    /// III: the `δ_T` used.
    pub opportunistic_delta: f64,
    /// III: the number `T` of further updates.
    pub further_updates: u64,
}

impl AdversaryReport {
    /// The report for local ε, `k` instances, `T` further updates and `δ_T`. Errors unless
    /// ε > 0, `k ≥ 1` and `δ_T ∈ (0, ½)`.
    pub fn new(epsilon: f64, k: usize, further_updates: u64, delta_t: f64) -> Result<Self> {
        let r =
            draw_and_discard(epsilon, k as u64, further_updates, delta_t).map_err(|e| match e {
                AccountingError::InvalidParameter {
                    name,
                    value,
                    reason,
                } => LearnError::InvalidParameter {
                    name,
                    value,
                    reason,
                },
                other => LearnError::Unsupported(other.to_string()),
            })?;
        Ok(Self {
            channel_listener_epsilon: r.adversary_i_epsilon,
            internal_expected_epsilon: r.adversary_ii_expected_loss,
            opportunistic_discard_probability: r.adversary_iii_discard_probability,
            opportunistic_epsilon: r.adversary_iii_epsilon,
            opportunistic_delta: r.adversary_iii_delta,
            further_updates,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adversary_report_formulas() {
        let r = AdversaryReport::new(32f64.ln(), 20, 10_000, 1e-8).unwrap();
        assert_eq!(r.channel_listener_epsilon, 32f64.ln());
        assert!((r.internal_expected_epsilon - 0.95 * 32f64.ln() / 2.0).abs() < 1e-15);
        assert!((r.opportunistic_discard_probability - 0.95).abs() < 1e-15);
        // ≈ 3ε/√T at δ_T = 1e-8 (docs/ALGORITHMS.md §4.3): √(ln(5e7)/2) = 2.978.
        let approx = 3.0 * 32f64.ln() / 100.0;
        assert!((r.opportunistic_epsilon / approx - 0.9927).abs() < 1e-3);
        assert_eq!(r.further_updates, 10_000);
        assert_eq!(r.opportunistic_delta, 1e-8);
        assert!(AdversaryReport::new(1.0, 0, 1, 1e-8).is_err());
        assert!(AdversaryReport::new(1.0, 2, 1, 0.5).is_err());
        assert!(matches!(
            AdversaryReport::new(f64::NAN, 2, 1, 1e-8),
            Err(LearnError::InvalidParameter { .. })
        ));
    }

    /// The simulator's report and `privfed analyze ddml` are the same analysis: at small T the
    /// approximation exceeds ε and both cap it there (they used to differ), and T = 0 is ε.
    #[test]
    fn small_t_and_t_zero_match_the_accounting_analysis() {
        for t in [0u64, 1, 2, 8, 9, 100] {
            let r = AdversaryReport::new(2.0, 10, t, 1e-8).unwrap();
            let a = draw_and_discard(2.0, 10, t, 1e-8).unwrap();
            assert_eq!(r.opportunistic_epsilon, a.adversary_iii_epsilon, "T = {t}");
            assert!(r.opportunistic_epsilon <= 2.0);
        }
        assert_eq!(
            AdversaryReport::new(2.0, 10, 1, 1e-8)
                .unwrap()
                .opportunistic_epsilon,
            2.0
        );
        assert_eq!(
            AdversaryReport::new(2.0, 10, 0, 1e-8)
                .unwrap()
                .opportunistic_epsilon,
            2.0
        );
    }
}
