//! `privfed describe skellam` (the planner) and `privfed dme skellam|gaussian --clip` (paper 001's
//! distributed DME) through the real binary.

use crate::common::{fails_with, json_ok, privfed, words};

/// Golden values: n = 100, c = 1, local σ = 0.1, d = 2^20, k = 4.
#[test]
fn describe_skellam_golden_values() {
    let base = words(
        "describe skellam --clip 1 --clients 100 --dim 1048576 --noise-stddev 0.1 --k 4 --json",
    );
    for (bits, scale, tol) in [("16", 8153.2, 0.5), ("12", 509.55, 0.05)] {
        let mut args = base.to_vec();
        args.extend_from_slice(&["--bits", bits]);
        let v = json_ok(&args);
        let s = v["scale"].as_f64().unwrap();
        assert!((s - scale).abs() < tol, "bits {bits}: scale {s}");
        assert_eq!(v["local_noise_stddev"].as_f64(), Some(0.1));
        let p = v["wrap_probability"].as_f64().unwrap();
        assert!(p > 6.3e-5 && p < 6.4e-5, "{p}");
        assert!(v["epsilon"].is_null(), "no δ, no ε");
    }
    // With δ: ε is reported and finite.
    let mut args = base.to_vec();
    args.extend_from_slice(&words("--bits 16 --delta 1e-5"));
    let e = json_ok(&args)["epsilon"].as_f64().unwrap();
    assert!(e > 0.0 && e.is_finite());
}

/// `--colluding-fraction γ`: the plan's JSON says γ, the colluders `⌈γ·n⌉` and the honest count
/// beside ε; an ε target holds for the honest count (more noise than without colluders); a γ
/// outside [0, 1) or one leaving no honest client is an error.
#[test]
fn describe_skellam_reports_the_honest_contributors() {
    let base = [
        "describe",
        "skellam",
        "--bits",
        "18",
        "--clip",
        "3",
        "--clients",
        "16",
        "--dim",
        "4096",
        "--k",
        "3",
        "--epsilon",
        "6",
        "--delta",
        "0.01",
        "--rounds",
        "150",
        "--json",
    ];
    let none = json_ok(&base);
    assert_eq!(none["colluding_fraction"].as_f64(), Some(0.0));
    assert_eq!(none["honest_contributors"].as_u64(), Some(16));
    let mut args = base.to_vec();
    args.extend_from_slice(&["--colluding-fraction", "0.25"]);
    let v = json_ok(&args);
    assert_eq!(v["colluding_fraction"].as_f64(), Some(0.25));
    assert_eq!(v["colluders"].as_u64(), Some(4));
    assert_eq!(v["honest_contributors"].as_u64(), Some(12));
    assert!(v["epsilon"].as_f64().unwrap() <= 6.0);
    assert!(
        v["local_noise_stddev"].as_f64().unwrap() > none["local_noise_stddev"].as_f64().unwrap()
    );
    for (gamma, what) in [
        ("1", "colluding_fraction"),
        ("0.95", "no honest contributor"),
    ] {
        let mut bad = base.to_vec();
        bad.extend_from_slice(&["--colluding-fraction", gamma]);
        fails_with(&bad, what);
    }
}

#[test]
fn describe_skellam_plans_for_an_epsilon_or_names_the_knob() {
    let v = json_ok(&words(
        "describe skellam --bits 18 --clip 3 --clients 16 --dim 16777216 --k 3 --epsilon 6 --delta 0.01 --rounds 150 --json",
    ));
    let sigma = v["local_noise_stddev"].as_f64().unwrap();
    // The paper's own solver gives 5.52 here (their issue #66 table).
    assert!((sigma - 5.52).abs() < 0.01, "{sigma}");
    assert!(v["epsilon"].as_f64().unwrap() <= 6.0);
    // 16 bits: no noise level reaches ε = 6 — an error naming the bits, not a huge σ.
    fails_with(
        &words(
            "describe skellam --bits 16 --clip 3 --clients 16 --dim 16777216 --k 3 --epsilon 6 --delta 0.01 --rounds 150",
        ),
        "move `bits`: use at least 17 bits",
    );
}

