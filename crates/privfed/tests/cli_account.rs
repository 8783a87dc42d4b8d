//! `privfed account | calibrate | analyze` through the real binary.

use std::process::Command;

use privfed_accounting::{DpEvent, RdpAccountant};
use serde_json::Value;

fn run(args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_privfed"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = if out.status.success() {
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    } else {
        Value::Null
    };
    (out.status.success(), v, stderr)
}

fn ok(args: &[&str]) -> Value {
    let (success, v, err) = run(args);
    assert!(success, "{args:?} failed: {err}");
    v
}

fn fails_with(args: &[&str], needle: &str) {
    let (success, _, err) = run(args);
    assert!(!success, "{args:?} should fail");
    assert!(
        err.contains(needle),
        "{args:?}: stderr {err:?} lacks {needle:?}"
    );
}

#[test]
fn account_rdp_matches_library() {
    let v = ok(&[
        "account",
        "--accountant",
        "rdp",
        "--mechanism",
        "gaussian",
        "--noise-multiplier",
        "1.1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
        "--json",
    ]);
    let mut acc = RdpAccountant::new();
    acc.compose(&DpEvent::poisson_gaussian(0.01, 1.1, 1000))
        .unwrap();
    let want = acc.get_epsilon_and_order(1e-5).unwrap();
    assert_eq!(v["epsilon"].as_f64().unwrap(), want.epsilon);
    assert_eq!(v["optimal_order"].as_f64().unwrap(), want.optimal_order);
    assert_eq!(v["accountant"], "rdp");
}

#[test]
fn account_pld_epsilon_and_delta_are_consistent() {
    let base = [
        "account",
        "--accountant",
        "pld",
        "--noise-multiplier",
        "1.1",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
        "--json",
    ];
    let e = ok(&[&base[..], &["--delta", "1e-5"]].concat());
    let eps = e["epsilon"].as_f64().unwrap();
    assert!(eps > 0.5 && eps < 3.0, "{eps}");
    assert!(e.get("optimal_order").is_none());
    let eps_s = format!("{eps}");
    let d = ok(&[&base[..], &["--epsilon", &eps_s]].concat());
    let delta = d["delta"].as_f64().unwrap();
    assert!((delta / 1e-5 - 1.0).abs() < 1e-6, "{delta}");
}

#[test]
fn account_other_mechanisms() {
    for args in [
        vec!["--mechanism", "laplace", "--scale", "2"],
        vec!["--mechanism", "pure", "--local-epsilon", "0.5"],
        vec![
            "--mechanism",
            "skellam",
            "--variance",
            "100",
            "--l1-sensitivity",
            "1",
            "--l2-sensitivity",
            "1",
        ],
    ] {
        for acc in ["rdp", "pld"] {
            let mut a = vec![
                "account",
                "--accountant",
                acc,
                "--steps",
                "10",
                "--delta",
                "1e-6",
                "--json",
            ];
            a.extend(&args);
            let v = ok(&a);
            let e = v["epsilon"].as_f64().unwrap();
            assert!(e > 0.0 && e.is_finite(), "{a:?}: {v}");
        }
    }
}

#[test]
fn calibrate_meets_target() {
    for acc in ["rdp", "pld"] {
        let v = ok(&[
            "calibrate",
            "--accountant",
            acc,
            "--target-epsilon",
            "2",
            "--delta",
            "1e-5",
            "--sampling-rate",
            "0.05",
            "--steps",
            "50",
            "--json",
        ]);
        let z = v["noise_multiplier"].as_f64().unwrap();
        let e = v["epsilon"].as_f64().unwrap();
        assert!(z > 0.3 && z < 3.0, "{v}");
        assert!(e <= 2.0 && e > 1.99, "{v}");
    }
}

#[test]
fn analyze_ddml_and_reconstruction() {
    let v = ok(&[
        "analyze",
        "ddml",
        "--local-epsilon",
        "2",
        "--instances",
        "10",
        "--updates",
        "100",
        "--json",
    ]);
    assert_eq!(v["adversary_i"]["epsilon"].as_f64().unwrap(), 2.0);
    assert!((v["adversary_ii"]["expected_loss"].as_f64().unwrap() - 0.9).abs() < 1e-12);
    let b = ok(&[
        "analyze",
        "reconstruction",
        "--dimension",
        "3",
        "--threshold",
        "0.5",
        "--epsilon",
        "0.1",
        "--json",
    ]);
    // k = 3: P₀ = (1 − t)/2 = 0.25; bound e^{0.1}·0.25.
    assert!((b["success_bound"].as_f64().unwrap() - 0.1f64.exp() * 0.25).abs() < 1e-12);
    let m = ok(&[
        "analyze",
        "reconstruction",
        "--dimension",
        "3",
        "--threshold",
        "0.5",
        "--target-bound",
        "0.5",
        "--json",
    ]);
    assert!((m["max_epsilon"].as_f64().unwrap() - 2f64.ln()).abs() < 1e-12);
    let g = ok(&[
        "analyze",
        "gaussian",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--json",
    ]);
    assert!((g["sigma"].as_f64().unwrap() - 3.730_631_634_815_937_4).abs() < 1e-8);
}

#[test]
fn invalid_parameters_fail_clearly() {
    let acc = [
        "account",
        "--accountant",
        "rdp",
        "--noise-multiplier",
        "1",
        "--json",
    ];
    fn join<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<&'a str> {
        [a, b].concat()
    }
    let with = |extra: &[&'static str]| join(&acc, extra);
    fails_with(
        &with(&["--sampling-rate", "0", "--steps", "3", "--delta", "1e-5"]),
        "sampling-rate",
    );
    fails_with(
        &with(&["--sampling-rate", "1.5", "--steps", "3", "--delta", "1e-5"]),
        "sampling-rate",
    );
    fails_with(&with(&["--steps", "3", "--delta", "0"]), "delta");
    fails_with(&with(&["--steps", "3", "--delta", "1"]), "delta");
    fails_with(&with(&["--steps", "0", "--delta", "1e-5"]), "steps");
    fails_with(
        &with(&["--steps", "3", "--delta", "1e-5", "--epsilon", "1"]),
        "cannot be used",
    );
    fails_with(
        &[
            "account",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "0",
            "--steps",
            "3",
            "--delta",
            "1e-5",
        ],
        "noise_multiplier",
    );
    fails_with(
        &[
            "account",
            "--accountant",
            "rdp",
            "--noise-multiplier",
            "-1",
            "--steps",
            "3",
            "--delta",
            "1e-5",
        ],
        "noise_multiplier",
    );
    fails_with(
        &[
            "account",
            "--accountant",
            "rdp",
            "--steps",
            "3",
            "--delta",
            "1e-5",
        ],
        "--noise-multiplier",
    );
    fails_with(
        &[
            "account",
            "--accountant",
            "pld",
            "--mechanism",
            "skellam",
            "--variance",
            "10",
            "--l1-sensitivity",
            "3",
            "--l2-sensitivity",
            "2",
            "--steps",
            "3",
            "--delta",
            "1e-5",
        ],
        "Skellam",
    );
    fails_with(
        &[
            "calibrate",
            "--accountant",
            "rdp",
            "--target-epsilon",
            "1",
            "--delta",
            "2",
            "--steps",
            "3",
        ],
        "delta",
    );
    fails_with(
        &[
            "analyze",
            "reconstruction",
            "--dimension",
            "1",
            "--threshold",
            "0.5",
            "--epsilon",
            "1",
        ],
        "k",
    );
}
