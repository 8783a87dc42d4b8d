//! Secure-aggregation rounds in one process (`privfed secagg simulate`): real clients and a real
//! server ([`privfed_secagg`]) exchanging encoded messages, timed per stage and per party.
//!
//! Inputs and the dropout pattern come from the seeded experiment generator (reproducible); the
//! protocol's secrets (key pairs, self-mask seeds, share polynomials) always come from the
//! operating system's CSPRNG, so no seed ever determines a key. The masks cancel, so the sum is
//! the same whatever the keys.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
pub use privfed_secagg::adversary::{Attack, GrindingPlacement, StrategyOutcome};
pub use privfed_secagg::local::plain_sum;
use privfed_secagg::local::{Enrollment, LocalRound, Observer, Party};
use privfed_secagg::local::{SecAggThreat, prepare_round};
use privfed_secagg::mask::modulus_mask;
pub use privfed_secagg::plan::{
    DEFAULT_CORRUPT_FRACTION, DEFAULT_GRINDING_BITS, GraphChoice, round_config, round_config_for,
};
use privfed_secagg::{
    Aggregate, ClientId, ClientPolicy, Credentials, GraphSpec, RoundConfig, SecAggError, Stage,
    ThreatModel,
};
use rand::{Rng, RngExt};
use serde::Serialize;

/// A simulated round.
#[derive(Debug, Clone, PartialEq)]
pub struct SecAggSimConfig {
    /// Cohort size n.
    pub clients: u32,
    /// Vector length d.
    pub dim: usize,
    /// The ring Z_{2^bits}.
    pub bits: u32,
    /// Fraction of clients that drop (exactly round(F·n), chosen at random).
    pub dropout: f64,
    /// The stage before which the dropped clients go silent. `None`: each at a uniformly random
    /// stage.
    pub dropout_stage: Option<Stage>,
    /// Graph and threshold.
    pub graph: GraphChoice,
    /// Seed of the inputs and the dropout pattern; `None`: from the OS.
    pub seed: Option<u64>,
    /// Which server the clients defend against.
    pub threat: SecAggThreat,
    /// The rounds the clients agree to join (`privfed_secagg::policy`; default: its defaults).
    pub policy: ClientPolicy,
}

