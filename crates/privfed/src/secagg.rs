//! `privfed secagg`: secure-aggregation rounds ([`privfed_sim::secagg`]) and SecAgg+ plans
//! ([`privfed_secagg::plan_secagg_plus`]).

use anyhow::{Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use privfed_secagg::local::SecAggThreat;
use privfed_secagg::{ClientPolicy, Stage};
use privfed_sim::secagg::{
    Attack, Collusion, DEFAULT_CORRUPT_FRACTION, DEFAULT_GRINDING_BITS, GraphChoice,
    SecAggSimConfig, SecAggSimReport, simulate_attack, simulate_collusion, simulate_in_process,
    simulate_over_http,
};
use std::sync::Arc;

use crate::output::print_report;

/// `privfed secagg …`.
#[derive(Debug, Subcommand)]
pub enum SecAggCommand {
    /// Run one secure-aggregation round with N real clients (X25519, Shamir, ChaCha20 masks) and
    /// report whether the unmasked sum is exact, the time per stage and the bytes per client.
    Simulate(SimulateArgs),
    /// Choose SecAgg+'s degree and threshold for a cohort (Bell et al. 2020).
    Plan(PlanArgs),
    /// Measure mask expansion against the raw ChaCha20 keystream, and the protocol's primitives.
    Bench(BenchArgs),
}

/// Arguments of `privfed secagg bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Vector length.
    #[arg(long, default_value_t = 1_000_000)]
    dim: usize,
    /// Repetitions (the minimum is reported).
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// When the dropped clients go silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DropStage {
    /// Before advertising keys (they never join).
    Advertise,
    /// After advertising, before sharing keys.
    Share,
    /// After sharing keys, before sending masked input: their masks must be recovered.
    Masked,
    /// After sending masked input, before signing U3 (active mode; honest-but-curious rounds
    /// have no consistency check, so this is before unmasking there).
    Consistency,
    /// After sending masked input (and, in the active mode, signing U3), before unmasking.
    Unmask,
    /// Each at a random stage.
    Random,
}

/// Which server the clients defend against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThreatModelArg {
    /// The server reads everything but relays keys and reports dropouts truthfully.
    HonestButCurious,
    /// The server may lie about dropouts and forward any subset of messages: device-signed
    /// keys, a roster of enrolled devices, a consistency round.
    Active,
}

impl ThreatModelArg {
    /// The simulator's choice (the active mode with a roster).
    pub fn sim(self) -> SecAggThreat {
        match self {
            ThreatModelArg::HonestButCurious => SecAggThreat::HonestButCurious,
            ThreatModelArg::Active => SecAggThreat::Active,
        }
    }
}

/// The attacker `--adversary` plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AdversaryArg {
    /// A server that lies about dropouts (the neighbour-share attack).
    LyingServer,
    /// A server that relays its own keys as those of the target's neighbours.
    KeySubstitution,
    /// `--colluders K` of the target's neighbours help a lying server: they hand it the shares
    /// sealed to them and sign any survivor set, and the server splits the target's
    /// neighbours between "it survived" and "it dropped" (the worst placement of K colluders,
    /// searched). The round is the one the threat model sizes (or --degree/--threshold).
    Colluders,
    /// `--colluders K` clients fixed before the round collude, and the server re-tries the
    /// placement `--grinding-attempts N` times (re-drawn keys; in the honest-but-curious mode,
    /// session ids) to put them around the target, then plays the colluders' attack there.
    Grinding,
}

/// The graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphArg {
    /// Complete up to 128 clients, SecAgg+ above.
    Auto,
    /// Every client with every other (Bonawitz et al. 2017).
    Complete,
    /// A random Harary graph planned for the dropout rate (SecAgg+).
    Plus,
}

