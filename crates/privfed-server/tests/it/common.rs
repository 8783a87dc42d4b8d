//! Test helpers of the server's tests: a store reopened after shutdown, a server on loopback, a
//! model spec. Temporary directories, free ports and Redis servers come from the test kit
//! (`privfed_testkit::sys`; tests that start Redis are ignored without `cfg(has_redis_server)`).

use privfed_server::ddml::model::CreateModel;
// `tests/resources` includes this file and starts no Redis.
#[allow(unused_imports)]
pub use privfed_testkit::sys::{RedisServer, TempDir, free_port};
use std::time::{Duration, Instant};

/// Opens an existing embedded store: the previous server's (or store's) writer thread may hold
/// the database for a moment after shutdown.
pub async fn reopen(dir: &std::path::Path) -> privfed_server::EmbeddedStore {
    let t0 = Instant::now();
    loop {
        match privfed_server::EmbeddedStore::open(dir) {
            Ok(s) => return s,
            Err(e) if t0.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cannot reopen the store: {e}"),
        }
    }
}

/// A running server: its base URL, the sender that shuts it down, and its task.
pub type Running = (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// Serves `store` with `token` on 127.0.0.1 (OS-chosen port) on the current tokio runtime.
pub async fn serve_on_loopback<S: privfed_server::Store + 'static>(
    store: S,
    token: &str,
) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let state = std::sync::Arc::new(privfed_server::AppState::new(store, token));
    let h = tokio::spawn(async move {
        privfed_server::serve(listener, state, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (url, tx, h)
}

/// A creation request with no initialization spread, no spam filter and no update guard (these
/// tests post arbitrary finite vectors: no step to check).
pub fn spec(name: &str, dim: usize, k: usize) -> CreateModel {
    CreateModel::unguarded(name, dim, k)
}
