//! `privfed serve`: the Draw-and-Discard model server (paper 003) over HTTP.

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use privfed_server::ddml::store::embedded::{CommitPacing, EmbeddedOptions, IdleSignal, OpenMode};
use privfed_server::ddml::store::redis::{Durability, RedisOptions};
use privfed_server::secagg::{EmbeddedRoundStore, RedisRoundStore, RoundStore};
use privfed_server::{AppState, EmbeddedStore, RedisStore, ServeConfig, Store};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Format of the log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// When the embedded store's group commit starts (`--group-commit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupCommit {
    /// When the server's workers have run out of requests (or after the maximum delay).
    Idle,
    /// As soon as one update is pending.
    Eager,
}

/// Arguments of `privfed serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Directory of the embedded database (the default store). The store must exist unless
    /// --init-store is given: a lost data directory is an error, never a silently empty server.
    #[arg(long, default_value = "privfed-data")]
    pub data_dir: PathBuf,
    /// Create a new, empty embedded store in --data-dir (refused if one exists there).
    #[arg(long, conflicts_with = "store")]
    pub init_store: bool,
    /// Bearer token required by the model-management routes (or env PRIVFED_ADMIN_TOKEN, which
    /// keeps it out of the process list).
    #[arg(long, env = "PRIVFED_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    /// Keep the models' instances and the secure-aggregation rounds in Redis instead
    /// (redis://HOST:PORT[/DB]): several server processes sharing it serve the same models and
    /// the same rounds (a client may send each request to any of them).
    #[arg(long)]
    pub store: Option<String>,
    /// With --store redis://…: what a 202 promises. `strict` (default) refuses to start unless
    /// Redis fsyncs every write to its append-only file (`appendonly yes`, `appendfsync always`)
    /// and confirms each write before answering; `best-effort` starts on any configuration and
    /// answers 202 `{"status":"accepted","durable":false}` (a Redis crash may lose it).
    #[arg(long, value_enum, default_value_t = RedisDurability::Strict)]
    pub redis_durability: RedisDurability,
    /// With --store redis://…: the prefix of the secure-aggregation rounds' keys in Redis. Every
    /// server process of one deployment must use the same prefix; separate deployments sharing
    /// one Redis use different ones. Ignored with the embedded store (rounds in
    /// DATA_DIR/secagg.redb, served by that one process).
    #[arg(long, default_value = privfed_server::secagg::store::redis::DEFAULT_PREFIX)]
    pub secagg_prefix: String,
    /// Also mount the benchmark ceiling routes /bench/{dim} (answer and read a payload, no store).
    #[arg(long)]
    pub bench_routes: bool,
    /// Tokio worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Embedded store: when a group commit (one fsync for every pending update) starts.
    /// `idle` waits until the server's workers have run out of requests to handle, so that
    /// under load a commit carries every update they could queue meanwhile (fewer fsyncs per
    /// update); `eager` starts as soon as one update is pending. Either way an update is
    /// acknowledged only after its commit is durable.
    #[arg(long, value_enum, default_value_t = GroupCommit::Idle)]
    pub group_commit: GroupCommit,
    /// With --group-commit idle: the longest an update waits for its commit to start, in
    /// microseconds (the bound when the workers never run out of work).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 2000)]
    pub group_commit_max_delay_us: u64,
    /// With --init-store: the size of the new store's update journal, bytes (a file of this size,
    /// zero-filled; a commit is one record in it, and when it is full its instances are
    /// checkpointed into the database). A larger journal checkpoints less often. An existing
    /// store keeps its journal's size.
    #[arg(long, value_name = "BYTES", requires = "init_store",
          default_value_t = privfed_server::ddml::store::journal::DEFAULT_JOURNAL_BYTES)]
    pub journal_bytes: u64,
    /// Close a connection whose request head (line and headers) is not complete this many
    /// seconds after its first byte (or after accept).
    #[arg(long, default_value_t = ServeConfig::default().header_timeout.as_secs())]
    pub header_timeout_secs: u64,
    /// Answer 408 and close the connection if a request body is not complete this many seconds
    /// after its head.
    #[arg(long, default_value_t = ServeConfig::default().body_timeout.as_secs())]
    pub body_timeout_secs: u64,
    /// Close a keep-alive connection idle for this many seconds.
    #[arg(long, default_value_t = ServeConfig::default().idle_timeout.as_secs())]
    pub idle_timeout_secs: u64,
    /// Close a connection whose answer makes no progress for this many seconds (a client that
    /// does not read).
    #[arg(long, default_value_t = ServeConfig::default().write_timeout.as_secs())]
    pub write_timeout_secs: u64,
    /// Most connections served at once; further ones wait in the listen backlog until one ends.
    /// Keep it below the descriptor limit (`ulimit -n`).
    #[arg(long, default_value_t = ServeConfig::default().max_connections)]
    pub max_connections: usize,
    /// Most connections open at once from one client address (IPv4 address or IPv6 /64); further
    /// ones are closed at accept and logged, so one client cannot hold the connection slots.
    #[arg(long, default_value_t = ServeConfig::default().max_connections_per_address)]
    pub max_connections_per_address: usize,
    /// The step time devices are given, seconds: no ticket younger than this is forgotten to make
    /// room for another draw (a model whose ticket book is full of younger ones answers draws 429
    /// with Retry-After), and a client's draws count against --tickets-per-client for this long
    /// unless it posts their updates first.
    #[arg(long, default_value_t = privfed_server::ddml::ticket::DEFAULT_TICKET_MIN_AGE.as_secs())]
    pub ticket_step_secs: u64,
    /// Outstanding tickets one client address (IPv4 address or IPv6 /64) may hold within the step
    /// time; further draws answer 429 with Retry-After (0: no cap).
    #[arg(long, default_value_t = privfed_server::ddml::ticket::DEFAULT_TICKETS_PER_CLIENT)]
    pub tickets_per_client: usize,
    /// Embedded store: a write whose commit has not completed after this many seconds answers
    /// 503, /healthz turns 503 and an ERROR is logged, until commits complete again (a stalled
    /// disk).
    #[arg(long, default_value_t = privfed_server::ddml::store::embedded::DEFAULT_COMMIT_DEADLINE.as_secs())]
    pub commit_deadline_secs: u64,
    /// Bytes of update bodies read at once, at most; an update that finds no room within a second
    /// answers 503. Bounds the memory anonymous posts can hold.
    #[arg(long, value_name = "BYTES", default_value_t = privfed_server::http::body::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT)]
    pub max_body_bytes_in_flight: u64,
    /// On SIGTERM or Ctrl-C, drop connections still open after this many seconds and exit.
    #[arg(long, default_value_t = ServeConfig::default().shutdown_deadline.as_secs())]
    pub shutdown_deadline_secs: u64,
    /// Cap on the total size of all models' weights, bytes (4·dim·k summed over models);
    /// creating a model beyond it answers 507. The embedded store's resident memory at the cap
    /// measured 6.7 times this (scripts/bench/model_memory.sh: 16 models of 2^20 weights × 8,
    /// each drawn and updated 16 times): the weights, their encoded copy for draws, instances
    /// kept for outstanding tickets (up to 64 MiB per model) and the database's page cache.
    #[arg(long, default_value_t = privfed_server::ddml::api::DEFAULT_MAX_MODEL_BYTES)]
    pub max_model_bytes: u64,
    /// Per-client limit on draws and updates, per second (token bucket per client IP; default:
    /// none). Bounds what one client can do to a model (docs/SERVER_THREAT_MODEL.md). Behind a
    /// reverse proxy every client has the proxy's address: limit there instead.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate_limit: Option<f64>,
    /// Bucket size of --rate-limit: requests a client may make at once (default: one second's
    /// worth, at least 1).
    #[arg(long, value_name = "N", requires = "rate_limit")]
    pub rate_burst: Option<f64>,
    /// Log filter (tracing EnvFilter syntax: `info`, `debug`, `privfed_server=debug,warn`);
    /// requests are logged at debug.
    #[arg(long, env = "PRIVFED_LOG", default_value = "info")]
    pub log_level: String,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl ServeArgs {
    /// `--journal-bytes`, validated.
    pub fn journal_bytes(&self) -> anyhow::Result<u64> {
        let range = privfed_server::ddml::store::journal::MIN_JOURNAL_BYTES..=(1 << 40);
        if !range.contains(&self.journal_bytes) {
            bail!(
                "--journal-bytes must be between {} and {}",
                range.start(),
                range.end()
            );
        }
        Ok(self.journal_bytes)
    }

    /// The embedded store's group-commit pacing (validated). `WhenIdle` only with the embedded
    /// store: a Redis store has no group commit to pace.
    pub fn commit_pacing(&self) -> anyhow::Result<CommitPacing> {
        if !(1..=1_000_000).contains(&self.group_commit_max_delay_us) {
            bail!("--group-commit-max-delay-us must be between 1 and 1000000");
        }
        Ok(match (self.group_commit, &self.store) {
            (GroupCommit::Idle, None) => CommitPacing::WhenIdle {
                signal: IdleSignal::new(),
                max_delay: Duration::from_micros(self.group_commit_max_delay_us),
            },
            _ => CommitPacing::Eager,
        })
    }

    /// The connection limits given on the command line.
    pub fn serve_config(&self) -> anyhow::Result<ServeConfig> {
        for (flag, v) in [
            ("--header-timeout-secs", self.header_timeout_secs),
            ("--body-timeout-secs", self.body_timeout_secs),
            ("--idle-timeout-secs", self.idle_timeout_secs),
            ("--write-timeout-secs", self.write_timeout_secs),
        ] {
            if v == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        if self.max_connections == 0 {
            bail!("--max-connections must be at least 1");
        }
        if self.max_connections_per_address == 0 {
            bail!("--max-connections-per-address must be at least 1");
        }
        if self.commit_deadline_secs == 0 {
            bail!("--commit-deadline-secs must be at least 1");
        }
        if self.max_body_bytes_in_flight < 1024 {
            bail!("--max-body-bytes-in-flight must be at least 1024");
        }
        Ok(ServeConfig {
            header_timeout: Duration::from_secs(self.header_timeout_secs),
            body_timeout: Duration::from_secs(self.body_timeout_secs),
            idle_timeout: Duration::from_secs(self.idle_timeout_secs),
            write_timeout: Duration::from_secs(self.write_timeout_secs),
            max_connections: self.max_connections,
            shutdown_deadline: Duration::from_secs(self.shutdown_deadline_secs),
            max_connections_per_address: self.max_connections_per_address,
        })
    }
}

/// Installs the log subscriber: `filter` in EnvFilter syntax, lines on stderr.
fn init_logging(filter: &str, format: LogFormat) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(filter)
        .with_context(|| format!("invalid --log-level / PRIVFED_LOG `{filter}`"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let done = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    done.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}

/// A line for the operator: `privfed serve: MESSAGE` on stderr in text mode; in JSON mode an
/// INFO event like every other line (stderr carries JSON only).
fn say(format: LogFormat, message: &str) {
    match format {
        LogFormat::Text => eprintln!("privfed serve: {message}"),
        LogFormat::Json => tracing::info!("{message}"),
    }
}

/// `--redis-durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedisDurability {
    /// Acknowledged updates survive a crash of redis-server (or the server refuses to start).
    Strict,
    /// Acknowledged updates are as durable as Redis is configured; 202 says `"durable": false`.
    BestEffort,
}

async fn run_with<S: Store>(
    args: &ServeArgs,
    store: S,
    rounds: Arc<dyn RoundStore>,
) -> anyhow::Result<()> {
    let config = args.serve_config()?;
    let mut state = AppState::new(store, args.admin_token.clone());
    state.secagg = Some(
        privfed_server::secagg::Coordinator::open(rounds, args.admin_token.clone())
            .await
            .context("cannot resume the stored secure-aggregation rounds")?,
    );
    state.bench_routes = args.bench_routes;
    state.max_model_bytes = args.max_model_bytes;
    state.rate_limit = args
        .rate_limit()?
        .map(privfed_server::http::ratelimit::RateLimiter::new);
    state.draw_quota = (args.tickets_per_client > 0).then(|| {
        privfed_server::ddml::ticket::DrawQuota::new(
            args.tickets_per_client,
            Duration::from_secs(args.ticket_step_secs),
        )
    });
    state.body_budget = privfed_server::http::body::BodyBudget::new(args.max_body_bytes_in_flight);
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    say(
        args.log_format,
        &format!("listening on http://{}", listener.local_addr()?),
    );
    tracing::info!(
        addr = %listener.local_addr()?,
        store = if args.store.is_some() { "redis" } else { "embedded" },
        ?config,
        max_model_bytes = args.max_model_bytes,
        group_commit = args
            .group_commit
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default(),
        group_commit_max_delay_us = args.group_commit_max_delay_us,
        "privfed serve started"
    );
    // Finish in-flight requests on Ctrl-C or SIGTERM (what service managers send).
    let log_format = args.log_format;
    let shutdown = async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        if log_format == LogFormat::Text {
            eprintln!("privfed serve: shutting down");
        }
        tracing::info!("shutdown requested");
    };
    privfed_server::serve_with(listener, Arc::new(state), shutdown, config).await?;
    tracing::info!("privfed serve stopped");
    Ok(())
}

