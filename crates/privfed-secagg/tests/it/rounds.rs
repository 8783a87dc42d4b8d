//! Whole rounds: exact sums for any survivors ≥ t, aborts below.

use privfed_secagg::local::LocalRound;
use privfed_secagg::{GraphSpec, SecAggError, Stage};
use proptest::prelude::*;
use rand::RngExt;

use crate::{config, plain_sum, random_inputs, rng};

#[test]
fn no_dropouts_sum_is_exact_for_every_width() {
    for bits in 1..=64 {
        let mut r = rng(bits as u64);
        let c = config(6, 4, bits, 17, GraphSpec::Complete);
        let inputs = random_inputs(&mut r, 6, 17, bits);
        let out = LocalRound::new(c, inputs.clone(), vec![None; 6])
            .unwrap()
            .run(&mut r)
            .unwrap();
        assert_eq!(out.survivors, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            out.sum,
            plain_sum(&inputs, &out.survivors, bits),
            "bits {bits}"
        );
    }
}

#[test]
fn secagg_plus_round_with_dropouts_at_every_stage() {
    let mut r = rng(7);
    let n = 40;
    let c = config(n, 5, 20, 33, GraphSpec::Harary { degree: 8 });
    let inputs = random_inputs(&mut r, n as usize, 33, 20);
    let mut drops = vec![None; n as usize];
    drops[0] = Some(Stage::AdvertiseKeys);
    drops[5] = Some(Stage::ShareKeys);
    drops[11] = Some(Stage::MaskedInput);
    drops[23] = Some(Stage::Unmasking);
    let out = LocalRound::new(c, inputs.clone(), drops)
        .unwrap()
        .run(&mut r)
        .unwrap();
    assert!(!out.survivors.contains(&1) && !out.survivors.contains(&6));
    assert!(!out.survivors.contains(&12) && out.survivors.contains(&24));
    assert_eq!(out.dropped, vec![12]);
    assert_eq!(out.sum, plain_sum(&inputs, &out.survivors, 20));
}

#[test]
fn too_few_survivors_abort_and_say_so() {
    let mut r = rng(8);
    let c = config(5, 3, 8, 4, GraphSpec::Complete);
    let inputs = random_inputs(&mut r, 5, 4, 8);
    // Two drop before masking: 3 survivors, each with 2 surviving neighbours < t = 3.
    let drops = vec![
        None,
        Some(Stage::MaskedInput),
        None,
        Some(Stage::MaskedInput),
        None,
    ];
    let err = LocalRound::new(c, inputs, drops)
        .unwrap()
        .run(&mut r)
        .unwrap_err();
    assert!(matches!(err, SecAggError::Aborted(_)), "{err}");
    assert!(err.to_string().contains("aborted"));
}

