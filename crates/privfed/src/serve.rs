//! `privfed serve`: the Draw-and-Discard model server (paper 003) over HTTP.

use anyhow::{Context, bail};
use clap::Args;
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
    /// Also mount the benchmark ceiling routes /bench/{dim} (answer and read a payload, no store).
    #[arg(long)]
    pub bench_routes: bool,
    /// Tokio worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
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
                let store = RedisStore::connect(url)
                    .await
                    .with_context(|| format!("cannot connect to {url}"))?;
                run_with(args, store).await
            }
            Some(other) => bail!("unsupported --store `{other}` (expected redis://HOST:PORT)"),
        }
    })
}
