//! What the update guard costs honest clients and what it leaves an attacker with draw access
//! (the numbers in `docs/SERVER_THREAT_MODEL.md`).
//!
//! `cargo run --release -p privfed-ddml --example poisoning` (about two minutes of CPU, one thread
//! per setting: about a minute on an idle 2-core machine).
//!
//! In-process Draw-and-Discard (k = 20 instances) of a logistic GLM with 387 weights on synthetic
//! data; honest clients take one clipped gradient step on 10 examples plus noise (paper 003
//! Alg. 1) in two settings: Laplace ε = ln 32 and Gaussian ε = ln 32, δ = 1e-6, both γ = 0.005.
//! Weights travel as `f32`, as over HTTP. Every submission is gated by a defence:
//!
//! * `guard`: [`StepGuard::check`] against the instance the client drew;
//! * `spam 8σ (old)`: the spam filter with the raw spread across instances (before the hardening);
//! * `spam 8σ (capped)`: the spam filter with the spread clamped to `[¼, 2]·init_std`;
//! * `none`.
//!
//! (a) Honest false rejections of the guard over 10^6 honest updates at the default α = 1e-9
//! and 2·10^5 at α = 1e-3. (b) An attacker whose posts are a fraction of all posts pushes the
//! weights in a fixed direction `v = −sign(w*)` (against the true model) with the strongest
//! post each defence accepts: under the guard it draws 2k tickets, keeps the instance furthest
//! along `v` and posts [`StepGuard::strongest_step`] from it (and, for comparison, an attacker
//! that posts from whatever instance it drew); against the spam filters it posts
//! `mean + 7.5·band sd` along `v`; with no defence it posts `f32::MAX` models. Reported: how
//! far the mean moved (ℓ2, ℓ∞) after n poisoned posts, next to the honest drift of the same
//! schedule without the attacker. (c) The accuracy of the mean model before, after the attack
//! and after 20,000 further honest posts.

use privfed_ddml::client::{ClientNoise, ClientStep, PrivacyUnit};
use privfed_ddml::engine::{
    DrawAndDiscard, SpamFilter, Strategy, draw_index, initialize_instances,
};
use privfed_ddml::guard::{GuardSpec, StepGuard};
use privfed_learn::glm::{Example, Glm};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use rand::RngExt;
use std::time::Instant;

const D: usize = 387;
const K: usize = 20;
const GAMMA: f64 = 0.005;
const BATCH: usize = 10;

struct World {
    glm: Glm,
    pool: Vec<Example>,
    test: Vec<Example>,
    direction: Vec<f64>,
}

fn world(rng: &mut ExperimentRng) -> World {
    let normal = |rng: &mut ExperimentRng| rng.sample::<f64, _>(rand_distr::StandardNormal);
    let wstar: Vec<f64> = (0..D)
        .map(|_| 3.0 * normal(rng) / (D as f64).sqrt())
        .collect();
    let example = |rng: &mut ExperimentRng| {
        let x: Vec<f64> = (0..D).map(|_| normal(rng)).collect();
        let z: f64 = x.iter().zip(&wstar).map(|(a, b)| a * b).sum();
        let y = f64::from(rng.random::<f64>() < 1.0 / (1.0 + (-z).exp()));
        Example::new(x, y)
    };
    let pool = (0..20_000).map(|_| example(rng)).collect();
    let test = (0..5_000).map(|_| example(rng)).collect();
    let direction = wstar.iter().map(|w| -w.signum()).collect();
    World {
        glm: Glm::logistic(D).expect("valid"),
        pool,
        test,
        direction,
    }
}

fn to_f32(w: &[f64]) -> Vec<f32> {
    w.iter().map(|x| *x as f32).collect()
}

fn honest(step: &ClientStep, w: &World, base: &[f64], rng: &mut ExperimentRng) -> Vec<f32> {
    let start = rng.random_range(0..w.pool.len() - BATCH);
    let out = step
        .apply(&w.glm, base, &w.pool[start..start + BATCH], rng)
        .expect("valid");
    to_f32(&out)
}

#[derive(Clone)]
enum Defence {
    Guard(StepGuard),
    /// The guard, against an attacker that posts from the instance it happened to draw.
    GuardRandomBase(StepGuard),
    OldSpam(SpamFilter),
    CappedSpam(SpamFilter, f64),
    None,
}

