//! `privfed secagg` and `privfed dme … --secagg`.

use crate::common::{TempDir, fail_table, fails_with, json_ok, keys_table, run, words};
use privfed_secagg::Stage;

#[test]
fn secagg_simulate_reports_an_exact_sum_and_its_cost() {
    let v = json_ok(&words(
        "secagg simulate --clients 30 --dim 1000 --bits 20 --dropout 0.2 --seed 5 --json --quiet",
    ));
    assert_eq!(v["exact"], true, "{v}");
    // In process the default is the active mode: its complete-graph threshold counts the
    // colluding fraction, ⌊(30 + ⌈0.1·30⌉)/2⌋ + 1.
    assert_eq!(
        (v["threat_model"].as_str(), v["roster"].as_bool()),
        (Some("active"), Some(true))
    );
    assert_eq!(v["survivors"], 24);
    assert_eq!(v["threshold"], 17);
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    // At least the packed masked input (1000 × 20 bits) goes up from each client.
    assert!(v["bytes_per_client"].as_f64().unwrap() > 2500.0);
    for stage in Stage::ALL {
        assert!(
            v["stage_seconds"][stage.name()].as_f64().is_some(),
            "{stage:?}: {v}"
        );
    }
    let v = json_ok(&words(
        "secagg simulate --clients 30 --dim 1000 --bits 20 --dropout 0.2 --seed 5 \
         --threat-model honest-but-curious --json --quiet",
    ));
    assert_eq!(
        (v["exact"].as_bool(), v["threshold"].as_u64()),
        (Some(true), Some(15))
    );
    assert_eq!(v["threat_model"], "honest-but-curious");
    assert!(v["stage_seconds"]["consistency_check"].is_null(), "{v}");
}

#[test]
fn the_lying_server_recovers_an_input_only_from_an_honest_but_curious_round() {
    for (model, recovered) in [("honest-but-curious", true), ("active", false)] {
        let v = json_ok(&words(&format!(
            "secagg simulate --clients 11 --dim 200 --bits 16 --seed 2 --adversary lying-server \
             --threat-model {model} --target 3 --json --quiet"
        )));
        assert_eq!(v["threat_model"], model, "{v}");
        assert_eq!(v["attack_recovered_input"], recovered, "{v}");
        assert_eq!(
            v["clients_aborted"].as_u64().unwrap() > 0,
            !recovered,
            "{v}"
        );
        assert_eq!(
            (v["target"].as_u64(), v["threshold"].as_u64()),
            (Some(3), Some(6))
        );
    }
    fail_table(&[
        (
            "secagg simulate --clients 11 --dim 8 --adversary lying-server --dropout 0.2",
            "without dropouts",
        ),
        (
            "secagg simulate --clients 11 --dim 8 --http --no-roster",
            "need a roster",
        ),
    ]);
    // Over loopback HTTP the default is the active mode too: the coordinator serves the roster
    // and admits the enrolled devices.
    let v = json_ok(&words(
        "secagg simulate --clients 12 --dim 100 --dropout 0.2 --seed 4 --http --json --quiet",
    ));
    assert_eq!(
        (v["exact"].as_bool(), v["threat_model"].as_str()),
        (Some(true), Some("active"))
    );
    assert_eq!(
        (v["roster"].as_bool(), v["threshold"].as_u64()),
        (Some(true), Some(8))
    );
    fails_with(
        &words(
            "secagg simulate --clients 11 --dim 8 --threat-model honest-but-curious --no-roster",
        ),
        "--no-roster",
    );
}

#[test]
fn secagg_plan_for_the_active_mode_names_the_deciding_bound() {
    let v = run("secagg plan --clients 1000 --dropout 0.2 --json");
    assert_eq!(v["threat_model"], "active", "{v}");
    assert_eq!(v["grinding_bits"], 40.0);
    assert!(["connectivity", "correctness"].contains(&v["decided_by"].as_str().unwrap()));
    let hbc = json_ok(&words(
        "secagg plan --clients 1000 --dropout 0.2 --threat-model honest-but-curious --json",
    ));
    assert!(v["degree"].as_u64() >= hbc["degree"].as_u64(), "{v} {hbc}");
}