impl ServeArgs {
    /// The per-client rate limit of --rate-limit/--rate-burst, validated.
    fn rate_limit(&self) -> anyhow::Result<Option<privfed_server::http::ratelimit::RateLimit>> {
        let Some(per_second) = self.rate_limit else {
            return Ok(None);
        };
        let burst = self.rate_burst.unwrap_or(per_second.max(1.0));
        privfed_server::http::ratelimit::RateLimit::new(per_second, burst)
            .map(Some)
            .with_context(|| {
                format!(
                    "--rate-limit {per_second} --rate-burst {burst}: the rate must be positive and finite, the burst at least 1"
                )
            })
    }
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    if args.admin_token.trim().is_empty() {
        bail!("--admin-token must not be empty");
    }
    args.serve_config()?;
    args.rate_limit()?;
    init_logging(&args.log_level, args.log_format)?;
    let pacing = args.commit_pacing()?;
    let journal_bytes = args.journal_bytes()?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(t) = args.threads {
        rt.worker_threads(t.max(1));
    }
    if let CommitPacing::WhenIdle { signal, .. } = &pacing {
        let hook = signal.clone();
        rt.on_thread_park(move || hook.notify());
    }
    let rt = rt.build()?;
    let result = rt.block_on(async {
        match &args.store {
            None => {
                let mode = if args.init_store {
                    OpenMode::Create
                } else {
                    OpenMode::Existing
                };
                let options = EmbeddedOptions {
                    pacing,
                    journal_bytes,
                    commit_deadline: Duration::from_secs(args.commit_deadline_secs),
                    limits: privfed_server::ddml::ticket::TicketLimits {
                        min_age: Duration::from_secs(args.ticket_step_secs),
                        ..Default::default()
                    },
                };
                let opened = EmbeddedStore::open_with(&args.data_dir, mode, options);
                let store = opened.with_context(|| {
                    format!("cannot open the store in {}", args.data_dir.display())
                })?;
                for (name, why) in store.quarantined() {
                    say(
                        args.log_format,
                        &format!("model `{name}` is quarantined: {why}"),
                    );
                }
                // Secure-aggregation rounds: beside the embedded model store (secagg.redb).
                let rounds = EmbeddedRoundStore::open(&args.data_dir).with_context(|| {
                    format!(
                        "cannot open the secure-aggregation round store in {}",
                        args.data_dir.display()
                    )
                })?;
                run_with(args, store, Arc::new(rounds)).await
            }
            Some(url) if url.starts_with("redis://") => {
                let options = RedisOptions {
                    durability: match args.redis_durability {
                        RedisDurability::Strict => Durability::Strict,
                        RedisDurability::BestEffort => Durability::BestEffort,
                    },
                    ..RedisOptions::default()
                };
                if options.durability == Durability::BestEffort {
                    say(
                        args.log_format,
                        "--redis-durability best-effort: a crash of Redis may lose acknowledged \
                         updates; 202 answers \"durable\": false",
                    );
                }
                if args.secagg_prefix.is_empty() {
                    bail!("--secagg-prefix must not be empty");
                }
                let store = RedisStore::connect_with(url, options)
                    .await
                    .with_context(|| format!("cannot use the Redis store at {url}"))?;
                // Secure-aggregation rounds in the same Redis, over the same connection and
                // durability policy, so every process of the deployment serves every round.
                let rounds = RedisRoundStore::new(store.connection().clone(), &args.secagg_prefix);
                run_with(args, store, Arc::new(rounds)).await
            }
            Some(other) => bail!("unsupported --store `{other}` (expected redis://HOST:PORT)"),
        }
    });
    if let Err(e) = &result {
        tracing::error!(error = format!("{e:#}"), "privfed serve failed");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn redis_durability_defaults_to_strict_and_parses_best_effort() {
        let w =
            Wrap::try_parse_from(["x", "--admin-token", "t", "--store", "redis://h:1"]).unwrap();
        assert_eq!(w.serve.redis_durability, RedisDurability::Strict);
        let w = Wrap::try_parse_from([
            "x",
            "--admin-token",
            "t",
            "--redis-durability",
            "best-effort",
        ])
        .unwrap();
        assert_eq!(w.serve.redis_durability, RedisDurability::BestEffort);
        assert!(
            Wrap::try_parse_from(["x", "--admin-token", "t", "--redis-durability", "none"])
                .is_err()
        );
    }
}
