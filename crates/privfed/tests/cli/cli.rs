//! The CLI through the real binary.

use crate::common::{fail_table, json_ok, privfed, run, words};

#[test]
fn describe_privunit2_reports_the_optimum() {
    let v = run("describe privunit2 --epsilon 4 --dim 1000 --json");
    assert_eq!(v["mechanism"], "privunit2");
    let var = v["variance"].as_f64().unwrap();
    assert!((var - 434.60).abs() <= 0.005 * 434.60, "variance {var}");
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 4.0 && eps > 4.0 - 1e-9, "epsilon {eps}");
    assert!(v["params"]["gamma"].as_f64().is_some());
}

#[test]
fn describe_every_sphere_parameterization() {
    let v = run("describe privunitg --epsilon 8 --dim 1000 --json");
    assert!((v["variance"].as_f64().unwrap() - 132.91).abs() < 0.05);
    let v = json_ok(&words(
        "describe privunitg --epsilon 8 --dim 1000 --parameterization dimension-free --json",
    ));
    assert!(v["variance"].as_f64().unwrap() >= 132.90);
    let v = json_ok(&words(
        "describe privunit2 --epsilon 8 --dim 1000 --parameterization paper000 --epsilon0 2.5 --json",
    ));
    assert!(v["epsilon"].as_f64().unwrap() <= 8.0);
    assert!(v["variance"].as_f64().unwrap() > 132.35);
}

/// `dme` agreement with the exact prediction: |z| < 5 where z = (mse − predicted)/se over
/// ≥ 100 trials (normal approximation; two-sided FPR ≈ 6e-7 per case).
fn dme_agrees(args: &[&str]) {
    let mut all = vec!["dme"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "--quiet"]);
    let v = json_ok(&all);
    let z = v["mse_z"].as_f64().unwrap();
    assert!(
        z.abs() < 5.0,
        "dme {args:?}: mse {} predicted {} z {z}",
        v["mse"],
        v["predicted_mse"]
    );
    let ci = v["mse_ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() < ci[1].as_f64().unwrap());
    assert!(v["seconds"].as_f64().unwrap() >= 0.0);
}

#[test]
fn dme_matches_prediction_for_sphere_mechanisms() {
    dme_agrees(&words(
        "privunit2 --epsilon 4 --dim 100 --clients 200 --trials 150 --seed 1",
    ));
    dme_agrees(&words(
        "privunitg --epsilon 2 --dim 50 --clients 200 --trials 150 --seed 2",
    ));
}

#[test]
fn dme_matches_prediction_for_every_other_mechanism() {
    let common = words("--clients 300 --trials 150 --seed 3");
    let cases: [&[&str]; 8] = [
        &words("privunit-inf --epsilon 3 --dim 40"),
        &words("scalar-dp --epsilon 2 --r-max 3"),
        &words("scalar-rel-dp --epsilon 2 --a 0.05 --kappa 0.5"),
        &words("grr --epsilon 1 --bits 3"),
        &words("separated --epsilon 5 --dim 30 --magnitude-epsilon 1 --r-max 2"),
        &words("laplace --epsilon 2 --dim 10"),
        &words("laplace --epsilon 2 --dim 10 --norm linf --radius 0.5"),
        &words("gaussian --epsilon 1 --delta 1e-5 --dim 10 --norm sphere"),
    ];
    for case in cases {
        let mut args = case.to_vec();
        args.extend_from_slice(&common);
        dme_agrees(&args);
    }
}

#[test]
fn describe_every_mechanism() {
    let cases: [(&[&str], &str); 9] = [
        (&words("privunit2 --dim 10"), "privunit2"),
        (&words("privunitg --dim 10"), "privunitg"),
        (&words("privunit-inf --dim 10"), "privunit-inf"),
        (&["scalar-dp"], "scalar-dp"),
        (&words("scalar-rel-dp --a 0.01 --kappa 1"), "scalar-rel-dp"),
        (&words("grr --bits 2"), "grr"),
        (&words("separated --dim 10"), "separated"),
        (&words("laplace --dim 3"), "laplace"),
        (&words("gaussian --dim 3 --delta 1e-6"), "gaussian"),
    ];
    for (case, name) in cases {
        let mut args = vec!["describe"];
        args.extend_from_slice(case);
        args.extend_from_slice(&words("--epsilon 2 --json"));
        let v = json_ok(&args);
        assert_eq!(v["mechanism"], name);
        let eps = v["epsilon"].as_f64().unwrap();
        assert!(eps > 0.0 && eps <= 2.0 + 1e-12, "{name}: ε = {eps}");
        assert!(v["variance"].as_f64().unwrap() > 0.0);
        assert!(v["params"].is_object());
    }
    // Human-readable output names the mechanism too.
    let out = privfed(&words("describe scalar-dp --epsilon 1"));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("mechanism: scalar-dp"));
}

