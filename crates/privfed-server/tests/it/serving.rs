//! A server on a loopback socket with tunable limits, and raw-socket helpers, shared by the
//! `limits` tests and the `resources` test binary.

use crate::common;
use privfed_client::client::Client;
use privfed_server::{AppState, EmbeddedStore, ServeConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const TOKEN: &str = "limits-token";

/// A server on 127.0.0.1 with the embedded store in a temporary directory.
pub struct Srv {
    pub addr: SocketAddr,
    pub state: Option<Arc<AppState<EmbeddedStore>>>,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
    pub dir: common::TempDir,
}

impl Srv {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn admin(&self) -> Client {
        Client::new(&self.url()).unwrap().with_admin_token(TOKEN)
    }

    pub fn state(&self) -> &AppState<EmbeddedStore> {
        self.state.as_ref().unwrap()
    }
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub async fn start(config: ServeConfig, tweak: impl FnOnce(&mut AppState<EmbeddedStore>)) -> Srv {
    let dir = common::TempDir::new("limits");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    start_with(dir, store, config, tweak).await
}

/// [`start`] with a store already opened in `dir`.
pub async fn start_with(
    dir: common::TempDir,
    store: EmbeddedStore,
    config: ServeConfig,
    tweak: impl FnOnce(&mut AppState<EmbeddedStore>),
) -> Srv {
    let mut state = AppState::new(store, TOKEN);
    tweak(&mut state);
    let state = Arc::new(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(privfed_server::serve_with(
        listener,
        state.clone(),
        async {
            let _ = rx.await;
        },
        config,
    ));
    Srv {
        addr,
        state: Some(state),
        stop: Some(tx),
        task,
        dir,
    }
}

/// Reads until the server closes the connection (EOF or reset); `None` if it is still open after
/// `within`. Returns what was read.
pub async fn read_until_closed(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(got),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// One request on a fresh connection with `Connection: close`; the whole answer as text.
pub async fn raw(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let got = read_until_closed(&mut s, secs(30)).await.expect("answer");
    String::from_utf8_lossy(&got).into_owned()
}

pub fn status_of(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:.200}"))
}

pub fn fast(f: impl FnOnce(&mut ServeConfig)) -> ServeConfig {
    let mut c = ServeConfig::default();
    f(&mut c);
    c
}