impl Defence {
    fn name(&self) -> &'static str {
        match self {
            Defence::Guard(_) => "guard",
            Defence::GuardRandomBase(_) => "guard, attacker without base choice",
            Defence::OldSpam(_) => "spam 8σ (old)",
            Defence::CappedSpam(..) => "spam 8σ (capped)",
            Defence::None => "none",
        }
    }

    fn admits(&self, s: &DrawAndDiscard, drawn: usize, upd: &[f32]) -> bool {
        if upd.iter().any(|x| !x.is_finite()) {
            return false;
        }
        match self {
            Defence::Guard(g) | Defence::GuardRandomBase(g) => {
                g.check(&to_f32(s.instance(drawn)), upd).is_ok()
            }
            Defence::OldSpam(f) => f.check(s.instance_stats(), upd, 0.0).is_ok(),
            Defence::CappedSpam(f, init_std) => f.check(s.instance_stats(), upd, *init_std).is_ok(),
            Defence::None => true,
        }
    }

    /// The attacker's post and the instance it drew.
    fn attack(
        &self,
        s: &mut DrawAndDiscard,
        v: &[f64],
        rng: &mut ExperimentRng,
    ) -> (usize, Vec<f32>) {
        match self {
            Defence::Guard(g) => {
                let proj =
                    |i: usize| -> f64 { s.instance(i).iter().zip(v).map(|(a, b)| a * b).sum() };
                let mut best = draw_index(K, rng);
                for _ in 1..2 * K {
                    let d = draw_index(K, rng);
                    if proj(d) > proj(best) {
                        best = d;
                    }
                }
                (best, g.strongest_step(&to_f32(s.instance(best)), v))
            }
            Defence::GuardRandomBase(g) => {
                let d = draw_index(K, rng);
                (d, g.strongest_step(&to_f32(s.instance(d)), v))
            }
            Defence::OldSpam(_) | Defence::CappedSpam(..) => {
                let init_std = match self {
                    Defence::CappedSpam(_, i) => *i,
                    _ => 0.0,
                };
                let st = s.instance_stats();
                let upd = (0..D)
                    .map(|j| {
                        let sd = SpamFilter::band_sd(st.variance(j).sqrt(), init_std);
                        (st.mean(j) + v[j] * 7.5 * sd)
                            .clamp(-f64::from(f32::MAX), f64::from(f32::MAX))
                            as f32
                    })
                    .collect();
                (s.draw(rng), upd)
            }
            Defence::None => (s.draw(rng), vec![f32::MAX; D]),
        }
    }
}

/// One post through `def`; returns whether it was admitted.
fn post(
    s: &mut DrawAndDiscard,
    def: &Defence,
    drawn: usize,
    upd: &[f32],
    rng: &mut ExperimentRng,
) -> bool {
    if !def.admits(s, drawn, upd) {
        return false;
    }
    let u: Vec<f64> = upd.iter().map(|x| f64::from(*x)).collect();
    s.submit(drawn, &u, rng).expect("validated");
    true
}

fn honest_round(
    s: &mut DrawAndDiscard,
    def: &Defence,
    step: &ClientStep,
    w: &World,
    rng: &mut ExperimentRng,
) -> bool {
    let d = s.draw(rng);
    let upd = honest(step, w, s.instance(d), rng);
    post(s, def, d, &upd, rng)
}

fn norms(a: &[f64], b: &[f64]) -> (f64, f64) {
    let (mut l2, mut linf) = (0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let d = x - y;
        l2 += d * d;
        linf = linf.max(d.abs());
    }
    (l2.sqrt(), linf)
}

fn accuracy(w: &World, s: &DrawAndDiscard) -> f64 {
    let m = s.mean_model();
    if m.iter().any(|x| !x.is_finite()) {
        return f64::NAN;
    }
    w.glm.accuracy(&m, &w.test).unwrap_or(f64::NAN)
}

