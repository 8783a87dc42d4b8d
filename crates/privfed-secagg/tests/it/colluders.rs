//! A server that grinds the active mode's placement to put its colluders around a target.
//!
//! The active graph is a Harary ring permuted by `HKDF(session id; key-list binding)`
//! (`crypto::active_graph_seed`); the server cannot choose the permutation, only re-try it: each
//! change of the round-1 key list (a colluder re-drawing its own round keys, or a member added to
//! or dropped from U1) gives a fresh SHA-256 binding, modelled here as 32 fresh random bytes (the
//! random-oracle view of the hash). The test measures how often `2^g` tries put at least
//! `2t − k` colluders among a target's `k` neighbours — the neighbourhood in which its secrets
//! leak — and compares it with what the planner charges (`plan::secrets_bound_log2` times
//! `2^grinding_bits`).

use privfed_secagg::plan::secrets_bound_log2;
use privfed_secagg::{Graph, GraphSpec, crypto};
use rand::RngExt;

use crate::rng;

/// `P[Binomial(n, p) ≥ k]`, summed exactly in f64 (n in the thousands at most).
fn binomial_sf(n: u64, p: f64, k: u64) -> f64 {
    let mut pmf = (1.0 - p).powi(n as i32);
    let mut sf = 0.0;
    for i in 0..=n {
        if i >= k {
            sf += pmf;
        }
        pmf *= (n - i) as f64 / (i + 1) as f64 * p / (1.0 - p);
    }
    sf.min(1.0)
}

/// `P[Binomial(n, p) ≤ k]`.
fn binomial_cdf(n: u64, p: f64, k: u64) -> f64 {
    1.0 - binomial_sf(n, p, k + 1)
}

/// `C(n, r)` exactly.
fn choose(n: u64, r: u64) -> u128 {
    (0..r).fold(1u128, |acc, i| acc * u128::from(n - i) / u128::from(i + 1))
}

/// 48 clients, 6 of them colluders (γ = 1/8), Harary degree `k = 6`, `t = 5`: the target's
/// secrets leak when at least `2t − k = 4` colluders are among its 6 neighbours; one placement
/// does that with probability `p = Σ_{i≥4} C(6,i)·C(41,6−i)/C(47,6) ≈ 1.17·10⁻³`. The server
/// tries `2^g = 128` placements per round, in 300 rounds (38,400 placements).
///
/// * The planner's per-client bound (`secrets_bound_log2 / n`) is exactly `p`.
/// * Per placement, the success count is Binomial(38,400, p) (two-sided, α = 10⁻⁶ each side):
///   the derived placement is as good as uniform for this event, and the server cannot do better
///   than chance per try.
/// * Per round, the server succeeds in at most the charged `2^g·p` of rounds (one-sided,
///   α = 10⁻⁶): the planner's `grinding_bits` charge holds; and in at least
///   `1 − (1 − p)^(2^g)` (one-sided, α = 10⁻⁶): grinding does buy what the analysis says.
///
/// Stated false-positive rate: at most 4·10⁻⁶. A placement the server could choose (the ids
/// in join order, a constant seed) makes every round succeed or none, and fails the test.
#[test]
fn a_grinding_server_succeeds_as_often_as_the_planner_charges() {
    let (n, colluders, k, t, g) = (48u32, 6u32, 6u32, 5u32, 7u32);
    let tries = 1u64 << g;
    let rounds = 300u64;
    let need = 2 * t - k;
    let others = u64::from(n - 1);
    let c = u64::from(colluders);
    let p = (u64::from(need)..=c.min(u64::from(k)))
        .map(|i| choose(c, i) * choose(others - c, u64::from(k) - i))
        .sum::<u128>() as f64
        / choose(others, u64::from(k)) as f64;
    let corrupt = f64::from(colluders) / f64::from(n);
    let charged = 2f64.powf(secrets_bound_log2(n, k, t, corrupt)) / f64::from(n);
    assert!(
        (charged / p - 1.0).abs() < 1e-9,
        "charged {charged}, exact {p}"
    );

    let members: Vec<u32> = (1..=n).collect();
    let is_colluder = |id: u32| id > n - colluders;
    let target = 1;
    let mut r = rng(77);
    let (mut placements_won, mut rounds_won) = (0u64, 0u64);
    for _ in 0..rounds {
        let mut session = [0u8; 32];
        r.fill(&mut session[..]);
        let mut won = false;
        for _ in 0..tries {
            let mut binding = [0u8; 32];
            r.fill(&mut binding[..]);
            let graph = Graph::for_members(
                members.clone(),
                GraphSpec::Harary { degree: k },
                &crypto::active_graph_seed(&session, &binding),
            );
            let around = graph.neighbours(target);
            assert_eq!(around.len(), k as usize);
            if around.iter().filter(|&&v| is_colluder(v)).count() >= need as usize {
                placements_won += 1;
                won = true;
            }
        }
        rounds_won += u64::from(won);
    }
    let alpha = 1e-6;
    let total = rounds * tries;
    assert!(
        binomial_sf(total, p, placements_won) > alpha
            && binomial_cdf(total, p, placements_won) > alpha,
        "{placements_won} of {total} placements put {need} colluders around the target, \
         expected {:.1}",
        total as f64 * p
    );
    let charged_round = (tries as f64 * charged).min(1.0);
    assert!(
        binomial_sf(rounds, charged_round, rounds_won) > alpha,
        "{rounds_won} of {rounds} grinding rounds succeeded, more than the charged {:.3}",
        charged_round
    );
    let exact_round = 1.0 - (1.0 - p).powi(tries as i32);
    assert!(
        binomial_cdf(rounds, exact_round, rounds_won) > alpha,
        "{rounds_won} of {rounds} grinding rounds succeeded, fewer than {exact_round:.3}"
    );
}