#[test]
fn secagg_simulate_random_stages_and_secagg_plus() {
    let v = json_ok(&words(
        "secagg simulate --clients 150 --dim 64 --bits 62 --dropout 0.1 --dropout-stage random --seed 6 --json --quiet",
    ));
    assert_eq!(v["exact"], true, "{v}");
    assert_eq!(v["graph"], "harary");
    assert!(v["degree"].as_u64().unwrap() < 149);
}

#[test]
fn too_few_survivors_abort_with_a_non_zero_exit() {
    fail_table(&[
        (
            "secagg simulate --clients 10 --dim 8 --dropout 0.7 --seed 1 --quiet",
            "aborted",
        ),
        ("secagg simulate --clients 10 --dim 8 --bits 65", "bits"),
        (
            "secagg simulate --clients 10 --dim 8 --dropout 1.5",
            "dropout",
        ),
    ]);
}

#[test]
fn secagg_plan_names_degree_and_threshold() {
    let v = json_ok(&words(
        "secagg plan --clients 1000 --dropout 0.2 --threat-model honest-but-curious --json",
    ));
    let (k, t) = (
        v["degree"].as_u64().unwrap(),
        v["threshold"].as_u64().unwrap(),
    );
    assert!(2 * t > k && t <= k && k < 999, "{v}");
    let s = &v["security_log2"];
    assert!(s == "-inf" || s.as_f64().unwrap() <= -40.0, "{v}");
    fails_with(
        &words("secagg plan --clients 10 --dropout 0.5 --corrupt 0.45"),
        "more clients",
    );
}

/// Paper 001's pipeline end to end: the Skellam encodings go through real secure aggregation
/// (with dropouts recovered) and decode to the same mean, bit for bit, as the plain modular sum.
///
/// Dropout 0.1 of 20 clients: a trial aborts (more than 9 drop, below the threshold of 11) with
/// probability 7e-6, and no client at all drops in the 5 trials with probability 0.9^100 ≈ 3e-5,
/// so for any seed the run both recovers dropouts and completes. (At dropout 0.2 a trial aborts
/// with probability 0.0026; the noise generator's change to AES-256-CTR made seed 3 one of them.)
#[test]
fn dme_skellam_through_secure_aggregation_decodes_the_same_mean() {
    let base = words(
        "dme skellam --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 100 --trials 5 --seed 3 --dropout 0.1 --json --quiet",
    );
    // The active round is sized for a colluding fraction of 0.1, and its accounting assumes
    // the same γ unless told otherwise; the plain sum is given that γ so both plan alike.
    let mut plain_args = base.to_vec();
    plain_args.extend_from_slice(&["--colluding-fraction", "0.1"]);
    let plain = json_ok(&plain_args);
    assert!(
        plain["min_survivors"].as_u64().is_some_and(|m| m < 20),
        "{plain}"
    );
    let mut with = base.to_vec();
    with.push("--secagg");
    let secure = json_ok(&with);
    assert_eq!(secure["secure_aggregation"], true);
    assert_eq!(plain["secure_aggregation"], false);
    for key in [
        "mse",
        "predicted_mse",
        "wraps",
        "epsilon",
        "mean_survivors",
        "min_survivors",
        "colluding_fraction",
        "colluders",
        "honest_contributors",
    ] {
        assert_eq!(secure[key], plain[key], "{key}");
    }
    assert_eq!(secure["colluding_fraction"].as_f64(), Some(0.1));
    assert_eq!(secure["colluders"].as_u64(), Some(2));
    assert_eq!(
        secure["honest_contributors"].as_u64(),
        Some(secure["min_survivors"].as_u64().unwrap() - 2)
    );
    assert_eq!(secure["secure_aggregation_threshold"].as_u64(), Some(12));
    assert!(plain["secure_aggregation_threshold"].is_null());
    // Another γ sizes the active round for it, and the accounting uses the same γ: at 0.2,
    // t = ⌊(20 + 4)/2⌋ + 1 = 13 and 4 colluders, and the secure run equals the plain one at
    // that γ. A γ the cohort cannot be sized for (0.9: t = 20 > 19) is refused, naming the
    // option.
    let gamma = |args: &[&'static str], g: &'static str| -> Vec<&'static str> {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--colluding-fraction", g]);
        a
    };
    // (Dropout 0.02 here: t = 13 needs 14 survivors of 20, which dropout 0.1 misses in a
    // trial with probability 0.0024; 7 or more of 20 drop at 0.02 with probability < 10⁻⁷.)
    let base_02 = words(
        "dme skellam --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 100 --trials 5 --seed 3 --dropout 0.02 --json --quiet",
    );
    let mut with_02 = base_02.clone();
    with_02.push("--secagg");
    let secure_02 = json_ok(&gamma(&with_02, "0.2"));
    let plain_02 = json_ok(&gamma(&base_02, "0.2"));
    assert_eq!(secure_02["secure_aggregation_threshold"].as_u64(), Some(13));
    assert_eq!(secure_02["colluding_fraction"].as_f64(), Some(0.2));
    assert_eq!(secure_02["colluders"].as_u64(), Some(4));
    for key in ["mse", "epsilon", "honest_contributors", "colluders"] {
        assert_eq!(secure_02[key], plain_02[key], "γ 0.2: {key}");
    }
    fails_with(&gamma(&with, "0.9"), "--colluding-fraction");
    // DDG shares go through the same path; the continuous Gaussian cannot.
    let mut ddg = with.clone();
    ddg[1] = "ddg";
    assert_eq!(json_ok(&ddg)["secure_aggregation"], true);
    fails_with(
        &words(
            "dme gaussian --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 10 --secagg --quiet",
        ),
        "skellam",
    );
    fails_with(
        &words("dme privunit2 --epsilon 2 --clients 5 --dim 10 --secagg"),
        "--secagg",
    );
}

