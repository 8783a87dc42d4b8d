//! `privfed mvu ...`, `describe mvu|bitwise-rr` and `dme mvu` through the real binary.

use crate::common::{fail_table, fails_with, json_ok, matrix, run, temp_file, words};

#[test]
fn design_reports_a_feasible_design_better_than_grr_and_saves_it() {
    let (_dir, out) = temp_file("cli-mvu", "d3.json");
    let v = json_ok(&[
        "mvu",
        "design",
        "--input-bits",
        "3",
        "--output-bits",
        "3",
        "--epsilon",
        "1",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let p = v["P"].as_array().unwrap();
    assert_eq!(p.len(), 8);
    assert_eq!(v["alphabet"].as_array().unwrap().len(), 8);
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 1.0 && eps > 1.0 - 1e-6, "{eps}");
    assert!(v["max_violation"].as_f64().unwrap() <= 1e-9);
    let var = v["variance"].as_f64().unwrap();
    assert!(var < 0.5 * v["grr_variance"].as_f64().unwrap());
    assert!(v["worst_case_variance"].as_f64().unwrap() >= var);
    assert!(v["seconds"].as_f64().unwrap() >= 0.0);
    // The exact ε is the largest log ratio of the printed P.
    let rows = matrix(&v["P"]);
    let mut max_lr = 0.0f64;
    for r1 in &rows {
        for r2 in &rows {
            for (a, b) in r1.iter().zip(r2) {
                max_lr = max_lr.max(a.ln() - b.ln());
            }
        }
    }
    assert!((max_lr - eps).abs() < 1e-12, "{max_lr} vs {eps}");

    // Load the design: describe reports its exact ε and the variance on [lo, hi] = [-1, 1]
    // (4× the [0, 1] variance).
    let d = json_ok(&[
        "describe",
        "mvu",
        "--epsilon",
        "1",
        "--design",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(d["mechanism"], "mvu");
    assert!((d["epsilon"].as_f64().unwrap() - eps).abs() < 1e-9);
    let w = d["variance"].as_f64().unwrap();
    let w01 = v["worst_case_variance"].as_f64().unwrap();
    assert!((w - 4.0 * w01).abs() < 1e-9 * w, "{w} vs 4·{w01}");
    // A smaller budget than the design's is refused.
    fails_with(
        &[
            "describe",
            "mvu",
            "--epsilon",
            "0.5",
            "--design",
            out.to_str().unwrap(),
        ],
        "more than --epsilon",
    );
    // RDP of the design: increasing in the order, below ε.
    let r = json_ok(&[
        "mvu",
        "rdp",
        "--design",
        out.to_str().unwrap(),
        "--orders",
        "2,8,64",
        "--dim",
        "4",
        "--sensitivity",
        "0.5",
        "--json",
    ]);
    let c: Vec<f64> = r["scalar_rdp"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert!(c[0] < c[1] && c[1] < c[2] && c[2] <= eps + 1e-12);
    assert!(
        r["vector"]["lp_relaxation"][0].as_f64().unwrap()
            <= r["vector"]["greedy"][0].as_f64().unwrap() + 1e-12
    );
}

#[test]
fn metric_design_and_errors() {
    let v = json_ok(&words(
        "mvu design --input-bits 3 --output-bits 2 --epsilon 4 --metric-dp l1 --json",
    ));
    assert_eq!(v["constraint"]["kind"], "metric");
    assert!(v["epsilon"].as_f64().unwrap() <= 4.0);
    assert!(v["max_violation"].as_f64().unwrap() <= 1e-9);
    fail_table(&[
        (
            "mvu design --input-bits 3 --output-bits 0 --epsilon 1",
            "infeasible",
        ),
        (
            "mvu design --input-bits 9 --output-bits 3 --epsilon 1",
            "input_bits",
        ),
        (
            "mvu design --input-bits 3 --output-bits 3 --epsilon -1",
            "epsilon",
        ),
    ]);
    let (_dir, bad) = temp_file("cli-mvu", "bad.json");
    std::fs::write(&bad, "{\"input_bits\": 1}").unwrap();
    fails_with(
        &[
            "describe",
            "mvu",
            "--epsilon",
            "1",
            "--design",
            bad.to_str().unwrap(),
        ],
        "invalid MVU design",
    );
    fails_with(
        &words("describe mvu --epsilon 1 --design /nonexistent/x.json"),
        "reading",
    );
}

#[test]
fn describe_bitwise_rr_and_mvu() {
    let v = run("describe bitwise-rr --epsilon 3 --bits 3 --json");
    assert_eq!(v["mechanism"], "bitwise-rr");
    let eps = v["epsilon"].as_f64().unwrap();
    assert!(eps <= 3.0 && eps > 3.0 - 1e-12);
    // Closed form: h²(4^b−1)/3·e^{ε'}/(e^{ε'}−1)² + h²/4, h = 2/7, ε' = 1.
    let e: f64 = 1f64.exp();
    let h: f64 = 2.0 / 7.0;
    let expected = h * h * 21.0 * e / (e - 1.0).powi(2) + h * h / 4.0;
    let w = v["variance"].as_f64().unwrap();
    assert!((w - expected).abs() < 1e-12 * expected, "{w} vs {expected}");
    let m = run("describe mvu --epsilon 3 --bits 3 --json");
    assert_eq!(m["mechanism"], "mvu");
    let g = run("describe grr --epsilon 3 --bits 3 --json");
    assert!(m["variance"].as_f64().unwrap() < g["variance"].as_f64().unwrap());
}

#[test]
fn dme_mvu_matches_the_exact_prediction() {
    // The z-score of the mean MSE against its exact expectation over 100 trials; |z| < 5
    // (FPR ≈ 6e-7 under normality of the trial mean). In one dimension each trial's MSE is
    // (Var/n)·χ²₁, so the mean of 100 has relative sd √(2/100) ≈ 0.14: the ratio check at
    // [0.25, 1.75] is beyond 5 sd.
    for mech in [
        vec![
            "mvu",
            "--epsilon",
            "2",
            "--input-bits",
            "3",
            "--output-bits",
            "2",
        ],
        vec!["bitwise-rr", "--epsilon", "2", "--bits", "3"],
    ] {
        let mut args = vec!["dme"];
        args.extend(mech.iter());
        args.extend([
            "--clients",
            "2000",
            "--trials",
            "20",
            "--seed",
            "5",
            "--json",
            "--quiet",
        ]);
        let v = json_ok(&args);
        let z = v["mse_z"].as_f64().unwrap();
        assert!(z.abs() < 5.0, "{mech:?}: z = {z}");
        let ratio = v["mse_over_predicted"].as_f64().unwrap();
        assert!(ratio > 0.25 && ratio < 1.75, "{mech:?}: {ratio}");
    }
}

/// `privfed mvu experiment scalar` end to end on a small grid: progress on stderr, the markdown
/// table on stdout, one CSV row per (ε, mechanism, x), reproducible from `--seed`, the exact
/// variance of MVU b = 1 equal to the CLDP closed form, and every empirical variance (n = 20,000
/// reports) within 10% of the exact one. The sample variance's relative standard deviation is
/// sqrt((κ − 1)/n) ≤ 0.022 for kurtosis κ ≤ 10 (these outputs are bounded), so 10% is ≥ 4.5 s.d.:
/// false-positive rate below 1e-5 per check, < 1e-3 over the 30 checks (the seed is fixed, so the
/// outcome is deterministic; the bound says how unlucky a seed would have to be).
#[test]
fn scalar_experiment_end_to_end() {
    let run = |name: &str| {
        let (_dir, csv) = temp_file("cli-mvu", name);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args([
                "mvu",
                "experiment",
                "scalar",
                "--clients",
                "20000",
                "--points",
                "3",
                "--epsilons",
                "1,3",
                "--seed",
                "7",
                "--csv",
                csv.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        (
            String::from_utf8(out.stdout).unwrap(),
            stderr,
            std::fs::read_to_string(csv).unwrap(),
        )
    };
    let (table, stderr, csv) = run("scalar_a.csv");
    assert!(stderr.contains("scalar DME, ε = 1"), "{stderr}");
    assert!(stderr.contains("scalar DME, ε = 3"), "{stderr}");
    assert!(
        table.contains("**ε = 3**") && table.contains("| mvu-b3 |"),
        "{table}"
    );
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 2 * 3 * 5, "{csv}");
    for r in &rows {
        let (eps, name, x): (f64, &str, f64) = (r[0].parse().unwrap(), r[1], r[3].parse().unwrap());
        let (emp, exact): (f64, f64) = (r[6].parse().unwrap(), r[7].parse().unwrap());
        assert!(
            (emp / exact - 1.0).abs() < 0.10,
            "ε={eps} {name} x={x}: empirical {emp} vs exact {exact}"
        );
        if name == "mvu-b1" {
            let c = ((eps.exp() + 1.0) / (eps.exp() - 1.0)).powi(2) - x * x;
            assert!((exact - c).abs() < 1e-8 * c, "{exact} vs CLDP {c}");
        }
    }
    let (table2, _, csv2) = run("scalar_b.csv");
    assert_eq!((table, csv), (table2, csv2), "same seed, same output");
}

#[test]
fn vector_experiment_rejects_bad_sizes() {
    fail_table(&[
        (
            "mvu experiment vector --trials 0",
            "--trials must be at least 1",
        ),
        (
            "mvu experiment vector --l1-input-bits 12",
            "--l1-input-bits must be in 5..=",
        ),
    ]);
}
