//! Colluding clients and a server that grinds the active mode's placement to put them around a
//! target, played by `privfed_secagg::adversary` (`colluders`, `grind_placement`, `grinding`).
//!
//! The active graph is a Harary ring permuted by `HKDF(session id; key-list binding)`
//! (`crypto::active_graph_seed`); the server cannot choose the permutation, only re-try it: a
//! colluder re-draws its own round keys, which changes the signed key list and so its SHA-256
//! binding. The tests measure how often `2^g` tries put at least `2t − k` colluders among a
//! target's `k` neighbours — the neighbourhood in which its secrets leak — and compare it with
//! what the planner charges (`plan::secrets_bound_log2` times `2^grinding_bits`), and play the
//! split-U3 attack of colluders with real clients.

use privfed_secagg::GraphSpec;
use privfed_secagg::adversary::{self, CollusionReport};
use privfed_secagg::local::Enrollment;
use privfed_secagg::plan::secrets_bound_log2;
use privfed_secagg::{Credentials, Result, RoundConfig};
use rand::RngExt;
use rand::rngs::ChaCha20Rng;

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
/// tries `2^g = 128` placements per round, in 300 rounds (38,400 placements), each the round's
/// real key list with one colluder's keys re-drawn (`adversary::grind_placement`; the colluders
/// are clients 43–48, the target client 1).
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

    let mut r = rng(77);
    let (mut cfg, inputs, enrollment) = active_round(n, t, GraphSpec::Harary { degree: k }, &mut r);
    let mut creds = |_: &mut ChaCha20Rng| enrollment.credentials();
    let (mut placements_won, mut rounds_won) = (0u64, 0u64);
    for _ in 0..rounds {
        r.fill(&mut cfg.session_id[..]);
        let placement =
            adversary::grind_placement(&cfg, &inputs, 1, colluders, tries, &mut creds, &mut r)
                .unwrap();
        assert_eq!(
            (placement.attempts, placement.degree, placement.threshold),
            (tries, k, t)
        );
        assert_eq!(placement.needed_colluding_neighbours, need);
        // The report's planner numbers are the planner's.
        assert!((placement.placement_probability / charged - 1.0).abs() < 1e-9);
        assert!((placement.planner_charge - (tries as f64 * charged).min(1.0)).abs() < 1e-12);
        assert_eq!(
            placement.best_colluding_neighbours >= need,
            placement.placements_reaching_need > 0
        );
        placements_won += placement.placements_reaching_need;
        rounds_won += u64::from(placement.placements_reaching_need > 0);
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

/// An active round of `n` enrolled clients on `spec` with threshold `t`, its inputs and the
/// enrollment (the colluders' twins are the same devices).
fn active_round(
    n: u32,
    t: u32,
    spec: GraphSpec,
    r: &mut ChaCha20Rng,
) -> (RoundConfig, Vec<Vec<u64>>, Enrollment) {
    let mut c = crate::config(n, t, 16, 5, spec);
    let enrollment = Enrollment::new(n as usize, r);
    c.threat_model = enrollment.threat_model();
    let inputs = crate::random_inputs(r, n as usize, c.dim, c.bits);
    (c, inputs, enrollment)
}

/// Colluders and a lying server against real active-mode clients on `spec` over `n` clients,
/// threshold `t` (`adversary::colluders`): after round 1 fixes the placement, `C` of the
/// target's neighbours collude (the worst case, what grinding buys; searched) and the server
/// splits U3 around the target `u = 1`.
fn split_u3_with_colluders(
    n: u32,
    spec: GraphSpec,
    t: u32,
    colluders: u32,
    seed: u64,
) -> CollusionReport {
    let mut r = rng(seed);
    let (c, inputs, enrollment) = active_round(n, t, spec, &mut r);
    let mut creds = |_: &mut ChaCha20Rng| -> Result<Vec<Credentials>> { enrollment.credentials() };
    adversary::colluders(&c, &inputs, 1, colluders, &mut creds, &mut r).unwrap()
}

/// Where the colluders' bound is. On the complete graph (n = 9, k = 8) the split-U3 attack
/// recovers the target's input exactly when `2t + 1 ≤ k + C`: the target signs only a U3 that
/// holds it and nobody is outside its neighbourhood, so the side without it has one signer
/// fewer. On a Harary graph (n = 16, k = 6, t = 4, 5, C = 0..5) the neighbours' other
/// neighbours make up the signatures, and the attack recovers the input exactly when
/// `2t ≤ k + C` — the bound of the analysis (`SECURE_AGGREGATION.md`; the planner's `secrets_bound_log2` counts placements
/// with `≥ 2t − k` colluders around a client). Whenever the attack fails it is not silent:
/// honest clients short of signatures abort.
#[test]
fn colluders_recover_an_input_exactly_at_the_bound() {
    let cases = [
        (9u32, GraphSpec::Complete, 8u32, [5u32, 6], 1u32),
        (16, GraphSpec::Harary { degree: 6 }, 6, [4, 5], 0),
    ];
    for (n, spec, k, thresholds, slack) in cases {
        for t in thresholds {
            for colluders in 0..=5 {
                let seed = 300 + u64::from(100 * n + 10 * t + colluders);
                let report = split_u3_with_colluders(n, spec, t, colluders, seed);
                let at_bound = 2 * t + slack <= k + colluders;
                let what = format!("n {n}, k {k}, t {t}, C {colluders}: {report:?}");
                assert_eq!(report.split_found, at_bound, "{what}: the search");
                assert_eq!(report.recovered_input, at_bound, "{what}: the real clients");
                assert_eq!(
                    report.clients_aborted > 0,
                    !report.recovered_input,
                    "{what}"
                );
                assert_eq!(report.colluding_neighbours, colluders, "{what}");
                assert_eq!(
                    report.bound_colluding_neighbours,
                    2 * t + slack - k,
                    "{what}: the reported bound"
                );
            }
        }
    }
}

/// The honest-but-curious mode at the same graphs: no signatures, so the split (an unmasking
/// request saying the target survived to A, one saying it dropped to B) recovers the input
/// exactly when `2t ≤ k + C` on both graphs — the planner's secrets bound — and nobody aborts.
#[test]
fn honest_but_curious_colluders_recover_an_input_at_the_secrets_bound() {
    let cases = [
        (9u32, GraphSpec::Complete, 8u32, [5u32, 6]),
        (16, GraphSpec::Harary { degree: 6 }, 6, [4, 5]),
    ];
    for (n, spec, k, thresholds) in cases {
        for t in thresholds {
            for colluders in 0..=5 {
                let mut r = rng(900 + u64::from(100 * n + 10 * t + colluders));
                let c = crate::config(n, t, 16, 5, spec);
                let inputs = crate::random_inputs(&mut r, n as usize, c.dim, c.bits);
                let mut none = |_: &mut ChaCha20Rng| -> Result<Vec<Credentials>> {
                    unreachable!("an honest-but-curious round has no credentials")
                };
                let report =
                    adversary::colluders(&c, &inputs, 1, colluders, &mut none, &mut r).unwrap();
                let at_bound = 2 * t <= k + colluders;
                let what = format!("n {n}, k {k}, t {t}, C {colluders}: {report:?}");
                assert_eq!(report.threat_model, "honest-but-curious");
                assert_eq!(report.split_found, at_bound, "{what}");
                assert_eq!(report.recovered_input, at_bound, "{what}");
                assert_eq!(report.clients_aborted, 0, "{what}");
                assert_eq!(report.bound_colluding_neighbours, 2 * t - k);
            }
        }
    }
}

/// Grinding end to end with real clients (n = 16, k = 6, t = 4, colluders placed before the
/// round): with 3 colluders one placement reaches `2t − k = 2` colluding neighbours with
/// probability `p = 1705/5005 ≈ 0.34`, so 64 re-draws miss with probability `(1 − p)^64 <
/// 10⁻¹¹` (the stated false-positive rate), and on the placement found the split recovers the
/// input. With 1 colluder no placement reaches 2: the attack fails and honest clients abort.
#[test]
fn a_grinding_server_with_enough_colluders_places_them_and_recovers_an_input() {
    let (n, k, t) = (16u32, 6u32, 4u32);
    let spec = GraphSpec::Harary { degree: k };
    for (colluders, recovered) in [(3u32, true), (1, false)] {
        let mut r = rng(4000 + u64::from(colluders));
        let (c, inputs, enrollment) = active_round(n, t, spec, &mut r);
        let mut creds =
            |_: &mut ChaCha20Rng| -> Result<Vec<Credentials>> { enrollment.credentials() };
        let (placement, report) =
            adversary::grinding(&c, &inputs, 1, colluders, 64, &mut creds, &mut r).unwrap();
        let what = format!("C {colluders}: {placement:?} {report:?}");
        assert_eq!(placement.needed_colluding_neighbours, 2, "{what}");
        let p = 1705.0 / 5005.0;
        if colluders == 3 {
            assert!(
                (placement.placement_probability - p).abs() < 1e-12,
                "{what}"
            );
        }
        assert_eq!(placement.split_placement_found, recovered, "{what}");
        assert_eq!(report.recovered_input, recovered, "{what}");
        assert_eq!(report.clients_aborted > 0, !recovered, "{what}");
        assert_eq!(
            report.colluders,
            ((n - colluders + 1)..=n).collect::<Vec<_>>()
        );
        assert!(report.colluding_neighbours <= placement.best_colluding_neighbours);
        assert_eq!(
            placement.best_colluding_neighbours >= 2,
            recovered,
            "{what}"
        );
    }
}