/// The simulated clients join under the library's default policy: a round of two clients (t = 1
/// or 2 — a single peer can reconstruct a secret) is refused unless the flag relaxes it;
/// `--permissive-policy` turns every rule off; a malformed fraction is named.
#[test]
fn the_clients_policy_refuses_unsafe_rounds_unless_relaxed() {
    fail_table(&[
        (
            "secagg simulate --clients 2 --dim 4 --threat-model honest-but-curious --quiet",
            "min_clients",
        ),
        (
            "secagg simulate --clients 12 --dim 4 --min-threshold-fraction 1.5 --quiet",
            "--min-threshold-fraction",
        ),
        (
            "secagg simulate --clients 12 --dim 4 --permissive-policy --min-clients 3 --quiet",
            "cannot be used with",
        ),
    ]);
    for relaxed in [
        "--min-clients 2 --min-threshold 1 --min-threshold-fraction 0",
        "--permissive-policy",
    ] {
        let v = run(&format!(
            "secagg simulate --clients 2 --dim 4 --threat-model honest-but-curious --seed 1 {relaxed} --json --quiet"
        ));
        assert_eq!(v["exact"].as_bool(), Some(true), "{relaxed}: {v}");
    }
    // A stricter policy refuses a round the defaults accept.
    fails_with(
        &words("secagg simulate --clients 12 --dim 4 --min-clients 20 --quiet"),
        "min_clients",
    );
}