#[test]
fn dme_is_reproducible_with_a_seed_and_thread_independent() {
    let a = json_ok(&words(
        "dme privunit2 --epsilon 4 --dim 20 --clients 100 --trials 3 --seed 9 --threads 1 --json --quiet",
    ));
    let b = json_ok(&words(
        "dme privunit2 --epsilon 4 --dim 20 --clients 100 --trials 3 --seed 9 --threads 2 --json --quiet",
    ));
    assert_eq!(a["mse"], b["mse"]);
    assert_eq!(a["predicted_mse"], b["predicted_mse"]);
}

#[test]
fn bad_input_is_a_clear_error() {
    fail_table(&[
        ("describe privunit2 --epsilon 0 --dim 10", "epsilon"),
        ("describe privunit2 --epsilon -1 --dim 10", "epsilon"),
        ("describe privunit2 --epsilon NaN --dim 10", "epsilon"),
        ("describe privunit2 --epsilon 1", "--dim"),
        ("describe privunit2 --epsilon 1 --dim 1", "dim"),
        (
            "describe privunit2 --epsilon 4 --dim 10 --parameterization paper000",
            "--epsilon0",
        ),
        ("describe nosuch --epsilon 1", "invalid value"),
        (
            "dme privunit2 --epsilon 1 --dim 10 --clients 0",
            "--clients",
        ),
        (
            "dme privunit2 --epsilon 1 --dim 10 --clients 5 --trials 0",
            "--trials",
        ),
        ("describe scalar-dp --epsilon 1 --dim 3", "--dim must be 1"),
        ("describe scalar-dp --epsilon 1 --r-max -2", "r_max"),
        ("describe scalar-rel-dp --epsilon 1", "--a"),
        ("describe grr --epsilon 1 --bits 0", "bits"),
        ("describe grr --epsilon 1 --lo 1 --hi -1", "lo"),
        ("describe gaussian --epsilon 1 --dim 3", "--delta"),
        ("describe gaussian --epsilon 1 --dim 3 --delta 2", "delta"),
        (
            "describe laplace --epsilon 1 --dim 3 --radius 0",
            "--radius",
        ),
        (
            "describe separated --epsilon 1 --dim 3 --magnitude-epsilon 1",
            "--magnitude-epsilon",
        ),
        ("describe privunit-inf --epsilon 1 --dim 0", "dim"),
    ]);
}

/// A negative-looking value, exponent included (`-1e-5`, which clap's own negative-number check
/// does not recognize), reaches the option: the error names the option and the bad value instead
/// of clap's "unexpected argument '-1' found". One representative option per subcommand family.
#[test]
fn negative_looking_values_name_the_option() {
    let cases: [(&str, &[&str]); 7] = [
        (
            "account --accountant rdp --noise-multiplier 1.1 --steps 10 --delta -1e-5",
            &["delta", "-0.00001"],
        ),
        (
            "calibrate --accountant rdp --target-epsilon 1 --steps 10 --delta -1e-5",
            &["delta", "-0.00001"],
        ),
        (
            "describe gaussian --epsilon 1 --dim 3 --delta -1e-5",
            &["delta", "-0.00001"],
        ),
        (
            "dme gaussian --clip 1 --epsilon 1 --delta -1e-5 --clients 5 --dim 3 --quiet",
            &["delta", "-0.00001"],
        ),
        (
            "mvu design --input-bits 2 --output-bits 2 --epsilon -1e-3",
            &["epsilon", "-0.001"],
        ),
        (
            "secagg plan --clients 100 --dropout -1e-2",
            &["dropout", "-0.01"],
        ),
        (
            "serve --ticket-step-secs -1",
            &["--ticket-step-secs", "'-1'"],
        ),
    ];
    for (line, needles) in cases {
        let args = words(line);
        let out = privfed(&args);
        assert!(!out.status.success(), "privfed {line} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("unexpected argument"),
            "privfed {line}: {err}"
        );
        for n in needles {
            assert!(
                err.contains(n),
                "privfed {line}: stderr {err:?} lacks {n:?}"
            );
        }
    }
}

/// `privfed … | head` closes the pipe: the binary must end quietly with status 0, not panic in
/// `println!` (the read end is closed before the child starts, so the write always fails).
#[test]
fn closed_stdout_pipe_is_not_a_panic() {
    for (args, what) in [
        (
            &words("describe privunit2 --epsilon 4 --dim 100 --json")[..],
            "json report",
        ),
        (
            &words("describe privunit2 --epsilon 4 --dim 100")[..],
            "human report",
        ),
        (
            &words("account --accountant rdp --mechanism laplace --scale 2")[..],
            "missing flags (an error, not a pipe)",
        ),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        if what.starts_with("missing") {
            assert!(!out.status.success(), "{what}");
        } else {
            assert!(out.status.success(), "{what}: {stderr}");
            assert!(stderr.is_empty(), "{what}: {stderr}");
        }
    }
}