/// Arguments of `privfed secagg simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Number of clients N.
    #[arg(long)]
    clients: u32,
    /// Vector length D.
    #[arg(long)]
    dim: usize,
    /// Bits B: inputs and sums are in Z_{2^B}, B in 1..=64.
    #[arg(long, default_value_t = 32)]
    bits: u32,
    /// Fraction of clients that drop out (exactly round(F·N) of them, chosen at random).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    dropout: f64,
    /// When the dropped clients go silent.
    #[arg(long, value_enum, default_value_t = DropStage::Masked)]
    dropout_stage: DropStage,
    /// Communication graph and threshold.
    #[arg(long, value_enum, default_value_t = GraphArg::Auto)]
    graph: GraphArg,
    /// An explicit Harary graph of this (even) degree instead of --graph; needs --threshold.
    #[arg(long, requires = "threshold")]
    degree: Option<u32>,
    /// Threshold of the explicit --degree graph (more than half the degree).
    #[arg(long, requires = "degree")]
    threshold: Option<u32>,
    /// Seed of the inputs and the dropout pattern (the protocol's keys always come from the OS).
    #[arg(long)]
    seed: Option<u64>,
    /// Run the round against this server (`privfed serve`), each client a concurrent HTTP
    /// device. Without it (and without --http) the round runs in this process.
    #[arg(long, conflicts_with = "http")]
    server: Option<String>,
    /// Start a server on a loopback port in this process (temporary store) and run the clients
    /// against it over HTTP.
    #[arg(long)]
    http: bool,
    /// Admin token of --server (creating the round needs it).
    #[arg(long, env = "PRIVFED_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// Which server the clients defend against (default `active`: a fresh enrollment authority
    /// enrolls every simulated device, and the round names its roster).
    #[arg(long, value_enum)]
    threat_model: Option<ThreatModelArg>,
    /// Active mode without a roster: any device key is accepted (the server could add Sybils).
    #[arg(long)]
    no_roster: bool,
    #[command(flatten)]
    policy: PolicyArgs,
    /// Instead of an honest round, play this attacker against real clients (in process, no
    /// dropouts) and report whether it recovered the target's input.
    #[arg(long, value_enum, conflicts_with_all = ["server", "http"])]
    adversary: Option<AdversaryArg>,
    /// The client whose input --adversary goes after.
    #[arg(long, default_value_t = 1, requires = "adversary")]
    target: u32,
    /// --adversary colluders|grinding: how many clients collude with the server.
    #[arg(long, requires = "adversary")]
    colluders: Option<u32>,
    /// --adversary grinding: how many placements the server tries.
    #[arg(long, default_value_t = 128, requires = "adversary")]
    grinding_attempts: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// The clients' policy on the rounds they join (`privfed_secagg::policy::ClientPolicy`): the
/// options of every command that runs secure aggregation (`secagg simulate`, `dme --secagg`,
/// `fl train`), parsed here once.
#[derive(Debug, Clone, Default, Args)]
pub struct PolicyArgs {
    /// The smallest cohort the clients agree to join (their policy; default 3).
    #[arg(long)]
    min_clients: Option<u32>,
    /// The smallest threshold t the clients accept (default 2).
    #[arg(long)]
    min_threshold: Option<u32>,
    /// The clients require t to exceed this fraction of their neighbours, in [0, 1) (default
    /// 0.5: a minority of neighbours cannot reconstruct a secret).
    #[arg(long)]
    min_threshold_fraction: Option<f64>,
    /// The smallest SecAgg+ degree the clients accept (default 2, capped at n − 1).
    #[arg(long)]
    min_degree: Option<u32>,
    /// Turn every rule of the clients' policy off (experiments only: the clients then join
    /// rounds a server could break by construction, e.g. t = 1).
    #[arg(long, conflicts_with_all = ["min_clients", "min_threshold", "min_threshold_fraction", "min_degree"])]
    permissive_policy: bool,
}

impl PolicyArgs {
    /// Whether any policy option was given.
    pub fn is_set(&self) -> bool {
        self.permissive_policy
            || self.min_clients.is_some()
            || self.min_threshold.is_some()
            || self.min_threshold_fraction.is_some()
            || self.min_degree.is_some()
    }

