//! `privfed audit`: an empirical privacy audit of a mechanism from the outside
//! ([`privfed_audit::randomizer`]; results and commands in docs/AUDIT.md).
//!
//! The mechanism is run `--samples` times on each of two worst-case neighbouring inputs (chosen
//! by [`privfed_audit::randomizer::worst_case_pair`], or for `skellam` — the one-dimensional
//! `x + Sk(μ)` with μ calibrated by the PLD accountant — by
//! [`privfed_audit::randomizer::skellam_pair`], and for `ddg` — the one-dimensional sum of
//! `--clients` discrete Gaussian shares, calibrated by the RDP accountant — by
//! [`privfed_audit::randomizer::ddg_pair`], and for `mvu-vector` — the vector MVU of paper 004
//! Lemma 6, built by [`privfed_sim::mechanism::MechanismSpec::build_mvu_vector`] — by
//! [`privfed_audit::randomizer::mvu_vector_pair`]; the report says which and why), a lower
//! bound on ε is computed at confidence `1 − --alpha`, and the claim (the mechanism's own ε, or
//! `--claim-epsilon`) is flagged as violated when the bound exceeds it (or, for finite outputs,
//! when the histogram's δ̂(ε) exceeds δ by more than its tolerance). Exit status: 0 when the
//! claim stands, 2 on a violation, 1 on an error.

use crate::build::{MechanismArgs, build};
use crate::mvu::MetricArg;
use crate::output::print_report;
use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use privfed_audit::randomizer::{
    Claim, NeighbourPair, Observations, RunReport, Side, ddg_event, ddg_pair, evaluate,
    mvu_vector_pair, sample, skellam_pair, worst_case_pair,
};
use privfed_mechanisms::discrete_gaussian::DiscreteGaussian;
use privfed_mechanisms::mvu::{MAX_VECTOR_PMF_OUTCOMES, MvuVector};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_mechanisms::skellam::Skellam;
use privfed_mechanisms::{LocalRandomizer, MechanismError};
use privfed_sim::mechanism::MechanismKind;
use rand::SeedableRng;
use std::time::Instant;

/// Chunks per side: each has its own generator drawn from the master in order, so a seeded run
/// gives the same samples for every thread count.
const CHUNKS: usize = 64;

/// Arguments of `privfed audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    mech: MechanismArgs,
    /// Samples per input (the mechanism runs 2·N times).
    #[arg(long, default_value_t = 200_000)]
    samples: usize,
    /// The ε to audit, if not the mechanism's own (e.g. a mechanism run at --epsilon 2 against a
    /// claim of 1 must be caught).
    #[arg(long, allow_negative_numbers = true)]
    claim_epsilon: Option<f64>,
    /// Significance: a true claim is flagged with probability at most this (the default 0.01:
    /// at most one false alarm in a hundred runs of an honest mechanism; docs/AUDIT.md).
    #[arg(long, default_value_t = 0.01, allow_negative_numbers = true)]
    alpha: f64,
    /// Seed for a reproducible run (experiments only); without it, seeded from the OS.
    #[arg(long)]
    seed: Option<u64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// skellam, ddg: the integer sensitivity Δ of the query (x = 0 against x' = Δ).
    #[arg(long, default_value_t = 1)]
    sensitivity: u64,
    /// skellam: the variance μ of the noise; ddg: each client's σ² (instead of calibrating it
    /// to --epsilon at --delta).
    #[arg(long, allow_negative_numbers = true)]
    variance: Option<f64>,
    /// ddg: the number of clients whose discrete Gaussian shares are summed.
    #[arg(long, default_value_t = 10)]
    clients: usize,
    /// mvu-vector: the metric of the per-coordinate design and of the input ball (l1: the l1
    /// ball and |x − x'|; l2: the l2 ball and |x − x'|²), as `privfed mvu design --metric-dp`.
    #[arg(long, value_enum, default_value = "l1")]
    metric_dp: MetricArg,
    /// mvu-vector: the bound R ≥ --radius on the dithered vector's lp norm (default: paper 004's
    /// r + d·h/2 for l1, √(r² + d·h²/2) for l2, h the grid spacing); --epsilon is then
    /// ε_metric·(R/r)^p (Lemma 6).
    #[arg(long, allow_negative_numbers = true)]
    dither_bound: Option<f64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// A privatization: the mechanism under audit, writing one output into its buffer.