#[test]
fn dme_skellam_reports_mse_wraps_and_epsilon() {
    let args = words(
        "dme skellam --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 100 --trials 40 --seed 3 --json --quiet",
    );
    let v = json_ok(&args);
    for key in ["mse", "predicted_mse", "wraps", "epsilon", "seconds"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    let (mse, pred) = (
        v["mse"].as_f64().unwrap(),
        v["predicted_mse"].as_f64().unwrap(),
    );
    let ci = crate::common::floats(&v["mse_ci95"]);
    // The prediction inside a generous band around the measured interval (40 trials).
    let half = (ci[1] - ci[0]) / 2.0;
    assert!((mse - pred).abs() < 3.0 * half, "{mse} vs {pred} ± {half}");
    assert_eq!(v["wraps"].as_u64(), Some(0));
    assert!(v["epsilon"].as_f64().unwrap() <= 2.0 + 1e-9);
    // Same seed, same numbers.
    assert_eq!(json_ok(&args)["mse"], v["mse"]);
    // Dropouts: fewer survivors, a larger ε than planned.
    let mut drop = args.to_vec();
    drop.extend_from_slice(&["--dropout", "0.3"]);
    let d = json_ok(&drop);
    assert!(d["epsilon"].as_f64().unwrap() > d["planned_epsilon"].as_f64().unwrap());
    assert!(d["mean_survivors"].as_f64().unwrap() < 20.0);
}

/// The DDG baseline through the same options: planned to the same ε with its own accounting.
#[test]
fn ddg_is_planned_and_run_with_its_own_accounting() {
    let v = json_ok(&words(
        "dme ddg --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 100 --trials 20 --seed 3 --json --quiet",
    ));
    assert_eq!(v["mechanism"], "ddg");
    for key in ["mse", "predicted_mse", "wraps", "epsilon", "seconds"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    let e = v["epsilon"].as_f64().unwrap();
    assert!(e <= 2.0 + 1e-9 && e > 1.99, "{e}");
    let d = json_ok(&words(
        "describe ddg --bits 16 --clip 1 --clients 100 --dim 4096 --noise-stddev 0.1 --delta 1e-5 --json",
    ));
    assert_eq!(d["share"], "discrete_gaussian");
    assert!(d["epsilon"].as_f64().unwrap().is_finite());
}

#[test]
fn dme_gaussian_with_clip_is_the_distributed_baseline() {
    let v = json_ok(&words(
        "dme gaussian --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 100 --trials 20 --seed 3 --json --quiet",
    ));
    assert_eq!(v["mechanism"], "gaussian");
    assert_eq!(v["wraps"].as_u64(), Some(0));
    assert!((v["epsilon"].as_f64().unwrap() - 2.0).abs() < 1e-6);
    // Without --clip, `dme gaussian` is still the local Gaussian randomizer.
    let local = json_ok(&words(
        "dme gaussian --epsilon 2 --delta 1e-5 --clients 20 --dim 3 --trials 2 --seed 1 --json --quiet",
    ));
    assert!(local.get("wraps").is_none());
}

/// The continuous-Gaussian baseline has no modulus: it runs without --bits (whose default, 3, is
/// far too small for a Skellam plan of 20 clients), any --bits leaves the run unchanged, and its
/// own bad options are named.
#[test]
fn dme_gaussian_with_clip_does_not_read_bits() {
    let base = words(
        "dme gaussian --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 50 --trials 5 \
         --seed 7 --json --quiet",
    );
    let plain = json_ok(&base);
    assert_eq!(plain["mechanism"], "gaussian");
    assert_eq!(plain["bits"].as_u64(), Some(0), "no modulus: {plain}");
    for bits in ["1", "16"] {
        let mut args = base.clone();
        args.extend_from_slice(&["--bits", bits]);
        let v = json_ok(&args);
        assert_eq!(v["mse"], plain["mse"], "--bits {bits} changed the run");
    }
    let mut args = base.clone();
    args[3] = "0";
    fails_with(&args, "clip");
    let sigma =
        words("dme gaussian --clip 1 --noise-stddev 0 --delta 1e-5 --clients 20 --dim 50 --quiet");
    fails_with(&sigma, "noise_stddev");
    // Skellam still needs the bits it uses.
    fails_with(
        &words("dme skellam --clip 1 --epsilon 2 --delta 1e-5 --clients 20 --dim 50 --quiet"),
        "bits",
    );
}

#[test]
fn distributed_bad_input_is_a_clear_error() {
    let ok = words(
        "dme skellam --bits 16 --clip 1 --epsilon 2 --delta 1e-5 --clients 5 --dim 10 --trials 1 --quiet",
    );
    let with = |flag: &str, value: &str| -> Vec<String> {
        let mut v: Vec<String> = ok.iter().map(|s| s.to_string()).collect();
        let i = v.iter().position(|a| a == flag).unwrap();
        v[i + 1] = value.to_string();
        v
    };
    for (flag, value, needle) in [
        ("--bits", "63", "bits"),
        ("--bits", "0", "bits"),
        ("--clip", "0", "clip"),
        ("--clip", "NaN", "clip"),
        ("--clip", "inf", "clip"),
        ("--dim", "0", "dim"),
        ("--epsilon", "-1", "epsilon"),
        ("--delta", "1.5", "delta"),
    ] {
        let args = with(flag, value);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&args, needle);
    }
    fails_with(
        &words("dme skellam --bits 16 --epsilon 1 --delta 1e-5 --clients 5 --dim 10 --quiet"),
        "--clip",
    );
    let mut drop = ok.to_vec();
    drop.extend_from_slice(&["--dropout", "1"]);
    fails_with(&drop, "dropout");
    // The local mechanisms still require --epsilon.
    let out = privfed(&words("describe privunit2 --dim 10"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--epsilon"));
}