/// Why a simulation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecAggSimError {
    /// A bad option.
    #[error("invalid `{0}`: {1}")]
    Invalid(&'static str, String),
    /// The round aborted (too few survivors): nothing was revealed.
    #[error("the round aborted: {0}")]
    Aborted(String),
    /// From the protocol.
    #[error(transparent)]
    Protocol(#[from] SecAggError),
    /// Talking to the server failed.
    #[error("server: {0}")]
    Http(String),
}

/// The report of `privfed secagg simulate --json`.
#[derive(Debug, Clone, Serialize)]
pub struct SecAggSimReport {
    /// Whether the unmasked sum equals the plain modular sum of the survivors' inputs.
    pub exact: bool,
    /// `honest-but-curious` or `active`.
    pub threat_model: &'static str,
    /// Whether the devices were enrolled on a roster (active mode).
    pub roster: bool,
    /// Clients whose inputs are in the sum.
    pub survivors: usize,
    /// Clients that shared keys but sent no masked input (their masks were recovered).
    pub recovered_dropouts: usize,
    /// Cohort size.
    pub clients: u32,
    /// Threshold t.
    pub threshold: u32,
    /// Neighbours per client.
    pub degree: u32,
    /// `complete` or `harary`.
    pub graph: &'static str,
    /// Vector length.
    pub dim: usize,
    /// Bits b.
    pub bits: u32,
    /// Wall-clock seconds of the whole round.
    pub seconds: f64,
    /// Wall-clock seconds per stage.
    pub stage_seconds: BTreeMap<&'static str, f64>,
    /// CPU seconds of the server (computing, not waiting); 0 when it ran elsewhere.
    pub server_seconds: f64,
    /// Mean CPU seconds per client over the clients that took part.
    pub client_seconds_mean: f64,
    /// Largest CPU seconds of one client.
    pub client_seconds_max: f64,
    /// Mean bytes sent plus received per client that took part.
    pub bytes_per_client: f64,
    /// Mean bytes sent per client.
    pub bytes_up_per_client: f64,
    /// Mean bytes received per client.
    pub bytes_down_per_client: f64,
    /// Where it ran: `in-process` or the server URL.
    pub transport: String,
    /// Seed.
    pub seed: Option<u64>,
}

/// Times each party: in one process they take turns, so wall time per party is its CPU time.
#[derive(Default)]
struct Stopwatch {
    started: Option<(Party, Instant)>,
    clients: BTreeMap<ClientId, Duration>,
    server: Duration,
}

impl Observer for Stopwatch {
    fn start(&mut self, party: Party) {
        self.started = Some((party, Instant::now()));
    }
    fn stop(&mut self, party: Party) {
        if let Some((p, t)) = self.started.take()
            && p == party
        {
            let e = t.elapsed();
            match party {
                Party::Client(id) => *self.clients.entry(id).or_default() += e,
                Party::Server => self.server += e,
            }
        }
    }
}

/// Uniform inputs and the dropout pattern of a simulation, from the experiment generator seeded
/// by `cfg.seed` (the OS when `None`).
pub fn inputs_and_dropouts(
    cfg: &SecAggSimConfig,
    config: &RoundConfig,
) -> (Vec<Vec<u64>>, Vec<Option<Stage>>) {
    let stages = config.stages();
    let rng = &mut match cfg.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng::<ExperimentRng>(),
    };
    let m = modulus_mask(cfg.bits);
    let n = cfg.clients as usize;
    let inputs: Vec<Vec<u64>> = (0..n)
        .map(|_| (0..cfg.dim).map(|_| rng.random::<u64>() & m).collect())
        .collect();
    let drop_count = ((cfg.dropout * n as f64).round() as usize).min(n);
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..=i);
        order.swap(i, j);
    }
    let mut drops = vec![None; n];
    for &i in &order[..drop_count] {
        drops[i] = Some(
            cfg.dropout_stage
                .unwrap_or_else(|| stages[rng.random_range(0..stages.len())]),
        );
    }
    (inputs, drops)
}

fn check(cfg: &SecAggSimConfig) -> Result<(), SecAggSimError> {
    if !(0.0..1.0).contains(&cfg.dropout) {
        return Err(SecAggSimError::Invalid(
            "dropout",
            format!("must be in [0, 1), got {}", cfg.dropout),
        ));
    }
    Ok(())
}

/// A fresh 256-bit session id from the OS.
pub fn fresh_session_id() -> [u8; 32] {
    let mut id = [0u8; 32];
    rand::rng().fill_bytes(&mut id);
    id
}

/// Runs one round in process; `progress` is told each stage as it finishes.
pub fn simulate_in_process(
    cfg: &SecAggSimConfig,
    progress: &dyn Fn(Stage),
) -> Result<SecAggSimReport, SecAggSimError> {
    check(cfg)?;
    let (config, credentials) = prepare_round(
        cfg.threat,
        cfg.clients,
        cfg.bits,
        cfg.dim,
        cfg.dropout,
        cfg.graph,
        &mut rand::rng(),
    )?;
    let (inputs, drops) = inputs_and_dropouts(cfg, &config);
    let mut secrets = rand::rng();
    let mut round = match credentials {
        Some(c) => LocalRound::with_credentials(config.clone(), inputs.clone(), drops, c)?,
        None => LocalRound::new(config.clone(), inputs.clone(), drops)?,
    }
    .with_policy(cfg.policy);
    let mut watch = Stopwatch::default();
    let mut stage_seconds = BTreeMap::new();
    let (mut up, mut down) = (0u64, 0u64);
    let start = Instant::now();
    while let Some(stage) = round.next_stage() {
        let t = Instant::now();
        let traffic = round.run_stage_observed(&mut secrets, &mut watch)?;
        stage_seconds.insert(stage.name(), t.elapsed().as_secs_f64());
        up += traffic.up;
        down += traffic.down;
        progress(stage);
    }
    let seconds = start.elapsed().as_secs_f64();
    let aggregate = finished(&round)?;
    Ok(report(
        cfg,
        &config,
        &inputs,
        &aggregate,
        Timings {
            seconds,
            stage_seconds,
            server: watch.server,
            clients: watch.clients.values().copied().collect(),
            up,
            down,
        },
        "in-process".into(),
    ))
}

