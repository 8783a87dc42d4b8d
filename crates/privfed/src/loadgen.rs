//! `privfed loadgen`: simulated devices against a running server (draw, noisy local step, post).

use clap::Args;
use privfed_client::loadgen::{LoadgenConfig, run as run_load};
use std::time::Duration;

/// Arguments of `privfed loadgen`.
#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// Base URL of the server, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub server: String,
    /// Model to load.
    #[arg(long, default_value = "")]
    pub model: String,
    /// Concurrent devices.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Warm-up seconds (not measured).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Send and receive JSON instead of raw little-endian f32.
    #[arg(long)]
    pub json_wire: bool,
    /// Load the server's ceiling routes /bench/{DIM} (serve --bench-routes) instead of a model.
    #[arg(long, value_name = "DIM")]
    pub ceiling: Option<usize>,
    /// Post the drawn weights back without the local step.
    #[arg(long)]
    pub skip_local_step: bool,
    /// Learning rate γ of the local step.
    #[arg(long, default_value_t = 0.005)]
    pub learning_rate: f64,
    /// ε of the Laplace noise (default ln 32).
    #[arg(long, default_value_t = 32f64.ln())]
    pub epsilon: f64,
    /// Examples per local step.
    #[arg(long, default_value_t = 10)]
    pub examples_per_client: usize,
    /// Runtime worker threads of the load generator.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Seed (OS entropy otherwise).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn secs(name: &str, s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| anyhow::anyhow!("--{name} must be ≥ 0 and finite"))
}

/// Runs the load and prints the report.
pub fn run(args: &LoadgenArgs) -> anyhow::Result<()> {
    if args.ceiling.is_none() && args.model.is_empty() {
        anyhow::bail!("--model is required (or --ceiling DIM)");
    }
    let mut cfg = LoadgenConfig::new(
        &args.server,
        &args.model,
        args.concurrency,
        secs("duration", args.duration)?,
    );
    cfg.warmup = secs("warmup", args.warmup)?;
    cfg.json_wire = args.json_wire;
    cfg.ceiling_dim = args.ceiling;
    cfg.skip_local_step = args.skip_local_step;
    cfg.learning_rate = args.learning_rate;
    cfg.epsilon = args.epsilon;
    cfg.examples_per_client = args.examples_per_client;
    cfg.seed = args.seed;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    let report = rt.block_on(run_load(&cfg))?;
    if args.json {
        crate::output::emit(&serde_json::to_string_pretty(&report)?)?;
    } else {
        crate::output::emit(&format!(
            "{} {} dim={} C={}: {:.0} updates/s ({} updates in {:.1} s), p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, rejected {}, errors {}",
            report.target,
            report.wire,
            report.dim,
            report.concurrency,
            report.updates_per_second,
            report.updates,
            report.duration_s,
            report.p50_ms,
            report.p99_ms,
            report.p999_ms,
            report.rejected,
            report.errors
        ))?;
    }
    Ok(())
}
