//! `privfed serve`: the Draw-and-Discard model server (paper 003) over HTTP.

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use privfed_server::store::redis::{Durability, RedisOptions};
use privfed_server::{AppState, EmbeddedStore, RedisStore, Store};
use std::path::PathBuf;
use std::sync::Arc;

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
    /// Keep the instances in Redis instead (redis://HOST:PORT[/DB]); several servers may share it.
    #[arg(long)]
    pub store: Option<String>,
    /// With --store redis://…: what a 202 promises. `strict` (default) refuses to start unless
    /// Redis fsyncs every write to its append-only file (`appendonly yes`, `appendfsync always`)
    /// and confirms each write before answering; `best-effort` starts on any configuration and
    /// answers 202 `{"status":"accepted","durable":false}` (a Redis crash may lose it).
    #[arg(long, value_enum, default_value_t = RedisDurability::Strict)]
    pub redis_durability: RedisDurability,
    /// Also mount the benchmark ceiling routes /bench/{dim} (answer and read a payload, no store).
    #[arg(long)]
    pub bench_routes: bool,
    /// Tokio worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `--redis-durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedisDurability {
    /// Acknowledged updates survive a crash of redis-server (or the server refuses to start).
    Strict,
    /// Acknowledged updates are as durable as Redis is configured; 202 says `"durable": false`.
    BestEffort,
}

async fn run_with<S: Store>(args: &ServeArgs, store: S) -> anyhow::Result<()> {
    let mut state = AppState::new(store, args.admin_token.clone());
    state.bench_routes = args.bench_routes;
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    eprintln!(
        "privfed serve: listening on http://{}",
        listener.local_addr()?
    );
    // Finish in-flight requests on Ctrl-C or SIGTERM (what service managers send).
    let shutdown = async {
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
        eprintln!("privfed serve: shutting down");
    };
    privfed_server::serve(listener, Arc::new(state), shutdown).await?;
    Ok(())
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    if args.admin_token.trim().is_empty() {
        bail!("--admin-token must not be empty");
    }
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(t) = args.threads {
        rt.worker_threads(t.max(1));
    }
    let rt = rt.build()?;
    rt.block_on(async {
        match &args.store {
            None => {
                let opened = if args.init_store {
                    EmbeddedStore::create(&args.data_dir)
                } else {
                    EmbeddedStore::open(&args.data_dir)
                };
                let store = opened.with_context(|| {
                    format!("cannot open the store in {}", args.data_dir.display())
                })?;
                for (name, why) in store.quarantined() {
                    eprintln!("privfed serve: model `{name}` is quarantined: {why}");
                }
                run_with(args, store).await
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
                    eprintln!(
                        "privfed serve: --redis-durability best-effort: a crash of Redis may lose \
                         acknowledged updates; 202 answers \"durable\": false"
                    );
                }
                let store = RedisStore::connect_with(url, options)
                    .await
                    .with_context(|| format!("cannot use the Redis store at {url}"))?;
                run_with(args, store).await
            }
            Some(other) => bail!("unsupported --store `{other}` (expected redis://HOST:PORT)"),
        }
    })
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