fn stage_strategy() -> impl Strategy<Value = Option<Stage>> {
    prop_oneof![
        6 => Just(None),
        1 => Just(Some(Stage::AdvertiseKeys)),
        1 => Just(Some(Stage::ShareKeys)),
        1 => Just(Some(Stage::MaskedInput)),
        1 => Just(Some(Stage::Unmasking)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random dropout patterns over every stage, random widths, both graphs: whenever the round
    /// finishes, the sum is exactly that of the clients it names, and every one of them sent its
    /// masked input; a round without dropouts never aborts.
    #[test]
    fn random_dropouts_give_exact_sums_or_a_justified_abort(
        bits in 1u32..=64,
        n in 5u32..=24,
        harary in any::<bool>(),
        seed in any::<u64>(),
        drops in proptest::collection::vec(stage_strategy(), 24),
    ) {
        let mut r = rng(seed);
        let (graph, degree) = if harary && n >= 7 {
            (GraphSpec::Harary { degree: 4 }, 4)
        } else {
            (GraphSpec::Complete, n - 1)
        };
        let t = degree / 2 + 1;
        let dim = r.random_range(1..40usize);
        let c = config(n, t, bits, dim, graph);
        let inputs = random_inputs(&mut r, n as usize, dim, bits);
        let drops: Vec<Option<Stage>> = drops[..n as usize].to_vec();
        let round = LocalRound::new(c, inputs.clone(), drops.clone()).unwrap().run(&mut r);
        match round {
            Ok(out) => {
                prop_assert_eq!(&out.sum, &plain_sum(&inputs, &out.survivors, bits));
                // Survivors are exactly the clients that sent masked input and were not pruned.
                for &u in &out.survivors {
                    let d = drops[u as usize - 1];
                    prop_assert!(d.is_none() || d == Some(Stage::Unmasking));
                }
            }
            Err(SecAggError::Aborted(_)) => {
                // With no dropouts at all a round must not abort.
                prop_assert!(drops.iter().any(|d| d.is_some()));
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// `local::secure_sum` in each threat model: the survivors' exact sum with one client dropped
/// after sharing keys; below the threshold the round aborts and reveals nothing.
#[test]
fn secure_sum_matches_the_plain_sum_in_every_threat_model() {
    use privfed_secagg::local::{SecAggThreat, secure_sum};
    for threat in [
        SecAggThreat::HonestButCurious,
        SecAggThreat::Active,
        SecAggThreat::ActiveWithoutRoster,
    ] {
        let mut r = rng(5);
        let mut inputs = random_inputs(&mut r, 8, 12, 12);
        inputs[3].clear();
        let mut dropped = vec![false; 8];
        dropped[3] = true;
        let out = secure_sum(threat, 12, 12, inputs.clone(), &dropped, &mut r).unwrap();
        assert_eq!(out.survivors, vec![1, 2, 3, 5, 6, 7, 8], "{threat:?}");
        assert_eq!(
            out.sum,
            plain_sum(&inputs, &out.survivors, 12),
            "{threat:?}"
        );

        let gone = vec![true, true, true, true, true, true, false, false];
        let kept: Vec<Vec<u64>> = inputs
            .iter()
            .zip(&gone)
            .map(|(v, &g)| if g { Vec::new() } else { v.clone() })
            .collect();
        let e = secure_sum(threat, 12, 12, kept, &gone, &mut r).unwrap_err();
        assert!(matches!(e, SecAggError::Aborted(_)), "{threat:?}: {e}");
    }
}

/// `local::secure_sum_with_policy`: the clients' policy decides before anyone sends a key. Two
/// clients are refused by the defaults (`min_clients`) and joined when the rules are relaxed; a
/// stricter floor refuses a round of eight that the defaults join.
#[test]
fn secure_sum_refuses_a_round_its_policy_refuses() {
    use privfed_secagg::ClientPolicy;
    use privfed_secagg::local::{SecAggThreat, secure_sum_with_policy};
    let mut r = rng(6);
    let refused = |e: SecAggError| match e {
        SecAggError::Refused { rule, .. } => rule,
        other => panic!("expected a refusal, got {other}"),
    };
    for threat in [SecAggThreat::HonestButCurious, SecAggThreat::Active] {
        let two = random_inputs(&mut r, 2, 8, 8);
        let e = secure_sum_with_policy(
            threat,
            &ClientPolicy::default(),
            8,
            8,
            two.clone(),
            &[false; 2],
            &mut r,
        )
        .unwrap_err();
        assert_eq!(refused(e), "min_clients", "{threat:?}");
        let out = secure_sum_with_policy(
            threat,
            &ClientPolicy::permissive(),
            8,
            8,
            two.clone(),
            &[false; 2],
            &mut r,
        )
        .unwrap();
        assert_eq!(out.sum, plain_sum(&two, &[1, 2], 8), "{threat:?}");

        let eight = random_inputs(&mut r, 8, 8, 8);
        let strict = ClientPolicy {
            min_clients: 9,
            ..ClientPolicy::default()
        };
        let e =
            secure_sum_with_policy(threat, &strict, 8, 8, eight, &[false; 8], &mut r).unwrap_err();
        assert_eq!(refused(e), "min_clients", "{threat:?}");
    }
}