fn finished(round: &LocalRound) -> Result<Aggregate, SecAggSimError> {
    match round.server().status() {
        privfed_secagg::RoundStatus::Finished => Ok(round
            .server()
            .output()
            .expect("finished rounds have an output")
            .clone()),
        privfed_secagg::RoundStatus::Aborted(reason) => {
            Err(SecAggSimError::Aborted(reason.clone()))
        }
        privfed_secagg::RoundStatus::Collecting(s) => Err(SecAggSimError::Aborted(format!(
            "the round stopped at stage {}",
            s.name()
        ))),
    }
}

/// Timings and traffic of a round, however it was run.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// Wall-clock seconds of the round.
    pub seconds: f64,
    /// Wall-clock seconds per stage.
    pub stage_seconds: BTreeMap<&'static str, f64>,
    /// Server computing time.
    pub server: Duration,
    /// Computing time of each client that took part.
    pub clients: Vec<Duration>,
    /// Bytes sent by all clients.
    pub up: u64,
    /// Bytes received by all clients.
    pub down: u64,
}

/// `complete` or `harary`, as the reports name a round's graph.
fn graph_name(config: &RoundConfig) -> &'static str {
    match config.graph {
        GraphSpec::Complete => "complete",
        GraphSpec::Harary { .. } => "harary",
    }
}

/// Assembles the report and checks exactness against the plain sum.
pub fn report(
    cfg: &SecAggSimConfig,
    config: &RoundConfig,
    inputs: &[Vec<u64>],
    aggregate: &Aggregate,
    t: Timings,
    transport: String,
) -> SecAggSimReport {
    let exact = aggregate.sum == plain_sum(inputs, &aggregate.survivors, config.bits);
    let participants = t.clients.len().max(1) as f64;
    let client_secs: Vec<f64> = t.clients.iter().map(Duration::as_secs_f64).collect();
    SecAggSimReport {
        exact,
        threat_model: config.threat_model.name(),
        roster: matches!(config.threat_model, ThreatModel::Active { roster: Some(_) }),
        survivors: aggregate.survivors.len(),
        recovered_dropouts: aggregate.dropped.len(),
        clients: config.clients,
        threshold: config.threshold,
        degree: config.degree(),
        graph: graph_name(config),
        dim: config.dim,
        bits: config.bits,
        seconds: t.seconds,
        stage_seconds: t.stage_seconds,
        server_seconds: t.server.as_secs_f64(),
        client_seconds_mean: client_secs.iter().sum::<f64>() / participants,
        client_seconds_max: client_secs.iter().copied().fold(0.0, f64::max),
        bytes_per_client: (t.up + t.down) as f64 / participants,
        bytes_up_per_client: t.up as f64 / participants,
        bytes_down_per_client: t.down as f64 / participants,
        transport,
        seed: cfg.seed,
    }
}

/// The report of `privfed secagg simulate --adversary …`: a lying server played against real
/// clients ([`privfed_secagg::adversary`]).
#[derive(Debug, Clone, Serialize)]
pub struct SecAggAttackReport {
    /// `lying-server` (the neighbour-share attack) or `key-substitution`.
    pub adversary: &'static str,
    /// `honest-but-curious` or `active`.
    pub threat_model: &'static str,
    /// Whether the devices were enrolled on a roster (active mode).
    pub roster: bool,
    /// Whether the server computed the target's exact input.
    pub attack_recovered_input: bool,
    /// The most clients that aborted in one strategy of the attack.
    pub clients_aborted: usize,
    /// The client whose input the server tried to learn.
    pub target: ClientId,
    /// Each strategy the attacker tried, on a fresh round.
    pub strategies: Vec<StrategyOutcome>,
    /// `colluders` and `grinding`: the colluding clients.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub colluders: Option<u32>,
    /// `colluders` and `grinding`: the colluders among the target's neighbours on the placement
    /// attacked (they hold shares of its secrets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub colluding_neighbours: Option<u32>,
    /// `colluders` and `grinding`: the fewest colluding neighbours with which the split attack
    /// can succeed, by the analysis (`2t − k`; `2t + 1 − k` on the active complete graph).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_colluding_neighbours: Option<u32>,
    /// `grinding`: what re-trying the placement reached, and the planner's bound it is
    /// compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grinding: Option<GrindingPlacement>,
    /// Cohort size.
    pub clients: u32,
    /// Threshold t.
    pub threshold: u32,
    /// Neighbours per client.
    pub degree: u32,
    /// `complete` or `harary`.
    pub graph: &'static str,
    /// Vector length.
    pub dim: usize,
    /// Bits b.
    pub bits: u32,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Seed of the inputs.
    pub seed: Option<u64>,
}