    /// `base` with each rule overridden by its option, or every rule off with
    /// `--permissive-policy`; a malformed policy is named by its option.
    pub fn apply(&self, base: ClientPolicy) -> Result<ClientPolicy> {
        if self.permissive_policy {
            return Ok(ClientPolicy::permissive());
        }
        let mut p = base;
        if let Some(n) = self.min_clients {
            p.min_clients = n;
        }
        if let Some(t) = self.min_threshold {
            p.min_threshold = t;
        }
        if let Some(f) = self.min_threshold_fraction {
            p.min_threshold_fraction = f;
        }
        if let Some(k) = self.min_degree {
            p.min_degree = k;
        }
        p.validate()
            .map_err(|e| anyhow::anyhow!("--min-threshold-fraction: {e}"))?;
        Ok(p)
    }

    /// The library's defaults with the options applied ([`PolicyArgs::apply`]).
    pub fn policy(&self) -> Result<ClientPolicy> {
        self.apply(ClientPolicy::default())
    }
}

/// Arguments of `privfed secagg plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Number of clients N.
    #[arg(long)]
    clients: u32,
    /// Fraction of clients expected to drop out.
    #[arg(long, allow_negative_numbers = true)]
    dropout: f64,
    /// Fraction of clients that may collude with the server.
    #[arg(long, default_value_t = DEFAULT_CORRUPT_FRACTION, allow_negative_numbers = true)]
    corrupt: f64,
    /// Security target: a lying server learns an input with probability ≤ 2^-S.
    #[arg(long, default_value_t = 40.0)]
    security_bits: f64,
    /// Correctness target: the round fails with probability ≤ 2^-C.
    #[arg(long, default_value_t = 20.0)]
    correctness_bits: f64,
    /// The threat model to plan for (the active mode adds the honest survivors' connectivity
    /// and a grinding server).
    #[arg(long, value_enum, default_value_t = ThreatModelArg::Active)]
    threat_model: ThreatModelArg,
    /// Active mode: log2 of the graph placements a grinding server may try.
    #[arg(long, default_value_t = DEFAULT_GRINDING_BITS)]
    grinding_bits: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `privfed secagg …`.
pub fn run(cmd: &SecAggCommand) -> Result<()> {
    match cmd {
        SecAggCommand::Simulate(args) => simulate(args),
        SecAggCommand::Bench(args) => bench(args),
        SecAggCommand::Plan(args) => {
            let plan = match args.threat_model {
                ThreatModelArg::HonestButCurious => privfed_secagg::plan_secagg_plus(
                    args.clients,
                    args.dropout,
                    args.corrupt,
                    args.security_bits,
                    args.correctness_bits,
                )?,
                ThreatModelArg::Active => privfed_secagg::plan_active(
                    args.clients,
                    args.dropout,
                    args.corrupt,
                    args.security_bits,
                    args.correctness_bits,
                    args.grinding_bits,
                )?,
            };
            print_report(&serde_json::to_value(plan)?, args.json)?;
            Ok(())
        }
    }
}

