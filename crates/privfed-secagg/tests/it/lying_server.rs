//! The lying server of `privfed_secagg::adversary`, played against real clients: it recovers an
//! input in the honest-but-curious mode (the documented limitation, pinned) and fails in the
//! active mode, on the complete graph and on planned SecAgg+ graphs.

use privfed_secagg::adversary::{Attack, AttackReport, lying_server};
use privfed_secagg::local::Enrollment;
use privfed_secagg::{Credentials, GraphSpec, RoundConfig, ThreatModel, plan_secagg_plus};
use rand::rngs::ChaCha20Rng;

use crate::{config, random_inputs, rng};

/// Plays `attack` on client `target` of a round over `c` in the given threat model.
fn play(attack: Attack, mut c: RoundConfig, model: &str, target: u32, seed: u64) -> AttackReport {
    let mut r = rng(seed);
    let inputs = random_inputs(&mut r, c.clients as usize, c.dim, c.bits);
    // One enrollment fixes the roster the round names; each strategy gets the same devices'
    // credentials again (a fresh round, fresh round keys).
    let e = Enrollment::new(c.clients as usize, &mut r);
    c.threat_model = match model {
        "honest-but-curious" => ThreatModel::HonestButCurious,
        "active" => e.threat_model(),
        "active-without-roster" => ThreatModel::Active { roster: None },
        _ => unreachable!(),
    };
    let with_roster = model == "active";
    let mut credentials = |_: &mut ChaCha20Rng| -> privfed_secagg::Result<Vec<Credentials>> {
        let mut all = e.credentials()?;
        if !with_roster {
            all.iter_mut().for_each(|c| c.roster = None);
        }
        Ok(all)
    };
    lying_server(attack, &c, &inputs, target, &mut credentials, &mut r).unwrap()
}

fn planned(n: u32) -> RoundConfig {
    let p = plan_secagg_plus(n, 0.2, 0.1, 40.0, 20.0).unwrap();
    config(n, p.threshold, 16, 64, p.graph)
}

#[test]
fn the_neighbour_share_attack_recovers_an_input_from_an_honest_but_curious_round() {
    // The default complete-graph threshold ⌊(n−1)/2⌋ + 1, and a planned SecAgg+ graph: the
    // server learns the target's exact input and no client aborts.
    for (c, target) in [
        (config(11, 6, 16, 64, GraphSpec::Complete), 1),
        (config(25, 13, 32, 64, GraphSpec::Complete), 7),
        (planned(200), 5),
    ] {
        let report = play(
            Attack::NeighbourShare,
            c.clone(),
            "honest-but-curious",
            target,
            1,
        );
        assert!(report.recovered_input, "{c:?}: {report:?}");
        assert_eq!(report.clients_aborted, 0, "{report:?}");
    }
}

#[test]
fn the_neighbour_share_attack_fails_in_the_active_mode() {
    for (c, target) in [
        (config(11, 6, 16, 64, GraphSpec::Complete), 1),
        (config(25, 13, 32, 64, GraphSpec::Complete), 7),
        (planned(200), 5),
    ] {
        for model in ["active", "active-without-roster"] {
            let report = play(Attack::NeighbourShare, c.clone(), model, target, 2);
            assert!(!report.recovered_input, "{model} {c:?}: {report:?}");
            assert_eq!(report.strategies.len(), 2);
            // Each strategy was stopped by clients refusing, not by the attacker giving up.
            for s in &report.strategies {
                assert!(
                    s.clients_aborted > 0 || s.detail.contains("shares"),
                    "{s:?}"
                );
            }
        }
    }
}

#[test]
fn key_substitution_recovers_an_input_unless_keys_are_signed_by_enrolled_devices() {
    for c in [config(11, 6, 16, 64, GraphSpec::Complete), planned(200)] {
        let hbc = play(
            Attack::KeySubstitution,
            c.clone(),
            "honest-but-curious",
            3,
            3,
        );
        assert!(hbc.recovered_input, "{hbc:?}");
        // Without a roster the server enrolls its own devices (Sybils): the documented limit.
        let sybil = play(
            Attack::KeySubstitution,
            c.clone(),
            "active-without-roster",
            3,
            3,
        );
        assert!(sybil.recovered_input, "{sybil:?}");
        let active = play(Attack::KeySubstitution, c, "active", 3, 3);
        assert!(!active.recovered_input, "{active:?}");
        assert_eq!(active.clients_aborted, 1, "the target aborts: {active:?}");
    }
}

#[test]
fn an_enrollment_gives_every_device_the_roster_the_round_names() {
    let mut r = rng(4);
    let e = Enrollment::new(5, &mut r);
    let model = e.threat_model();
    let creds = e.into_credentials().unwrap();
    let ThreatModel::Active { roster: Some(d) } = model else {
        panic!("{model:?}")
    };
    assert!(
        creds
            .iter()
            .all(|c| c.roster.as_ref().unwrap().digest() == d)
    );
}