/// One setting's report (tables in Markdown).
fn run_setting(name: &str, noise: ClientNoise, w: &World, seed: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut rng = seeded_rng_for_experiments(seed);
    let step = ClientStep::new(GAMMA, noise, PrivacyUnit::Feature, D).expect("valid");
    let spec = GuardSpec::new(GAMMA, noise);
    let guard = StepGuard::new(&spec, D).expect("valid");
    let init_std = (0.5 * K as f64 * step.noise_variance()).sqrt();
    let _ = writeln!(out, "## {name}\n");
    let _ = writeln!(
        out,
        "noise scale s = {:.5}, init_std = {init_std:.5}; guard (α = 1e-9): C = γ + t·s = {:.5} (t = {:.2}), N = {:.4} ({:?}), A = {}",
        step.noise_scale(),
        guard.coordinate_bound(),
        guard.coordinate_multiplier(),
        guard.norm_bound(),
        guard.norm(),
        guard.max_abs_weight()
    );
    // Pre-train with honest traffic.
    let inst = initialize_instances(&vec![0.0; D], K, step.noise_variance(), &mut rng)
        .expect("valid")
        .into_iter()
        .map(|i| i.into_iter().map(|x| f64::from(x as f32)).collect())
        .collect();
    let mut base = DrawAndDiscard::new(Strategy::DrawAndDiscard, inst, None).expect("valid");
    let acc0 = accuracy(w, &base);
    let open = Defence::Guard(guard.clone());
    for _ in 0..PRETRAIN {
        honest_round(&mut base, &open, &step, w, &mut rng);
    }
    let _ = writeln!(
        out,
        "pre-training: {PRETRAIN} honest posts, accuracy {acc0:.3} → {:.3}\n",
        accuracy(w, &base)
    );

    // (a) Honest false rejections.
    let _ = writeln!(out, "### (a) honest false rejections of the guard\n");
    let _ = writeln!(
        out,
        "| α | honest posts | rejected | rate |\n|---|---|---|---|"
    );
    for (alpha, n) in [(1e-9, 1_000_000u64), (1e-3, 200_000)] {
        let mut sp = spec.clone();
        sp.false_rejection = Some(alpha);
        let def = Defence::Guard(StepGuard::new(&sp, D).expect("valid"));
        let mut s = base.clone();
        let mut rejected = 0u64;
        for _ in 0..n {
            rejected += u64::from(!honest_round(&mut s, &def, &step, w, &mut rng));
        }
        let _ = writeln!(
            out,
            "| {alpha:e} | {n} | {rejected} | {:.2e} |",
            rejected as f64 / n as f64
        );
    }

    // (b) + (c) Attacks.
    let before = base.mean_model();
    let acc_before = accuracy(w, &base);
    let shares: [f64; 3] = [0.01, 0.1, 1.0];
    let max_n = |share: f64| if share == 1.0 { 10_000 } else { 1_000 };
    // The honest drift: the same schedule with every poisoned post replaced by an honest one.
    let mut drift = Vec::new();
    for &share in &shares {
        let per = ((1.0 - share) / share).round() as usize + 1;
        let mut ctrl = base.clone();
        let mut row = Vec::new();
        let mut next = 1;
        for n in 1..=max_n(share) {
            for _ in 0..per {
                honest_round(&mut ctrl, &open, &step, w, &mut rng);
            }
            if n == next || n == max_n(share) {
                row.push(norms(&ctrl.mean_model(), &before));
                next *= 10;
            }
        }
        drift.push(row);
    }
    let _ = writeln!(out, "\n### (b) how far the mean moves, (c) accuracy\n");
    let _ = writeln!(
        out,
        "| defence | poison share | poisoned posts n | admitted | ‖Δmean‖₂ | ‖Δmean‖∞ | honest drift ‖·‖₂ / ‖·‖∞ | accuracy before → after → after {RECOVERY} honest |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    let defences = [
        Defence::Guard(guard.clone()),
        Defence::GuardRandomBase(guard.clone()),
        Defence::CappedSpam(SpamFilter::new(8.0, 0.0).expect("valid"), init_std),
        Defence::OldSpam(SpamFilter::new(8.0, 0.0).expect("valid")),
        Defence::None,
    ];
    for def in &defences {
        for (si, &share) in shares.iter().enumerate() {
            let last = match def {
                Defence::None => 10,
                Defence::OldSpam(_) => 100,
                Defence::GuardRandomBase(_) if share == 1.0 => 1_000,
                _ => max_n(share),
            };
            let mut s = base.clone();
            let honest_per_poison = ((1.0 - share) / share).round() as usize;
            let (mut admitted, mut next, mut row) = (0usize, 1usize, 0usize);
            for n in 1..=last {
                for _ in 0..honest_per_poison {
                    honest_round(&mut s, def, &step, w, &mut rng);
                }
                let (d, upd) = def.attack(&mut s, &w.direction, &mut rng);
                admitted += usize::from(post(&mut s, def, d, &upd, &mut rng));
                if n == next || n == last {
                    let (l2, linf) = norms(&s.mean_model(), &before);
                    let (c2, cinf) = drift[si][row];
                    let acc = if n == last {
                        let after = accuracy(w, &s);
                        for _ in 0..RECOVERY {
                            honest_round(&mut s, def, &step, w, &mut rng);
                        }
                        format!("{acc_before:.3} → {after:.3} → {:.3}", accuracy(w, &s))
                    } else {
                        String::new()
                    };
                    let _ = writeln!(
                        out,
                        "| {} | {:.0}% | {n} | {admitted} | {l2:.3e} | {linf:.3e} | {c2:.3} / {cinf:.3} | {acc} |",
                        def.name(),
                        100.0 * share
                    );
                    next *= 10;
                    row += 1;
                }
            }
        }
    }
    out
}

const PRETRAIN: usize = 100_000;
const RECOVERY: usize = 20_000;

fn main() {
    let t0 = Instant::now();
    let mut rng = seeded_rng_for_experiments(2026);
    let w = world(&mut rng);
    println!(
        "# Poisoning with draw access: k = {K}, d = {D}, γ = {GAMMA}, logistic GLM, {BATCH} examples per client\n"
    );
    let settings = [
        (
            "Laplace ε = ln 32",
            ClientNoise::Laplace {
                epsilon: 32f64.ln(),
            },
            1u64,
        ),
        (
            "Gaussian ε = ln 32, δ = 1e-6",
            ClientNoise::Gaussian {
                epsilon: 32f64.ln(),
                delta: 1e-6,
            },
            2,
        ),
    ];
    // The two settings run in parallel (one thread each).
    let reports: Vec<String> = std::thread::scope(|sc| {
        let handles: Vec<_> = settings
            .iter()
            .map(|(name, noise, seed)| {
                let w = &w;
                sc.spawn(move || run_setting(name, *noise, w, *seed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    for r in reports {
        println!("{r}");
    }
    println!("(total {:.0} s)", t0.elapsed().as_secs_f64());
}
