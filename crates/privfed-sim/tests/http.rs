//! [`HttpModelServer`] (the simulator's server side over HTTP) against the real server on a
//! socket with the embedded store. The test functions are synchronous, as the simulator is; the
//! server runs on its own runtime's worker thread.

use privfed_client::client::Client;
use privfed_ddml::client::{ClientNoise, PrivacyUnit};
use privfed_ddml::engine::{Outcome, Strategy};
use privfed_ddml::wire::CreateModel;
use privfed_fl::datasets::synthetic_production;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use privfed_server::{AppState, EmbeddedStore};
use privfed_sim::http::{HttpModelServer, RemoteError};
use privfed_sim::simulate::{ModelServer, SimConfig, initial_std, simulate};
use privfed_testkit::sys::TempDir;
use std::sync::Arc;
use tokio::runtime::Runtime;

const TOKEN: &str = "sim-token";

/// A server on 127.0.0.1 (OS-chosen port), stopped on drop.
struct Live {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _rt: Runtime,
    _dir: TempDir,
}

impl Live {
    fn start() -> Self {
        let dir = TempDir::new("sim-http");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (url, tx) = rt.block_on(async {
            let store = EmbeddedStore::create(&dir.0).unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let state = Arc::new(AppState::new(store, TOKEN));
            tokio::spawn(async move {
                privfed_server::serve(listener, state, async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
            });
            (url, tx)
        });
        Self {
            url,
            stop: Some(tx),
            _rt: rt,
            _dir: dir,
        }
    }

    fn admin(&self) -> Client {
        Client::new(&self.url).unwrap().with_admin_token(TOKEN)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// A creation request with this initialization spread and spam band and no update guard (these
/// tests post arbitrary finite vectors: no step to check).
fn spec(name: &str, dim: usize, k: usize, init_std: f64, spam: Option<f64>) -> CreateModel {
    CreateModel {
        init_std: Some(init_std),
        spam_sigmas: spam,
        ..CreateModel::unguarded(name, dim, k)
    }
}

fn status(e: &RemoteError) -> Option<u16> {
    match e {
        RemoteError::Client(c) => c.status(),
        _ => None,
    }
}

#[test]
fn draw_submit_read_and_errors_over_http() {
    let live = Live::start();
    let mut rng = seeded_rng_for_experiments(1);
    let mut srv = HttpModelServer::create(live.admin(), &spec("m", 3, 4, 0.5, None)).unwrap();
    assert_eq!((srv.k(), srv.dim(), srv.name()), (4, 3, "m"));
    assert_eq!(srv.strategy(), Strategy::DrawAndDiscard);
    let d = srv.draw(&mut rng).unwrap();
    assert_eq!(d.index, None);
    assert_eq!(d.weights.len(), 3);
    // The initialization is N(0, 0.25): not all zero.
    assert!(d.weights.iter().any(|w| *w != 0.0));
    let update = vec![1.5, -2.0, 0.25];
    assert_eq!(
        srv.submit(&d, &update, &mut rng).unwrap(),
        Outcome::Accepted
    );
    let info = srv.info().unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (1, 0));
    assert_eq!(srv.mean_model().unwrap(), info.mean);
    assert_eq!(
        srv.intra_model_variance().unwrap(),
        info.intra_model_variance
    );
    // The update (exact in f32) overwrote one instance: drawing often enough finds it
    // (missing it in 200 draws has probability (3/4)^200 ≈ 1e-25).
    assert!((0..200).any(|_| srv.draw(&mut rng).unwrap().weights == update));
    // A weight beyond the f32 range: the server answers 400, an error, not an outcome. (With a
    // fresh draw: a used ticket is answered with its first outcome before any body is read.)
    let fresh = srv.draw(&mut rng).unwrap();
    let e = srv.submit(&fresh, &[1e39, 0.0, 0.0], &mut rng).unwrap_err();
    assert_eq!(status(&e), Some(400), "{e}");
    // The same name again: 409; a wrong token: 403; no token: 401; an unknown model: 404.
    let e = HttpModelServer::create(live.admin(), &spec("m", 3, 4, 0.5, None)).unwrap_err();
    assert_eq!(status(&e), Some(409), "{e}");
    let wrong = Client::new(&live.url).unwrap().with_admin_token("nope");
    let e = HttpModelServer::create(wrong, &spec("x", 3, 4, 0.5, None)).unwrap_err();
    assert_eq!(status(&e), Some(403), "{e}");
    let anon = Client::new(&live.url).unwrap();
    let e = HttpModelServer::create(anon.clone(), &spec("x", 3, 4, 0.5, None)).unwrap_err();
    assert_eq!(status(&e), Some(401), "{e}");
    let e = HttpModelServer::attach(anon.clone(), "x").unwrap_err();
    assert_eq!(status(&e), Some(404), "{e}");
    // Attaching reads k and dim; deleting removes the model.
    let other = HttpModelServer::attach(anon, "m").unwrap();
    assert_eq!((other.k(), other.dim()), (4, 3));
    srv.delete().unwrap();
    let mut other = other;
    let e = other.draw(&mut rng).unwrap_err();
    assert_eq!(status(&e), Some(404), "{e}");
}

#[test]
fn spam_rejections_come_back_with_their_reason() {
    let live = Live::start();
    let mut rng = seeded_rng_for_experiments(2);
    let mut srv = HttpModelServer::create(live.admin(), &spec("s", 5, 10, 1.0, Some(3.0))).unwrap();
    let d = srv.draw(&mut rng).unwrap();
    let mean = srv.mean_model().unwrap();
    assert_eq!(srv.submit(&d, &mean, &mut rng).unwrap(), Outcome::Accepted);
    let mut bad = srv.mean_model().unwrap();
    bad[2] += 1000.0;
    // A fresh draw: the first draw's ticket is used (its retry would replay "accepted").
    let d = srv.draw(&mut rng).unwrap();
    let Outcome::Rejected(r) = srv.submit(&d, &bad, &mut rng).unwrap() else {
        panic!("expected a rejection");
    };
    assert_eq!((r.outside, r.allowed, r.dim, r.worst_index), (1, 0, 5, 2));
    assert_eq!(r.sigmas, 3.0);
    assert!(r.worst_sigmas > 100.0, "{r:?}");
    let info = srv.info().unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (1, 1));
}

/// Inside an async runtime the adapter refuses (an error, not a panic), and dropping it there
/// does not panic either.
#[test]
fn refuses_to_block_inside_a_runtime() {
    let live = Live::start();
    let mut srv = HttpModelServer::create(live.admin(), &spec("r", 2, 2, 0.1, None)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let url = live.url.clone();
    rt.block_on(async move {
        let mut rng = seeded_rng_for_experiments(3);
        assert!(matches!(
            srv.draw(&mut rng),
            Err(RemoteError::InsideRuntime)
        ));
        assert!(matches!(
            HttpModelServer::attach(Client::new(&url).unwrap(), "r"),
            Err(RemoteError::InsideRuntime)
        ));
        drop(srv);
    });
    // Still usable from a plain thread.
    let mut srv = HttpModelServer::attach(Client::new(&live.url).unwrap(), "r").unwrap();
    assert!(srv.draw(&mut seeded_rng_for_experiments(4)).is_ok());
}

/// The simulator end to end over HTTP: 2,000 synthetic rows, k = 5, Laplace ε = 2, N_c = 10, one
/// pass (200 updates). Every update reached the server, the report's counters are the server's,
/// and its evaluation used the server's instances (mean and intra-model variance equal to what
/// the server reports afterwards).
#[test]
fn simulate_against_a_live_server() {
    let live = Live::start();
    let mut rng = seeded_rng_for_experiments(5);
    let data = synthetic_production(2000, 1000, &mut rng).unwrap();
    let mut cfg = SimConfig::paper_defaults(5);
    cfg.noise = ClientNoise::Laplace { epsilon: 2.0 };
    cfg.unit = PrivacyUnit::Feature;
    cfg.learning_rate = 0.2;
    cfg.passes = 2;
    let std = initial_std(&data, &cfg).unwrap();
    let mut srv = HttpModelServer::create(live.admin(), &spec("sim", 33, 5, std, None)).unwrap();
    let r = simulate(&data, &cfg, &mut srv, &mut rng, |_| {}).unwrap();
    assert_eq!(r.updates, 400);
    assert_eq!(
        (r.server.accepted, r.server.rejected, r.server.overwrites),
        (400, 0, 400)
    );
    let info = srv.info().unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (400, 0));
    assert_eq!(r.mean_weights, info.mean);
    assert_eq!(r.intra_model_variance, info.intra_model_variance);
    assert_eq!(r.curve.len(), 2);
    assert!(r.privacy.is_some());
    // Another strategy cannot run against the server.
    cfg.strategy = Strategy::ReplaceDrawn;
    assert!(matches!(
        simulate(&data, &cfg, &mut srv, &mut rng, |_| {}),
        Err(RemoteError::Learn(_))
    ));
    // Nothing was sent.
    assert_eq!(srv.info().unwrap().updates_accepted, 400);
}