/// `dme … --secagg` and `fl train` take the policy options of `secagg simulate` (the same
/// parser): a round the clients' policy refuses fails naming the rule, a relaxed or permissive
/// policy runs it, and the options are refused where no secure aggregation runs.
#[test]
fn dme_and_fl_train_take_the_clients_policy_options() {
    let dme = "dme skellam --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --dim 10 --trials 1 --seed 1 --quiet";
    let hbc = "--secagg --threat-model honest-but-curious";
    fail_table(&[
        (
            &format!("{dme} --clients 8 --secagg --min-clients 9"),
            "min_clients",
        ),
        (
            &format!("{dme} --clients 8 --secagg --min-threshold-fraction 0.9"),
            "min_threshold_fraction",
        ),
        (&format!("{dme} --clients 2 {hbc}"), "min_clients"),
        (
            &format!("{dme} --clients 8 --secagg --min-threshold-fraction 1.5"),
            "--min-threshold-fraction",
        ),
        (
            &format!("{dme} --clients 8 --secagg --permissive-policy --min-clients 3"),
            "cannot be used with",
        ),
        (
            &format!("{dme} --clients 8 --min-clients 3"),
            "--secagg only",
        ),
    ]);
    let ran = keys_table(&[
        (
            &format!("{dme} --clients 8 --secagg --min-clients 8 --json"),
            &["mse", "secure_aggregation"],
        ),
        (
            &format!(
                "{dme} --clients 2 {hbc} --min-clients 2 --min-threshold 1 --min-threshold-fraction 0 --json"
            ),
            &["mse", "secure_aggregation"],
        ),
        (
            &format!("{dme} --clients 2 {hbc} --permissive-policy --json"),
            &["mse", "secure_aggregation"],
        ),
    ]);
    assert!(ran.iter().all(|v| v["secure_aggregation"] == true));

    let tmp = TempDir::new("fl-policy");
    let config = |secure_aggregation: bool, policy: &str| {
        let p = tmp
            .0
            .join(format!("{secure_aggregation}-{}.toml", policy.len()));
        std::fs::write(
            &p,
            format!(
                "rounds = 2\nseed = 1\n\
                 data = {{ dataset = \"synthetic_logistic\", dim = 5, examples = 100, signal = 1.0, clients = 20 }}\n\
                 model = {{ kind = \"softmax\", features = 5, classes = 2 }}\n\
                 sampling = {{ kind = \"fixed\", cohort = 6 }}\n\
                 [privacy]\nmechanism = \"distributed\"\nclip = 1.0\nbits = 16\nnoise_stddev = 0.5\n\
                 secure_aggregation = {secure_aggregation}\n{policy}\n"
            ),
        )
        .unwrap();
        p.to_string_lossy().into_owned()
    };
    let plain = config(true, "");
    let floor7 = config(true, "[privacy.secagg_policy]\nmin_clients = 7\n");
    let unsecured = config(false, "");
    let train =
        |path: &str, flags: &str| format!("fl train --config {path} --json --quiet {flags}");
    fail_table(&[
        (&train(&plain, "--min-clients 7"), "min_clients"),
        (&train(&floor7, ""), "min_clients"),
        (
            &train(&plain, "--min-degree 3 --min-threshold-fraction 0.9"),
            "min_threshold_fraction",
        ),
        (
            &train(&plain, "--min-threshold-fraction 1.5"),
            "--min-threshold-fraction",
        ),
        (
            &train(&unsecured, "--min-clients 3"),
            "secure_aggregation = true",
        ),
        (
            &train(
                &config(false, "[privacy.secagg_policy]\nmin_clients = 3\n"),
                "",
            ),
            "secagg_policy",
        ),
    ]);
    let ran = keys_table(&[
        (&train(&plain, ""), &["rounds_completed"]),
        (&train(&plain, "--min-clients 6"), &["rounds_completed"]),
        // The flag overrides the config's floor.
        (&train(&floor7, "--min-clients 6"), &["rounds_completed"]),
        (
            &train(&floor7, "--permissive-policy"),
            &["rounds_completed"],
        ),
    ]);
    assert!(ran.iter().all(|v| v["rounds_completed"] == 2), "{ran:?}");
}