/// An attack's round has no dropouts: the attacker decides who it says dropped.
fn check_attack(cfg: &SecAggSimConfig) -> Result<(), SecAggSimError> {
    check(cfg)?;
    if cfg.dropout != 0.0 {
        return Err(SecAggSimError::Invalid(
            "dropout",
            "an attack runs on a round without dropouts (the lying server decides who it says \
             dropped)"
                .into(),
        ));
    }
    Ok(())
}

/// The devices of an attacked round, enrolled with keys from the OS; an active round with a
/// roster (`SecAggThreat::Active`) names their roster in `config`.
fn enroll_attacked_devices(
    cfg: &SecAggSimConfig,
    config: &mut RoundConfig,
    os: &mut rand::rngs::ThreadRng,
) -> Enrollment {
    let enrollment = Enrollment::new(cfg.clients as usize, os);
    if cfg.threat == SecAggThreat::Active {
        config.threat_model = enrollment.threat_model();
    }
    enrollment
}

/// The credentials of every fresh round an attack runs: the same enrolled devices with fresh
/// round keys, carrying the roster only when the round is active with one.
fn attacked_credentials(
    enrollment: &Enrollment,
    threat: SecAggThreat,
) -> privfed_secagg::Result<Vec<Credentials>> {
    let mut c = enrollment.credentials()?;
    if threat != SecAggThreat::Active {
        c.iter_mut().for_each(|c| c.roster = None);
    }
    Ok(c)
}

/// Plays `attack` against a round of `cfg` (no dropouts: the attacker decides who "drops"),
/// aiming at client `target`. Both threat models use the honest-but-curious graph and threshold
/// of `cfg.graph`, so the comparison is at equal parameters.
pub fn simulate_attack(
    cfg: &SecAggSimConfig,
    attack: Attack,
    target: ClientId,
) -> Result<SecAggAttackReport, SecAggSimError> {
    check_attack(cfg)?;
    let start = Instant::now();
    // Both threat models are attacked at the same parameters: the honest-but-curious graph and
    // threshold (the active planner's higher thresholds alone would stop this attacker, which
    // would not show what the protocol does).
    let mut config = round_config(
        cfg.clients,
        cfg.bits,
        cfg.dim,
        0.0,
        cfg.graph,
        fresh_session_id(),
    )?;
    if cfg.threat != SecAggThreat::HonestButCurious {
        config.threat_model = ThreatModel::Active { roster: None };
    }
    let (inputs, _) = inputs_and_dropouts(cfg, &config);
    let mut os = rand::rng();
    let enrollment = enroll_attacked_devices(cfg, &mut config, &mut os);
    let mut credentials =
        |_: &mut rand::rngs::ThreadRng| attacked_credentials(&enrollment, cfg.threat);
    let report = privfed_secagg::adversary::lying_server(
        attack,
        &config,
        &inputs,
        target,
        &mut credentials,
        &mut os,
    )?;
    Ok(SecAggAttackReport {
        adversary: match attack {
            Attack::NeighbourShare => "lying-server",
            Attack::KeySubstitution => "key-substitution",
        },
        threat_model: config.threat_model.name(),
        roster: cfg.threat.roster(),
        attack_recovered_input: report.recovered_input,
        clients_aborted: report.clients_aborted,
        target,
        strategies: report.strategies,
        colluders: None,
        colluding_neighbours: None,
        bound_colluding_neighbours: None,
        grinding: None,
        clients: config.clients,
        threshold: config.threshold,
        degree: config.degree(),
        graph: graph_name(&config),
        dim: config.dim,
        bits: config.bits,
        seconds: start.elapsed().as_secs_f64(),
        seed: cfg.seed,
    })
}

