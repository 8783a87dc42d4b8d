//! `privfed account | calibrate | analyze` through the real binary.

use crate::common::{
    TempDir, fail_table, fails_with, floats, json_ok, matrix, run, temp_file, words,
};

use privfed_accounting::{DpEvent, RdpAccountant};

#[test]
fn account_rdp_matches_library() {
    let v = json_ok(&words(
        "account --accountant rdp --mechanism gaussian --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000 --delta 1e-5 --json",
    ));
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
    let base = words(
        "account --accountant pld --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000 --json",
    );
    let e = json_ok(&[&base[..], &["--delta", "1e-5"]].concat());
    let eps = e["epsilon"].as_f64().unwrap();
    assert!(eps > 0.5 && eps < 3.0, "{eps}");
    assert!(e.get("optimal_order").is_none());
    let eps_s = format!("{eps}");
    let d = json_ok(&[&base[..], &["--epsilon", &eps_s]].concat());
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
            let v = json_ok(&a);
            let e = v["epsilon"].as_f64().unwrap();
            assert!(e > 0.0 && e.is_finite(), "{a:?}: {v}");
        }
    }
}

/// `--mechanism pure` is a local randomizer: with `--sampling-rate` a client's participation is
/// visible, so one use still costs the pure ε at tiny δ (the event is `local_sampled`, not the
/// central `poisson_sampled`, whose ln(1 + q(e^ε − 1)) would be an under-statement here).
#[test]
fn account_pure_with_sampling_is_local() {
    let base = words(
        "account --mechanism pure --local-epsilon 2 --sampling-rate 0.1 --steps 1 --delta 1e-12 --json",
    );
    let central = (1.0 + 0.1 * (2f64.exp() - 1.0)).ln();
    for acc in ["pld", "rdp"] {
        let v = json_ok(&[&base[..], &["--accountant", acc]].concat());
        assert_eq!(v["event"]["event"]["type"], "local_sampled", "{v}");
        let e = v["epsilon"].as_f64().unwrap();
        assert!(e > central, "{acc}: {e} vs central {central}");
        assert!(e <= 2.0 && e > 2.0 - 2e-3, "{acc}: {e}");
        if acc == "rdp" {
            // RDP's conversion alone gives a little more than 2; pure composition caps it.
            assert!(v["epsilon_rdp"].as_f64().unwrap() > 2.0, "{v}");
            assert_eq!(v["epsilon_from"], "pure_composition");
        }
    }
    // δ at ε = T·ε_pure is 0 by pure composition, whatever RDP's conversion says.
    let d = json_ok(&[&base[..9], &words("--epsilon 2 --json --accountant rdp")].concat());
    assert_eq!(d["delta"].as_f64().unwrap(), 0.0, "{d}");
    assert_eq!(d["delta_from"], "pure_composition");
    assert!(d["delta_rdp"].as_f64().unwrap() > 0.0);
    // Many steps: sampling still helps (fewer participations), below the unsampled composition.
    let steps = words("--steps 100 --delta 1e-6 --accountant pld");
    let sampled = json_ok(&[&base[..7], &["--json"], &steps[..]].concat());
    let full = json_ok(&[&base[..5], &["--json"], &steps[..]].concat());
    let (s, f) = (
        sampled["epsilon"].as_f64().unwrap(),
        full["epsilon"].as_f64().unwrap(),
    );
    assert!(s < f, "{s} vs {f}");
}

