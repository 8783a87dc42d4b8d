//! The benchmark's reference: the server's own router (with the `/bench/{dim}` ceiling routes)
//! served by plain `axum::serve` — no timeouts, no connection cap, no ticket path — so the
//! hardened server can be compared side by side with a minimal axum server on the same machine
//! (BENCHMARKS.md, "Draw-and-Discard server").
//!
//! `cargo run --release -p privfed-server --example axum_ceiling -- 127.0.0.1:PORT [THREADS]`
//! (tokio worker threads, default 1); prints `listening on http://ADDR` and serves until SIGTERM
//! or Ctrl-C, then removes its store directory (a fresh one per run).

use privfed_server::{AppState, EmbeddedStore, router};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: usize = match std::env::args().nth(2) {
        Some(t) => t.parse().map_err(|e| format!("THREADS {t}: {e}"))?,
        None => 1,
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?
        .block_on(serve())
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    // Fresh per run: a directory left by a killed run under a recycled process id would make
    // `create` refuse to start.
    let dir = std::env::temp_dir().join(format!(
        "privfed-axum-ceiling-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    let store = EmbeddedStore::create(&dir)?;
    let mut state = AppState::new(store, "unused");
    state.bench_routes = true;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on http://{}", listener.local_addr()?);
    // As the server does: no Nagle delay on accepted connections.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let r = axum::serve(listener, router(Arc::new(state)))
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        })
        .await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(r?)
}