/// Colluding clients that help a lying server ([`privfed_secagg::adversary::colluders`] and
/// [`privfed_secagg::adversary::grinding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collusion {
    /// `colluders` of the target's neighbours collude (the placement that suits the attack
    /// best: the worst case).
    WorstPlacement {
        /// Colluding clients.
        colluders: u32,
    },
    /// `colluders` clients fixed before the round collude, and the server re-tries the
    /// placement `attempts` times to put them around the target.
    Grinding {
        /// Colluding clients.
        colluders: u32,
        /// Placements tried.
        attempts: u64,
    },
}

/// Plays `collusion` against a round of `cfg` (no dropouts), aiming at client `target`. Unlike
/// [`simulate_attack`], the round is the one each threat model sizes itself
/// ([`round_config_for`]: in the active mode the complete graph's threshold counts the
/// colluding fraction [`DEFAULT_CORRUPT_FRACTION`]), or the explicit Harary graph of
/// `cfg.graph`: the colluders are measured against the threshold the mode would use.
pub fn simulate_collusion(
    cfg: &SecAggSimConfig,
    collusion: Collusion,
    target: ClientId,
) -> Result<SecAggAttackReport, SecAggSimError> {
    check_attack(cfg)?;
    let start = Instant::now();
    let model = match cfg.threat {
        SecAggThreat::HonestButCurious => ThreatModel::HonestButCurious,
        _ => ThreatModel::Active { roster: None },
    };
    let mut config = round_config_for(
        model,
        cfg.clients,
        cfg.bits,
        cfg.dim,
        0.0,
        cfg.graph,
        fresh_session_id(),
    )?;
    let (inputs, _) = inputs_and_dropouts(cfg, &config);
    let mut os = rand::rng();
    let enrollment = enroll_attacked_devices(cfg, &mut config, &mut os);
    let mut credentials =
        |_: &mut rand::rngs::ThreadRng| attacked_credentials(&enrollment, cfg.threat);
    let (adversary, grinding, report) = match collusion {
        Collusion::WorstPlacement { colluders } => (
            "colluders",
            None,
            privfed_secagg::adversary::colluders(
                &config,
                &inputs,
                target,
                colluders,
                &mut credentials,
                &mut os,
            )?,
        ),
        Collusion::Grinding {
            colluders,
            attempts,
        } => {
            let (placement, report) = privfed_secagg::adversary::grinding(
                &config,
                &inputs,
                target,
                colluders,
                attempts,
                &mut credentials,
                &mut os,
            )?;
            ("grinding", Some(placement), report)
        }
    };
    let strategy = if config.threat_model.is_active() {
        "split-u3"
    } else {
        "split-unmasking"
    };
    Ok(SecAggAttackReport {
        adversary,
        threat_model: config.threat_model.name(),
        roster: cfg.threat.roster(),
        attack_recovered_input: report.recovered_input,
        clients_aborted: report.clients_aborted,
        target,
        strategies: vec![StrategyOutcome {
            strategy,
            recovered_input: report.recovered_input,
            clients_aborted: report.clients_aborted,
            detail: report.detail.clone(),
        }],
        colluders: Some(report.colluders.len() as u32),
        colluding_neighbours: Some(report.colluding_neighbours),
        bound_colluding_neighbours: Some(report.bound_colluding_neighbours),
        grinding,
        clients: config.clients,
        threshold: config.threshold,
        degree: config.degree(),
        graph: graph_name(&config),
        dim: config.dim,
        bits: config.bits,
        seconds: start.elapsed().as_secs_f64(),
        seed: cfg.seed,
    })
}