#[test]
fn calibrate_meets_target() {
    for acc in ["rdp", "pld"] {
        let v = json_ok(&[
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
    let v = json_ok(&words(
        "analyze ddml --local-epsilon 2 --instances 10 --updates 100 --json",
    ));
    assert_eq!(v["adversary_i"]["epsilon"].as_f64().unwrap(), 2.0);
    assert!((v["adversary_ii"]["expected_loss"].as_f64().unwrap() - 0.9).abs() < 1e-12);
    let b = json_ok(&words(
        "analyze reconstruction --dimension 3 --threshold 0.5 --epsilon 0.1 --json",
    ));
    // k = 3: P₀ = (1 − t)/2 = 0.25; bound e^{0.1}·0.25.
    assert!((b["success_bound"].as_f64().unwrap() - 0.1f64.exp() * 0.25).abs() < 1e-12);
    let m = json_ok(&words(
        "analyze reconstruction --dimension 3 --threshold 0.5 --target-bound 0.5 --json",
    ));
    assert!((m["max_epsilon"].as_f64().unwrap() - 2f64.ln()).abs() < 1e-12);
    let g = run("analyze gaussian --epsilon 1 --delta 1e-5 --json");
    assert!((g["sigma"].as_f64().unwrap() - 3.730_631_634_815_937_4).abs() < 1e-8);
}

#[test]
fn invalid_parameters_fail_clearly() {
    let acc = words("account --accountant rdp --noise-multiplier 1 --json");
    fn join<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<&'a str> {
        [a, b].concat()
    }
    let with = |extra: &[&'static str]| join(&acc, extra);
    fails_with(
        &with(&words("--sampling-rate 0 --steps 3 --delta 1e-5")),
        "sampling-rate",
    );
    fails_with(
        &with(&words("--sampling-rate 1.5 --steps 3 --delta 1e-5")),
        "sampling-rate",
    );
    fails_with(&with(&words("--steps 3 --delta 0")), "delta");
    fails_with(&with(&words("--steps 3 --delta 1")), "delta");
    fails_with(&with(&words("--steps 0 --delta 1e-5")), "steps");
    fails_with(
        &with(&words("--steps 3 --delta 1e-5 --epsilon 1")),
        "cannot be used",
    );
    fail_table(&[
        (
            "account --accountant rdp --noise-multiplier 0 --steps 3 --delta 1e-5",
            "noise_multiplier",
        ),
        (
            "account --accountant rdp --noise-multiplier -1 --steps 3 --delta 1e-5",
            "noise_multiplier",
        ),
        (
            "account --accountant rdp --steps 3 --delta 1e-5",
            "--noise-multiplier",
        ),
    ]);
    fails_with(
        &words(
            "account --accountant pld --mechanism skellam --variance 10 --l1-sensitivity 3 --l2-sensitivity 2 --steps 3 --delta 1e-5",
        ),
        "Skellam",
    );
    fail_table(&[
        (
            "calibrate --accountant rdp --target-epsilon 1 --delta 2 --steps 3",
            "delta",
        ),
        (
            "analyze reconstruction --dimension 1 --threshold 0.5 --epsilon 1",
            "k",
        ),
    ]);
}

// ---- `privfed account --mechanism mvu` -------------------------------------------------------

/// Designs with the real CLI (no random starts: fast; `spec` holds the design flags separated by
/// spaces) and returns the file (in a directory deleted when the guard drops) and its `P`.
fn design_file(name: &str, spec: &str) -> (TempDir, String, Vec<Vec<f64>>) {
    let (dir, path) = temp_file("cli-account", name);
    let path_s = path.to_str().unwrap().to_string();
    let mut args = vec![
        "mvu",
        "design",
        "--random-starts",
        "0",
        "--json",
        "--out",
        &path_s,
    ];
    args.extend(spec.split(' '));
    json_ok(&args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let p = matrix(&v["p"]);
    (dir, path_s, p)
}

/// `D_α(P_i ‖ P_k) = ln Σ_j p_j^α q_j^{1−α}/(α − 1)` computed directly from two rows (all
/// entries positive here), the sum in log space so that large orders do not overflow.
fn renyi(p: &[f64], q: &[f64], a: f64) -> f64 {
    let t: Vec<f64> = p
        .iter()
        .zip(q)
        .map(|(x, y)| a * x.ln() + (1.0 - a) * y.ln())
        .collect();
    let m = t.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (m + t.iter().map(|v| (v - m).exp()).sum::<f64>().ln()) / (a - 1.0)
}

/// Largest log ratio of the rows: the design's exact ε-LDP.
fn ldp_epsilon(p: &[Vec<f64>]) -> f64 {
    let mut e = 0.0f64;
    for r in p {
        for s in p {
            for (x, y) in r.iter().zip(s) {
                e = e.max(x.ln() - y.ln());
            }
        }
    }
    e
}

/// Exact δ(ε) of `t` uses of the fixed pair of output laws (p, q): the privacy loss of the
/// product is `Σ_j c_j ln(p_j/q_j)` for the letter counts `c` (multinomial under p), and
/// `δ(ε) = E_p[(1 − e^{ε − L})₊]`.
fn exact_delta(p: &[f64], q: &[f64], t: usize, eps: f64) -> f64 {
    fn ln_fact(n: usize) -> f64 {
        (1..=n).map(|k| (k as f64).ln()).sum()
    }
    fn rec(j: usize, left: usize, lp: f64, loss: f64, p: &[f64], q: &[f64], eps: f64) -> f64 {
        if j == p.len() - 1 {
            let c = left;
            let lp = lp + c as f64 * p[j].ln() - ln_fact(c);
            let loss = loss + c as f64 * (p[j].ln() - q[j].ln());
            return lp.exp() * (1.0 - (eps - loss).exp()).max(0.0);
        }
        (0..=left)
            .map(|c| {
                rec(
                    j + 1,
                    left - c,
                    lp + c as f64 * p[j].ln() - ln_fact(c),
                    loss + c as f64 * (p[j].ln() - q[j].ln()),
                    p,
                    q,
                    eps,
                )
            })
            .sum()
    }
    let lf = ln_fact(t);
    rec(0, t, lf, 0.0, p, q, eps)
}

/// The exact ε(δ) of `t` repetitions of the worst fixed pair of rows: a lower bound on the
/// ε(δ) of `t` uses of the mechanism (an adversary may pick any inputs, in particular a fixed pair).
fn lower_bound_epsilon(rows: &[Vec<f64>], t: usize, delta: f64) -> f64 {
    let mut best = 0.0f64;
    for r in rows {
        for s in rows {
            if exact_delta(r, s, t, best) <= delta {
                continue;
            }
            let (mut lo, mut hi) = (best, 50.0);
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                if exact_delta(r, s, t, mid) > delta {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            best = best.max(lo);
        }
    }
    best
}

/// ε from an RDP curve written out by hand (docs/ALGORITHMS.md §5.2, with the KL clause).
fn convert(orders: &[f64], rdp: &[f64], delta: f64) -> f64 {
    orders
        .iter()
        .zip(rdp)
        .map(|(&a, &r)| {
            if delta * delta >= 1.0 - (-r).exp() {
                0.0
            } else {
                r + ((a - 1.0) / a).ln() - (delta.ln() + a.ln()) / (a - 1.0)
            }
        })
        .fold(f64::INFINITY, f64::min)
        .max(0.0)
}

fn account_mvu(design: &str, extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "account",
        "--mechanism",
        "mvu",
        "--design",
        design,
        "--json",
    ];
    a.extend_from_slice(extra);
    json_ok(&a)
}

#[test]
fn account_mvu_scalar_curve_composition_and_bounds() {
    let (_dir, path, p) = design_file("ldp_3_2.json", "--input-bits 3 --output-bits 2 --epsilon 2");
    let e_ldp = ldp_epsilon(&p);
    assert!(e_ldp <= 2.0 + 1e-9 && e_ldp > 1.0, "{e_ldp}");
    let delta = 1e-3;
    let one = account_mvu(&path, &words("--steps 1 --delta 1e-3"));
    assert_eq!(one["accountant"], "rdp");
    assert_eq!(one["bound"]["rdp_bound"], "exact_scalar");
    let pure = one["pure_epsilon_per_step"].as_f64().unwrap();
    assert!((pure - e_ldp).abs() < 1e-12, "{pure} vs {e_ldp}");
    let curve = &one["event"]["event"];
    assert_eq!(curve["type"], "rdp_curve");
    let orders = floats(&curve["orders"]);
    let rdp = floats(&curve["epsilons"]);
    assert_eq!(orders.len(), rdp.len());
    // Every order: at most the RDP of a pure e_ldp-DP mechanism (and at most e_ldp); at a few
    // orders, equal to max_{i,k} D_α(P_i‖P_k) recomputed here from the file.
    for (&a, &r) in orders.iter().zip(&rdp) {
        let bound = privfed_accounting::rdp::pure_dp_rdp(e_ldp, a);
        assert!(r <= bound * (1.0 + 1e-12) + 1e-15, "α={a}: {r} > {bound}");
        assert!(r <= e_ldp + 1e-12);
    }
    for k in [0, 19, 99, 200, 300, orders.len() - 1] {
        let a = orders[k];
        let direct = p
            .iter()
            .flat_map(|r| p.iter().map(move |s| renyi(r, s, a)))
            .fold(0.0f64, f64::max);
        assert!(
            (rdp[k] - direct).abs() <= 1e-9 * direct,
            "α={a}: {} vs {direct}",
            rdp[k]
        );
    }
    // T = 1: the reported ε is at most the design's pure ε and at least the exact ε(δ) of the
    // worst pair of rows.
    let eps1 = one["epsilon"].as_f64().unwrap();
    let lower1 = lower_bound_epsilon(&p, 1, delta);
    assert!(eps1 <= pure + 1e-12, "{eps1} > {pure}");
    assert!(eps1 >= lower1 - 1e-9, "{eps1} < exact {lower1}");
    // T steps: the same per-step curve composed T times; ε agrees with the hand conversion of
    // T·curve, lies below T·pure, and above the exact ε of T uses of the worst pair.
    for t in [2usize, 5, 40] {
        let ts = t.to_string();
        let v = account_mvu(&path, &["--steps", &ts, "--delta", "1e-3"]);
        assert_eq!(v["event"]["count"].as_u64().unwrap(), t as u64);
        assert_eq!(floats(&v["event"]["event"]["epsilons"]), rdp);
        let scaled: Vec<f64> = rdp.iter().map(|r| r * t as f64).collect();
        let by_hand = convert(&orders, &scaled, delta);
        let got = v["epsilon_rdp"].as_f64().unwrap();
        assert!(
            (got - by_hand).abs() <= 1e-12 * by_hand,
            "T={t}: {got} vs {by_hand}"
        );
        let eps = v["epsilon"].as_f64().unwrap();
        assert_eq!(eps, got.min(t as f64 * pure));
        assert!(eps <= t as f64 * pure + 1e-12);
        if t <= 5 {
            let lower = lower_bound_epsilon(&p, t, delta);
            assert!(eps >= lower - 1e-9, "T={t}: {eps} < exact {lower}");
        }
    }
    // δ for ε is consistent with ε for δ.
    let v5 = account_mvu(&path, &words("--steps 5 --delta 1e-3"));
    let e5 = format!("{}", v5["epsilon_rdp"].as_f64().unwrap());
    let d = account_mvu(&path, &["--steps", "5", "--epsilon", &e5]);
    let d5 = d["delta"].as_f64().unwrap();
    assert!(d5 <= delta * (1.0 + 1e-9) && d5 > 0.5 * delta, "{d5}");
    let big = format!("{}", 5.0 * pure);
    let d = account_mvu(&path, &["--steps", "5", "--epsilon", &big]);
    assert_eq!(d["delta"].as_f64().unwrap(), 0.0);
    assert_eq!(d["delta_from"], "pure_composition");
}

#[test]
fn account_mvu_local_sampling_and_vector_bounds() {
    let (_dir, path, _) = design_file(
        "ldp_3_2_s.json",
        "--input-bits 3 --output-bits 2 --epsilon 2",
    );
    let plain = account_mvu(&path, &words("--steps 50 --delta 1e-5"));
    let q = 0.1;
    let sampled = account_mvu(&path, &words("--steps 50 --delta 1e-5 --sampling-rate 0.1"));
    let orders = floats(&plain["event"]["event"]["orders"]);
    let base = floats(&plain["event"]["event"]["epsilons"]);
    let samp = floats(&sampled["event"]["event"]["epsilons"]);
    for ((&a, &e), &s) in orders.iter().zip(&base).zip(&samp) {
        // ln(1 − q + q·e^y)/(α−1), y = (α−1)ε, written as y + ln(q + (1−q)e^{−y}).
        let y = (a - 1.0) * e;
        let want = (y + (q + (1.0 - q) * (-y).exp()).ln()) / (a - 1.0);
        assert!(
            (s - want).abs() <= 1e-10 * want.max(1e-12),
            "α={a}: {s} vs {want}"
        );
        assert!(s <= e);
    }
    assert!(sampled["sampling"].as_str().unwrap().contains("local"));
    let (es, ep) = (
        sampled["epsilon"].as_f64().unwrap(),
        plain["epsilon"].as_f64().unwrap(),
    );
    assert!(es < ep, "{es} vs {ep}");

    // Vector mechanism from an ℓ1 metric design: per order the smallest of the LP relaxation,
    // the greedy bound and the pure-DP RDP; the pure ε of the vector is recomputed here.
    let (_vdir, vpath, vp) = design_file(
        "metric_3_2.json",
        "--input-bits 3 --output-bits 2 --epsilon 4 --metric-dp l1",
    );
    let v = account_mvu(
        &vpath,
        &words("--steps 3 --delta 1e-5 --dim 4 --sensitivity 0.5"),
    );
    // Exact metric ε: max ln(P_ij/P_kj)/(|i−k|/7).
    let mut em = 0.0f64;
    for (i, r) in vp.iter().enumerate() {
        for (k, s) in vp.iter().enumerate() {
            if i != k {
                for (x, y) in r.iter().zip(s) {
                    em = em.max((x.ln() - y.ln()) / (i.abs_diff(k) as f64 / 7.0));
                }
            }
        }
    }
    // Budget (7·0.5)¹ = 3.5: at most 3 coordinates change, each by at most the ε-LDP.
    let pure = (em * 0.5).min(3.0 * ldp_epsilon(&vp));
    let got = v["pure_epsilon_per_step"].as_f64().unwrap();
    assert!((got - pure).abs() < 1e-9, "{got} vs {pure}");
    assert_eq!(v["bound"]["vector"]["p"], 1);
    let wins = &v["bound"]["orders_per_bound"];
    let total: u64 = ["lp_relaxation", "greedy", "pure_dp"]
        .iter()
        .map(|k| wins[k].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize, orders.len());
    // The LP relaxation is never above the greedy bound (beyond rounding), so greedy never wins.
    assert_eq!(wins["greedy"].as_u64().unwrap(), 0);
    assert!(wins["lp_relaxation"].as_u64().unwrap() > 0);
    let vc = floats(&v["event"]["event"]["epsilons"]);
    for (&a, &r) in orders.iter().zip(&vc) {
        assert!(r <= privfed_accounting::rdp::pure_dp_rdp(pure, a) * (1.0 + 1e-12) + 1e-15);
    }
    // The scalar curve of the same design is the d = 1, full-range special case.
    let s1 = account_mvu(
        &vpath,
        &words("--steps 1 --delta 1e-5 --dim 1 --sensitivity 1"),
    );
    let sc = account_mvu(&vpath, &words("--steps 1 --delta 1e-5"));
    let (a1, b1) = (
        floats(&s1["event"]["event"]["epsilons"]),
        floats(&sc["event"]["event"]["epsilons"]),
    );
    for (x, y) in a1.iter().zip(&b1) {
        assert!(x <= &(y * (1.0 + 1e-12) + 1e-15), "{x} > {y}");
    }
}

#[test]
fn account_mvu_bad_design_files_fail_naming_the_file() {
    let (_dir, path, _) = design_file("ldp_2_2.json", "--input-bits 2 --output-bits 2 --epsilon 1");
    let base = |file: &str| -> Vec<String> {
        [
            "account",
            "--mechanism",
            "mvu",
            "--design",
            file,
            "--steps",
            "3",
            "--delta",
            "1e-5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let run = |file: &str, needle: &str| {
        let a = base(file);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        fails_with(&a, needle);
    };
    // Missing.
    let dir = TempDir::new("cli-account");
    let missing = dir.path().join("does-not-exist.json");
    run(missing.to_str().unwrap(), missing.to_str().unwrap());
    // Not JSON.
    let bad = dir.path().join("not-json.json");
    std::fs::write(&bad, "this is not a design").unwrap();
    run(bad.to_str().unwrap(), bad.to_str().unwrap());
    // Valid JSON, tampered: a probability moved (row no longer sums to 1), then the ε lowered
    // below what the rows need, then the alphabet biased. Each names the file and the reason.
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let tampered = dir.path().join("tampered.json");
    let tp = tampered.to_str().unwrap();
    for (field, needle) in [("p", "1a"), ("epsilon", "1c"), ("alphabet", "1d")] {
        let mut v = good.clone();
        match field {
            "p" => v["p"][0][0] = serde_json::json!(v["p"][0][0].as_f64().unwrap() + 0.01),
            "epsilon" => v["epsilon"] = serde_json::json!(0.5),
            _ => v["alphabet"][0] = serde_json::json!(v["alphabet"][0].as_f64().unwrap() + 0.01),
        }
        std::fs::write(&tampered, serde_json::to_string(&v).unwrap()).unwrap();
        run(tp, tp);
        run(tp, needle);
    }
    // Usage errors.
    let base = words("account --mechanism mvu --delta 1e-5");
    for (extra, needle) in [
        (vec!["--steps", "3"], "--design"),
        (
            vec!["--design", &path, "--accountant", "pld", "--steps", "3"],
            "--accountant rdp",
        ),
        (
            vec!["--design", &path, "--dim", "3", "--steps", "3"],
            "--sensitivity",
        ),
        (vec!["--design", &path, "--steps", "0"], "steps"),
    ] {
        fails_with(&[&base[..], &extra].concat(), needle);
    }
    fails_with(
        &words("account --noise-multiplier 1 --steps 3 --delta 1e-5"),
        "--accountant",
    );
}