fn simulate(args: &SimulateArgs) -> Result<()> {
    if args.dim == 0 {
        bail!("--dim must be at least 1");
    }
    let cfg = SecAggSimConfig {
        clients: args.clients,
        dim: args.dim,
        bits: args.bits,
        dropout: args.dropout,
        dropout_stage: match args.dropout_stage {
            DropStage::Advertise => Some(Stage::AdvertiseKeys),
            DropStage::Share => Some(Stage::ShareKeys),
            DropStage::Masked => Some(Stage::MaskedInput),
            DropStage::Consistency => Some(Stage::ConsistencyCheck),
            DropStage::Unmask => Some(Stage::Unmasking),
            DropStage::Random => None,
        },
        graph: match (args.degree, args.threshold, args.graph) {
            (Some(degree), Some(threshold), _) => GraphChoice::Harary { degree, threshold },
            (_, _, GraphArg::Auto) => GraphChoice::Auto,
            (_, _, GraphArg::Complete) => GraphChoice::Complete,
            (_, _, GraphArg::Plus) => GraphChoice::Plus,
        },
        seed: args.seed,
        threat: threat(args)?,
        policy: args.policy.policy()?,
    };
    if let Some(adversary) = args.adversary {
        let colluders = || -> Result<u32> {
            args.colluders.ok_or_else(|| {
                anyhow::anyhow!("--adversary colluders|grinding needs --colluders K")
            })
        };
        if args.colluders.is_some()
            && matches!(
                adversary,
                AdversaryArg::LyingServer | AdversaryArg::KeySubstitution
            )
        {
            bail!("--colluders applies to --adversary colluders|grinding");
        }
        let report = match adversary {
            AdversaryArg::LyingServer => {
                simulate_attack(&cfg, Attack::NeighbourShare, args.target)?
            }
            AdversaryArg::KeySubstitution => {
                simulate_attack(&cfg, Attack::KeySubstitution, args.target)?
            }
            AdversaryArg::Colluders => simulate_collusion(
                &cfg,
                Collusion::WorstPlacement {
                    colluders: colluders()?,
                },
                args.target,
            )?,
            AdversaryArg::Grinding => simulate_collusion(
                &cfg,
                Collusion::Grinding {
                    colluders: colluders()?,
                    attempts: args.grinding_attempts,
                },
                args.target,
            )?,
        };
        if !args.quiet {
            eprintln!(
                "{} against a {} round: the input of client {} was {}",
                report.adversary,
                report.threat_model,
                report.target,
                if report.attack_recovered_input {
                    "RECOVERED"
                } else {
                    "not recovered"
                }
            );
        }
        print_report(&serde_json::to_value(&report)?, args.json)?;
        return Ok(());
    }
    let quiet = args.quiet;
    let progress = move |stage: Stage| {
        if !quiet {
            eprintln!("stage {} done", stage.name());
        }
    };
    let report = if let Some(url) = &args.server {
        let Some(token) = &args.admin_token else {
            bail!("--server needs --admin-token (or PRIVFED_ADMIN_TOKEN) to create the round");
        };
        runtime()?.block_on(simulate_over_http(&cfg, url, token, &progress))?
    } else if args.http {
        runtime()?.block_on(loopback(&cfg, &progress))?
    } else {
        simulate_in_process(&cfg, &progress)?
    };
    print_report(&serde_json::to_value(&report)?, args.json)?;
    if !report.exact {
        bail!("the unmasked sum differs from the plain sum of the survivors' inputs");
    }
    Ok(())
}