/// `--adversary colluders|grinding`: colluding clients that hand the server their shares and
/// sign any survivor set recover the target's input exactly where the analysis puts the bound,
/// at the threshold each threat model sizes (n = 11, complete graph: honest-but-curious t = 6,
/// k = 10, bound `2t − k = 2`; active t = ⌊(11 + ⌈1.1⌉)/2⌋ + 1 = 7, bound `2t + 1 − k = 5`, so
/// the 2 colluders the active round is sized for, and 4, fail and honest clients abort). A
/// grinding server on a Harary graph (n = 16, k = 6, t = 4, bound 2) cannot place 1 colluder
/// twice around the target; 3 fixed colluders reach 2 in one placement with probability 0.34,
/// so 64 tries miss with probability 0.66^64 < 10⁻¹¹ (the rows' false-positive rate).
#[test]
fn colluders_and_grinding_recover_an_input_only_past_the_bound() {
    let harary =
        "--clients 16 --degree 6 --threshold 4 --adversary grinding --grinding-attempts 64";
    let hbc = "--threat-model honest-but-curious";
    let rows: &[(String, bool)] = &[
        (
            format!("--clients 11 {hbc} --adversary colluders --colluders 1"),
            false,
        ),
        (
            format!("--clients 11 {hbc} --adversary colluders --colluders 2"),
            true,
        ),
        (
            "--clients 11 --adversary colluders --colluders 2".into(),
            false,
        ),
        (
            "--clients 11 --adversary colluders --colluders 4".into(),
            false,
        ),
        (
            "--clients 11 --adversary colluders --colluders 5".into(),
            true,
        ),
        (format!("{harary} --colluders 1"), false),
        (format!("{harary} --colluders 3"), true),
        (format!("{harary} --colluders 3 {hbc}"), true),
    ];
    for (options, recovered) in rows {
        let v = run(&format!(
            "secagg simulate --dim 40 --bits 16 --seed 2 {options} --json --quiet"
        ));
        let what = format!("{options}: {v}");
        assert_eq!(v["attack_recovered_input"], *recovered, "{what}");
        let near = v["colluding_neighbours"].as_u64().unwrap();
        let bound = v["bound_colluding_neighbours"].as_u64().unwrap();
        assert_eq!(near >= bound, *recovered, "{what}");
        if v["threat_model"] == "active" {
            assert_eq!(
                v["clients_aborted"].as_u64().unwrap() > 0,
                !recovered,
                "{what}"
            );
        } else {
            assert_eq!(v["clients_aborted"], 0, "{what}");
        }
        if options.contains("grinding") {
            let g = &v["grinding"];
            assert_eq!(g["attempts"], 64, "{what}");
            assert_eq!(g["needed_colluding_neighbours"], 2, "{what}");
            assert_eq!(g["split_placement_found"], *recovered, "{what}");
            for key in ["best_colluding_neighbours", "placements_reaching_need"] {
                assert!(g[key].as_u64().is_some(), "{key}: {what}");
            }
            for key in ["placement_probability", "planner_charge"] {
                assert!(g[key].as_f64().is_some(), "{key}: {what}");
            }
            // With one colluder no placement reaches two: the bound is log2 0.
            let bound_log2 = &g["planner_bound_log2"];
            assert!(
                bound_log2.as_f64().is_some() || bound_log2 == "-inf",
                "{what}"
            );
        } else {
            assert!(v["grinding"].is_null(), "{what}");
        }
    }
    fail_table(&[
        (
            "secagg simulate --clients 11 --dim 8 --adversary colluders",
            "needs --colluders",
        ),
        (
            "secagg simulate --clients 11 --dim 8 --adversary lying-server --colluders 2",
            "--colluders applies",
        ),
        (
            "secagg simulate --clients 11 --dim 8 --adversary colluders --colluders 11",
            "colluders",
        ),
        (
            "secagg simulate --clients 11 --dim 8 --adversary grinding --colluders 2 --grinding-attempts 0",
            "grinding_attempts",
        ),
        (
            "secagg simulate --clients 11 --dim 8 --colluders 2",
            "--adversary",
        ),
    ]);
}