/// Runs one round against the coordinator at `server` (created there with `admin_token`):
/// `clients` concurrent device tasks join, take part (the dropped ones stop before their stage),
/// and the result is fetched and checked. `progress` is told each stage as the round leaves it.
#[cfg(feature = "http")]
pub async fn simulate_over_http(
    cfg: &SecAggSimConfig,
    server: &str,
    admin_token: &str,
    progress: &(dyn Fn(Stage) + Sync),
) -> Result<SecAggSimReport, SecAggSimError> {
    use privfed_client::secagg::{Outcome, SecAggClient};
    check(cfg)?;
    if cfg.threat == SecAggThreat::ActiveWithoutRoster {
        return Err(SecAggError::Policy(
            "the HTTP coordinator's active rounds need a roster (it is the devices' credential \
             to join): drop --no-roster"
                .into(),
        )
        .into());
    }
    // Active: a fresh enrollment authority (this process plays the operator) enrolls one device
    // per client; the round names the roster, each device joins with its signature.
    let enrollment = (cfg.threat == SecAggThreat::Active)
        .then(|| Enrollment::new(cfg.clients as usize, &mut rand::rng()));
    let http = SecAggClient::new(server)
        .map_err(|e| SecAggSimError::Http(e.to_string()))?
        .with_policy(cfg.policy);
    let (graph, threshold) = match cfg.graph {
        GraphChoice::Auto => (serde_json::json!("auto"), None),
        GraphChoice::Complete => (serde_json::json!("complete"), None),
        GraphChoice::Plus => (serde_json::json!("plus"), None),
        GraphChoice::Harary { degree, threshold } => (
            serde_json::json!({"harary": {"degree": degree}}),
            Some(threshold),
        ),
    };
    let created = http
        .create_round(
            admin_token,
            &serde_json::json!({
                "clients": cfg.clients, "bits": cfg.bits, "dim": cfg.dim, "graph": graph,
                "threshold": threshold, "dropout": cfg.dropout, "stage_timeout_ms": 600_000,
                "threat_model": cfg.threat.name(),
                "roster": enrollment.as_ref().map(|e| &e.roster),
            }),
        )
        .await
        .map_err(|e| SecAggSimError::Http(e.to_string()))?;
    let config = created.config.clone();
    let (inputs, drops) = inputs_and_dropouts(cfg, &config);
    let start = Instant::now();
    let mut joined = Vec::with_capacity(cfg.clients as usize);
    let mut credentials: Vec<Option<Credentials>> = Vec::with_capacity(cfg.clients as usize);
    match enrollment {
        Some(e) => {
            let authority = e.authority.verifying_key();
            for device in e.devices {
                let (j, c) = http
                    // Fresh simulated devices: none has accepted a roster before.
                    .join_enrolled(&created.round, device, &authority, 0)
                    .await
                    .map_err(|e| SecAggSimError::Http(e.to_string()))?;
                joined.push(j);
                credentials.push(Some(c));
            }
        }
        None => {
            // The simulation is the administrator too: each client joins with one of the
            // round's tickets.
            for ticket in &created.join_tickets {
                joined.push(
                    http.join_with_ticket(&created.round, ticket)
                        .await
                        .map_err(|e| SecAggSimError::Http(e.to_string()))?,
                );
                credentials.push(None);
            }
        }
    }
    // Watches the round's stage to time each one, and closes a stage as soon as every client
    // still pending is one scheduled to have gone silent (the deadline a coordinator's operator
    // would set; otherwise the stage would wait for its timeout).
    let watcher = {
        let http = http.clone();
        let round = created.round.clone();
        let token = admin_token.to_string();
        let drops = drops.clone();
        tokio::spawn(async move {
            let mut seen: Vec<(String, Instant)> = vec![("advertise_keys".into(), Instant::now())];
            loop {
                let Ok(v) = http.status(&round).await else {
                    break;
                };
                let now = v["stage"]
                    .as_str()
                    .unwrap_or(v["status"].as_str().unwrap_or(""))
                    .to_string();
                if seen.last().is_some_and(|(s, _)| *s != now) {
                    seen.push((now.clone(), Instant::now()));
                }
                if v["status"] != "collecting" {
                    break;
                }
                let stage = Stage::ALL.iter().copied().find(|s| s.name() == now);
                let pending: Vec<u64> = v["pending_clients"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                    .unwrap_or_default();
                let all_silent = !pending.is_empty()
                    && pending.iter().all(|&id| {
                        drops[id as usize - 1].is_some_and(|d| stage.is_some_and(|s| d <= s))
                    });
                if all_silent {
                    let _ = http.close_stage(&token, &round).await;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            seen
        })
    };
    let mut tasks = Vec::with_capacity(joined.len());
    for (j, c) in joined.into_iter().zip(credentials) {
        let http = http.clone();
        let i = j.client as usize - 1;
        let input = inputs[i].clone();
        let drop = drops[i];
        tasks.push(tokio::spawn(async move {
            http.participate_with(&j, c, &input, drop).await
        }));
    }
    let mut clients = Vec::new();
    let (mut up, mut down) = (0u64, 0u64);
    for t in tasks {
        let p = t
            .await
            .map_err(|e| SecAggSimError::Http(e.to_string()))?
            .map_err(|e| SecAggSimError::Http(e.to_string()))?;
        if let Outcome::Over(reason) = &p.outcome
            && reason.starts_with("aborted")
        {
            return Err(SecAggSimError::Aborted(reason.clone()));
        }
        if p.bytes_up > 0 {
            clients.push(p.compute);
            up += p.bytes_up;
            down += p.bytes_down;
        }
    }
    let seen = watcher
        .await
        .map_err(|e| SecAggSimError::Http(e.to_string()))?;
    let seconds = start.elapsed().as_secs_f64();
    let mut stage_seconds = BTreeMap::new();
    for w in seen.windows(2) {
        if let Some(stage) = Stage::ALL.iter().find(|s| s.name() == w[0].0) {
            stage_seconds.insert(stage.name(), (w[1].1 - w[0].1).as_secs_f64());
            progress(*stage);
        }
    }
    let status = http
        .status(&created.round)
        .await
        .map_err(|e| SecAggSimError::Http(e.to_string()))?;
    if status["status"] == "aborted" {
        return Err(SecAggSimError::Aborted(
            status["reason"].as_str().unwrap_or("").to_string(),
        ));
    }
    let aggregate = http
        .result(admin_token, &created.round)
        .await
        .map_err(|e| SecAggSimError::Http(e.to_string()))?;
    Ok(report(
        cfg,
        &config,
        &inputs,
        &aggregate,
        Timings {
            seconds,
            stage_seconds,
            server: Duration::ZERO,
            clients,
            up,
            down,
        },
        server.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(clients: u32, dropout: f64, stage: Option<Stage>) -> SecAggSimConfig {
        SecAggSimConfig {
            clients,
            dim: 50,
            bits: 20,
            dropout,
            dropout_stage: stage,
            graph: GraphChoice::Auto,
            seed: Some(3),
            threat: SecAggThreat::HonestButCurious,
            policy: ClientPolicy::default(),
        }
    }

    #[test]
    fn a_simulated_round_is_exact_and_reports_its_cost() {
        let r = simulate_in_process(&cfg(20, 0.2, Some(Stage::MaskedInput)), &|_| {}).unwrap();
        assert!(r.exact);
        assert_eq!(r.threat_model, "honest-but-curious");
        assert_eq!(r.survivors, 16);
        assert_eq!(r.recovered_dropouts, 4);
        assert_eq!(r.threshold, 10);
        assert_eq!(r.stage_seconds.len(), 4);
        // Each client sends at least its packed masked input (50 × 20 bits = 125 bytes).
        assert!(r.bytes_up_per_client > 125.0);
        assert!(r.client_seconds_mean > 0.0 && r.server_seconds > 0.0);
    }

    #[test]
    fn an_active_round_has_five_stages_and_the_colluder_threshold() {
        let mut c = cfg(20, 0.2, None);
        c.threat = SecAggThreat::Active;
        let r = simulate_in_process(&c, &|_| {}).unwrap();
        assert!(r.exact && r.roster);
        assert_eq!(r.threat_model, "active");
        // ⌊(20 + ⌈0.1·20⌉)/2⌋ + 1
        assert_eq!(r.threshold, 12);
        assert_eq!(r.stage_seconds.len(), 5);
        assert!(r.stage_seconds.contains_key("consistency_check"));
    }

    #[test]
    fn the_lying_server_recovers_an_input_only_from_an_honest_but_curious_round() {
        for (threat, recovered) in [
            (SecAggThreat::HonestButCurious, true),
            (SecAggThreat::Active, false),
            (SecAggThreat::ActiveWithoutRoster, false),
        ] {
            let mut c = cfg(15, 0.0, None);
            c.threat = threat;
            let r = simulate_attack(&c, Attack::NeighbourShare, 4).unwrap();
            assert_eq!(r.attack_recovered_input, recovered, "{r:?}");
            assert_eq!(r.adversary, "lying-server");
            assert_eq!(r.clients_aborted > 0, !recovered, "{r:?}");
        }
        // Key substitution: stopped only by the roster.
        for (threat, recovered) in [
            (SecAggThreat::HonestButCurious, true),
            (SecAggThreat::ActiveWithoutRoster, true),
            (SecAggThreat::Active, false),
        ] {
            let mut c = cfg(9, 0.0, None);
            c.threat = threat;
            let r = simulate_attack(&c, Attack::KeySubstitution, 2).unwrap();
            assert_eq!(r.attack_recovered_input, recovered, "{r:?}");
        }
        let e = simulate_attack(&cfg(9, 0.1, None), Attack::NeighbourShare, 1).unwrap_err();
        assert!(e.to_string().contains("without dropouts"), "{e}");
    }

    /// Colluders at the threshold each mode sizes for (n = 11, complete graph): the
    /// honest-but-curious round (t = 6, k = 10) falls at `2t − k = 2` colluders, the active one
    /// (t = ⌊(11 + 2)/2⌋ + 1 = 7) only at `2t + 1 − k = 5`, past the 2 it is sized for; below
    /// that honest clients abort.
    #[test]
    fn colluders_recover_an_input_where_the_analysis_says() {
        for (threat, colluders, recovered) in [
            (SecAggThreat::HonestButCurious, 1, false),
            (SecAggThreat::HonestButCurious, 2, true),
            (SecAggThreat::Active, 2, false),
            (SecAggThreat::Active, 4, false),
            (SecAggThreat::Active, 5, true),
        ] {
            let mut c = cfg(11, 0.0, None);
            c.threat = threat;
            let r = simulate_collusion(&c, Collusion::WorstPlacement { colluders }, 3).unwrap();
            assert_eq!(r.attack_recovered_input, recovered, "{r:?}");
            assert_eq!(r.adversary, "colluders");
            assert_eq!(r.colluders, Some(colluders));
            let bound = r.bound_colluding_neighbours.unwrap();
            assert_eq!(bound <= colluders, recovered, "{r:?}");
            if threat == SecAggThreat::Active {
                assert_eq!(r.clients_aborted > 0, !recovered, "{r:?}");
            }
        }
        // Grinding over a Harary graph: with 3 fixed colluders of 16 one placement puts
        // 2t − k = 2 of them around the target with probability 0.34; 64 tries miss with
        // probability 0.66^64 < 10⁻¹¹.
        let mut c = cfg(16, 0.0, None);
        c.threat = SecAggThreat::Active;
        c.graph = GraphChoice::Harary {
            degree: 6,
            threshold: 4,
        };
        let grinding = Collusion::Grinding {
            colluders: 3,
            attempts: 64,
        };
        let r = simulate_collusion(&c, grinding, 1).unwrap();
        assert!(r.attack_recovered_input, "{r:?}");
        let g = r.grinding.as_ref().unwrap();
        assert!(
            g.best_colluding_neighbours >= 2 && g.split_placement_found,
            "{g:?}"
        );
        assert_eq!(r.adversary, "grinding");
    }

    #[test]
    fn too_many_dropouts_abort_with_a_message() {
        let e = simulate_in_process(&cfg(10, 0.6, Some(Stage::MaskedInput)), &|_| {}).unwrap_err();
        assert!(matches!(e, SecAggSimError::Aborted(_)), "{e}");
        assert!(e.to_string().contains("aborted"));
    }
}