/// The threat model of `simulate`: as asked, `active` by default.
fn threat(args: &SimulateArgs) -> Result<SecAggThreat> {
    let remote = args.server.is_some() || args.http;
    let chosen = args.threat_model.unwrap_or(ThreatModelArg::Active);
    if args.no_roster && chosen != ThreatModelArg::Active {
        bail!("--no-roster applies to --threat-model active only");
    }
    if remote && args.no_roster {
        bail!(
            "the HTTP coordinator's active rounds need a roster (the devices' credential to \
             join): drop --no-roster"
        );
    }
    Ok(match chosen {
        ThreatModelArg::Active if args.no_roster => SecAggThreat::ActiveWithoutRoster,
        other => other.sim(),
    })
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// A server on a loopback port with a temporary store, the round run against it over HTTP.
async fn loopback(
    cfg: &SecAggSimConfig,
    progress: &(dyn Fn(Stage) + Sync),
) -> Result<SecAggSimReport> {
    use privfed_server::secagg::{Coordinator, EmbeddedRoundStore};
    use privfed_server::{AppState, EmbeddedStore};
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let dir = std::env::temp_dir().join(format!(
        "privfed-secagg-{}-{}",
        std::process::id(),
        hex(&privfed_sim::secagg::fresh_session_id()[..4])
    ));
    let token = hex(&privfed_sim::secagg::fresh_session_id());
    let result = async {
        let mut state = AppState::new(EmbeddedStore::create(&dir)?, token.clone());
        state.secagg = Some(
            Coordinator::open(Arc::new(EmbeddedRoundStore::open(&dir)?), token.clone()).await?,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(privfed_server::serve(listener, Arc::new(state), async {
            let _ = stopped.await;
        }));
        let report = simulate_over_http(cfg, &url, &token, progress).await;
        let _ = stop.send(());
        let _ = server.await;
        Ok::<_, anyhow::Error>(report?)
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The fastest of `reps` runs of `f`, in seconds.
fn fastest(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// The cost of expanding one pairwise mask of `bits`-bit words (`privfed secagg bench`).
#[derive(serde::Serialize)]
struct MaskRow {
    /// Word width in bits.
    bits: u32,
    /// The raw AES-CTR keystream for the mask's bytes, milliseconds.
    keystream_ms: f64,
    /// Expanding and adding the mask, milliseconds.
    mask_ms: f64,
    /// `mask_ms` per coordinate, nanoseconds.
    mask_ns_per_coordinate: f64,
    /// Keystream throughput, GB/s.
    keystream_gb_per_s: f64,
    /// `keystream_ms / mask_ms`.
    fraction_of_keystream_speed: f64,
}

/// What `privfed secagg bench` prints (one thread).
#[derive(serde::Serialize)]
struct BenchReport {
    /// The vector's dimension.
    dim: usize,
    /// One row per word width.
    mask_expansion: Vec<MaskRow>,
    /// One X25519 agreement and HKDF, microseconds.
    x25519_hkdf_us: f64,
    /// Shamir split of a seed to 100 points at threshold 51, microseconds.
    shamir_split_100_points_t51_us: f64,
    /// Shamir combine of 100 shares at threshold 51, microseconds.
    shamir_combine_100_shares_t51_us: f64,
    /// Threads used.
    threads: usize,
}

fn bench(args: &BenchArgs) -> Result<()> {
    use privfed_secagg::mask::{Sign, apply_mask, keystream_sink};
    use std::hint::black_box;
    if args.dim == 0 {
        bail!("--dim must be at least 1");
    }
    let d = args.dim;
    let seed = privfed_sim::secagg::fresh_session_id();
    let mut rows = Vec::new();
    for bits in [16u32, 32, 62] {
        let word = if bits <= 32 { 4 } else { 8 };
        let raw = fastest(args.reps, || {
            black_box(keystream_sink(&seed, d * word));
        });
        let mut acc = vec![0u64; d];
        let expand = fastest(args.reps, || {
            apply_mask(black_box(&mut acc), &seed, bits, Sign::Add);
        });
        rows.push(MaskRow {
            bits,
            keystream_ms: raw * 1e3,
            mask_ms: expand * 1e3,
            mask_ns_per_coordinate: expand * 1e9 / d as f64,
            keystream_gb_per_s: (d * word) as f64 / raw / 1e9,
            fraction_of_keystream_speed: raw / expand,
        });
    }
    // The per-peer primitives: X25519 agreement + HKDF, Shamir split to 100 points at t = 51.
    let mut rng = rand::rng();
    let a = x25519_dalek::StaticSecret::random_from_rng(&mut rng);
    let b = x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::random_from_rng(&mut rng));
    let agree = fastest(args.reps, || {
        for _ in 0..100 {
            black_box(privfed_secagg::crypto::pair_mask_seed(&a, b.as_bytes(), &seed, 1, 2).ok());
        }
    }) / 100.0;
    let xs: Vec<u32> = (1..=100).collect();
    let split = fastest(args.reps, || {
        black_box(privfed_secagg::shamir::split(&seed, 51, &xs, &mut rng).ok());
    });
    let shares = privfed_secagg::shamir::split(&seed, 51, &xs, &mut rng)?;
    let combine = fastest(args.reps, || {
        black_box(privfed_secagg::shamir::combine(&shares, 51).ok());
    });
    let report = BenchReport {
        dim: d,
        mask_expansion: rows,
        x25519_hkdf_us: agree * 1e6,
        shamir_split_100_points_t51_us: split * 1e6,
        shamir_combine_100_shares_t51_us: combine * 1e6,
        threads: 1,
    };
    print_report(&serde_json::to_value(report)?, args.json)?;
    Ok(())
}