type Privatize<'a> =
    dyn Fn(&[f64], &mut [f64], &mut ExperimentRng) -> Result<(), MechanismError> + Sync + 'a;

/// Privatizes `n` samples of `side`, split into [`CHUNKS`] chunks over `threads` threads.
fn sample_side(
    privatize: &Privatize<'_>,
    pair: &NeighbourPair,
    side: Side,
    n: usize,
    master: &mut ExperimentRng,
    threads: usize,
    progress: &ProgressBar,
) -> Result<Observations> {
    let sizes: Vec<usize> = (0..CHUNKS)
        .map(|c| n / CHUNKS + usize::from(c < n % CHUNKS))
        .collect();
    let mut rngs: Vec<ExperimentRng> = (0..CHUNKS)
        .map(|_| ExperimentRng::from_rng(&mut *master))
        .collect();
    let per_thread = CHUNKS.div_ceil(threads.clamp(1, CHUNKS));
    let blocks = std::thread::scope(|s| {
        let handles: Vec<_> = rngs
            .chunks_mut(per_thread)
            .zip(sizes.chunks(per_thread))
            .map(|(rs, ns)| {
                s.spawn(move || {
                    rs.iter_mut()
                        .zip(ns)
                        .map(|(rng, &size)| {
                            let mut done = 0u64;
                            let run = |x: &[f64], out: &mut [f64], r: &mut ExperimentRng| {
                                done += 1;
                                if done.is_multiple_of(4096) {
                                    progress.inc(4096);
                                }
                                privatize(x, out, r)
                            };
                            let obs = sample(pair, side, size, run, rng);
                            progress.inc(size as u64 % 4096);
                            obs
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a sampling thread panicked"))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let mut all = Observations::default();
    for r in blocks.into_iter().flatten() {
        all.extend(r?);
    }
    Ok(all)
}

/// The one-dimensional Skellam mechanism `x + Sk(μ)` with integer sensitivity `Δ`: μ from
/// `--variance` or calibrated by the PLD accountant to `--epsilon` at `--delta`; its claim is the
/// PLD accountant's ε at δ. Returns (μ, claimed ε, δ).
fn skellam_claim(args: &AuditArgs) -> Result<(f64, f64, f64)> {
    use privfed_accounting::DpEvent;
    use privfed_accounting::calibrate::{AccountantKind, calibrate_skellam_variance, epsilon_of};
    let Some(delta) = args.mech.delta else {
        bail!("skellam needs --delta (its claim is ε at δ from the PLD accountant)");
    };
    let d = args.sensitivity as f64;
    let mu = match (args.variance, args.mech.epsilon) {
        (Some(_), Some(_)) => {
            bail!(
                "give --epsilon (a target) or --variance, not both (audit a claim with --claim-epsilon)"
            )
        }
        (Some(v), None) => v,
        (None, Some(e)) => {
            calibrate_skellam_variance(AccountantKind::Pld, e, delta, d, d, 1.0, 1)?.parameter
        }
        (None, None) => bail!("skellam needs --epsilon (a target) or --variance"),
    };
    let event = DpEvent::Skellam {
        mu,
        l1_sensitivity: d,
        l2_sensitivity: d,
    };
    Ok((mu, epsilon_of(AccountantKind::Pld, &event, delta)?, delta))
}

/// The one-dimensional distributed discrete Gaussian `x + Σ_{i ≤ n} N_ℤ(0, σ_local²)` with
/// integer sensitivity `Δ`: σ_local² from `--variance` or calibrated by the RDP accountant (the
/// one that accounts DDG) to `--epsilon` at `--delta`, then rounded up to the sampler's grid; its
/// claim is the RDP accountant's ε at δ for the variance used. Returns (sampler, claimed ε, δ).
fn ddg_claim(args: &AuditArgs) -> Result<(DiscreteGaussian, f64, f64)> {
    use privfed_accounting::calibrate::{AccountantKind, calibrate_parameter, epsilon_of};
    let Some(delta) = args.mech.delta else {
        bail!("ddg needs --delta (its claim is ε at δ from the RDP accountant)");
    };
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let (n, d) = (args.clients, args.sensitivity);
    let s2 = match (args.variance, args.mech.epsilon) {
        (Some(_), Some(_)) => {
            bail!(
                "give --epsilon (a target) or --variance, not both (audit a claim with --claim-epsilon)"
            )
        }
        (Some(v), None) => v,
        (None, Some(e)) => {
            // `ddg_event` fails only on a non-positive variance, which the search never tries;
            // the placeholder is rejected by the accountant, as an error.
            calibrate_parameter(AccountantKind::Rdp, e, delta, |s2| {
                ddg_event(n, s2, d).unwrap_or(privfed_accounting::DpEvent::PureDp {
                    epsilon: f64::INFINITY,
                })
            })?
            .parameter
        }
        (None, None) => bail!("ddg needs --epsilon (a target) or --variance"),
    };
    let noise = DiscreteGaussian::new(s2)?;
    let eps = epsilon_of(
        AccountantKind::Rdp,
        &ddg_event(n, noise.sigma2(), d)?,
        delta,
    )?;
    Ok((noise, eps, delta))
}

/// The vector MVU mechanism of `--dim`, `--input-bits`/`--output-bits` (or `--design`),
/// `--metric-dp`, `--radius`, `--dither-bound` at the vector ε `--epsilon`
/// ([`privfed_sim::mechanism::MechanismSpec::build_mvu_vector`]). The audit compares exact laws
/// over all `B_out^d` released vectors, so that count is checked first, naming the options that
/// lower it.
fn mvu_vector(args: &AuditArgs) -> Result<MvuVector> {
    let m = &args.mech;
    let Some(dim) = m.dim else {
        bail!("mvu-vector needs --dim (the vector's dimension)");
    };
    // The pair search of privfed_audit::randomizer::mvu_vector_pair covers at most 33 levels.
    if let Some(bi) = m.input_bits.or((m.design.is_none()).then_some(m.bits))
        && bi > 5
    {
        bail!(
            "mvu-vector: --input-bits {bi} is more than the audit's pair search covers (at most 5 \
             input bits, 32 levels); lower --input-bits (or --bits)"
        );
    }
    let b_out = m.output_bits.unwrap_or(m.bits);
    if m.design.is_none() {
        let outcomes = (0..dim).try_fold(1usize, |acc, _| {
            acc.checked_mul(1usize.checked_shl(b_out)?)
                .filter(|&t| t <= MAX_VECTOR_PMF_OUTCOMES)
        });
        if outcomes.is_none() {
            bail!(
                "mvu-vector: the exact law has (2^{b_out})^{dim} released vectors, more than the \
                 {MAX_VECTOR_PMF_OUTCOMES} the audit enumerates; lower --dim or --output-bits \
                 (or --bits)"
            );
        }
    }
    let Some(_) = m.epsilon else {
        bail!("mvu-vector needs --epsilon (the vector's epsilon-LDP, Lemma 6)");
    };
    let spec = m.spec()?;
    Ok(spec.build_mvu_vector(args.metric_dp.power(), args.dither_bound)?)
}

/// Runs `privfed audit`.
pub fn run(args: &AuditArgs) -> Result<()> {
    if args.samples < 4 {
        bail!("--samples must be at least 4 (half of them choose the test, half bound ε)");
    }
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        bail!("--alpha must be in (0, 1), got {}", args.alpha);
    }
    if let Some(c) = args.claim_epsilon
        && !(c.is_finite() && c >= 0.0)
    {
        bail!("--claim-epsilon must be finite and non-negative, got {c}");
    }
    if args.sensitivity == 0 {
        bail!("--sensitivity must be at least 1");
    }
    // The mechanism under audit: a local randomizer, or the 1-D Skellam or DDG mechanism.
    let mut skellam_mu = None;
    let mut ddg_variance = None;
    let mut mvu = None;
    let (name, pair, own_epsilon, delta, privatize): (
        String,
        NeighbourPair,
        f64,
        f64,
        Box<Privatize>,
    ) = if args.mech.mechanism == MechanismKind::Skellam {
        let (mu, eps, delta) = skellam_claim(args)?;
        let noise = Skellam::new(mu)?;
        let pair = skellam_pair(mu, args.sensitivity)?;
        let run = move |x: &[f64], out: &mut [f64], r: &mut ExperimentRng| {
            out[0] = x[0] + noise.sample(r) as f64;
            Ok(())
        };
        skellam_mu = Some(mu);
        ("skellam".to_string(), pair, eps, delta, Box::new(run))
    } else if args.mech.mechanism == MechanismKind::Ddg {
        let (noise, eps, delta) = ddg_claim(args)?;
        let pair = ddg_pair(args.clients, noise.sigma2(), args.sensitivity)?;
        let clients = args.clients;
        let run = move |x: &[f64], out: &mut [f64], r: &mut ExperimentRng| {
            out[0] = x[0] + (0..clients).map(|_| noise.sample(r)).sum::<i64>() as f64;
            Ok(())
        };
        ddg_variance = Some(noise.sigma2());
        ("ddg".to_string(), pair, eps, delta, Box::new(run))
    } else if args.mech.mechanism == MechanismKind::MvuVector {
        let mech = mvu_vector(args)?;
        let pair = mvu_vector_pair(&mech)?;
        mvu = Some((mech.dither_bound(), mech.scalar().metric_epsilon()));
        let eps = mech.epsilon();
        let run = move |x: &[f64], out: &mut [f64], r: &mut ExperimentRng| {
            mech.privatize_into(x, out, r).map(|_| ())
        };
        ("mvu-vector".to_string(), pair, eps, 0.0, Box::new(run))
    } else {
        let mech = build(&args.mech)?;
        let pair = worst_case_pair(&mech)?;
        let g = mech.guarantee();
        let name = mech.name().to_string();
        let run =
            move |x: &[f64], out: &mut [f64], r: &mut ExperimentRng| mech.privatize_into(x, out, r);
        (name, pair, g.epsilon(), g.delta(), Box::new(run))
    };
    let claim = Claim {
        epsilon: args.claim_epsilon.unwrap_or(own_epsilon),
        delta,
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let mut master: ExperimentRng = match args.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng(),
    };
    let progress = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(2 * args.samples as u64)
    };
    progress.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} privatizations ({per_sec}, eta {eta})",
        )
        .context("progress template")?
        .progress_chars("=> "),
    );
    let start = Instant::now();
    let ox = sample_side(
        &*privatize,
        &pair,
        Side::X,
        args.samples,
        &mut master,
        threads,
        &progress,
    )?;
    let oxp = sample_side(
        &*privatize,
        &pair,
        Side::XPrime,
        args.samples,
        &mut master,
        threads,
        &progress,
    )?;
    let sampled = start.elapsed().as_secs_f64();
    progress.finish_and_clear();
    let report = evaluate(&pair, &ox, &oxp, claim, args.alpha)?;
    let seconds = start.elapsed().as_secs_f64();
    let mut out = RunReport::new(name.clone(), own_epsilon, &pair, report);
    out.seconds = seconds;
    out.samples_per_second = 2.0 * args.samples as f64 / sampled;
    out.threads = threads;
    out.skellam_variance = skellam_mu;
    out.ddg_local_variance = ddg_variance;
    if ddg_variance.is_some() {
        out.clients = Some(args.clients);
    }
    if let Some((bound, metric)) = mvu {
        out.dither_bound = Some(bound);
        out.metric_epsilon = Some(metric);
    }
    if skellam_mu.is_some() || ddg_variance.is_some() {
        out.sensitivity = Some(args.sensitivity);
    }
    print_report(&serde_json::to_value(&out)?, args.json)?;
    if out.violation {
        eprintln!(
            "privacy violation: the claim ε = {} (δ = {}) of {} is rejected at confidence {} \
             (ε lower bound {:.4})",
            out.claimed_epsilon, out.claimed_delta, name, out.confidence, out.epsilon_lower_bound
        );
        std::process::exit(2);
    }
    Ok(())
}
