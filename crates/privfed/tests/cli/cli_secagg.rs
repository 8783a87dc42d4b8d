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
    // Another γ than the round's thresholds are sized for is refused (one γ, not two).
    let mut other = with.clone();
    other.extend_from_slice(&["--colluding-fraction", "0.2"]);
    fails_with(&other, "colluding_fraction");
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
