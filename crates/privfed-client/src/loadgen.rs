//! The load generator: `C` concurrent simulated devices, each repeatedly drawing an instance,
//! taking a noisy local step on synthetic data (paper 003 Alg. 1 through
//! [`privfed_ddml::client::ClientStep`]) and posting the result, for a fixed duration.
//!
//! * Synthetic data: a pool of 256 examples with features uniform on `[0, 1]^dim` and label
//!   `y = 1[x_0 > ½]`, generated once; each step uses `N_c` examples picked uniformly from the
//!   pool, for a logistic model (gradient `(σ(w·x) − y)·x`), clipped, with Laplace noise of scale
//!   `2γ/ε`.
//! * Latency of an update = time of its draw request + time of its post request (the local step
//!   is not included). Updates that complete during the warm-up are not counted.
//! * `errors` counts transport failures and answers other than 200/202/422; `rejected` counts 422.
//! * Each device keeps one keep-alive connection ([`crate::conn::Conn`], a lean HTTP/1.1 client:
//!   the general [`Client`] would cost as much CPU per request as the server) and reconnects
//!   after an error.

use crate::client::{Client, ClientError};
use crate::conn::{Conn, WireError};
use privfed_ddml::client::{ClientNoise, ClientStep, PrivacyUnit};
use privfed_ddml::wire::{decode_f32, encode_f32_into};
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Examples in the shared synthetic pool.
const POOL: usize = 256;

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadgenConfig {
    /// Base URL of the server.
    pub server: String,
    /// Model name (ignored with `ceiling`).
    pub model: String,
    /// Concurrent devices.
    pub concurrency: usize,
    /// Measured duration.
    pub duration: Duration,
    /// Warm-up before measuring.
    pub warmup: Duration,
    /// Use JSON bodies instead of raw `f32`.
    pub json_wire: bool,
    /// Load the ceiling routes `/bench/{dim}` (needs `dim`) instead of a model.
    pub ceiling_dim: Option<usize>,
    /// Skip the local step (post the drawn weights back unchanged).
    pub skip_local_step: bool,
    /// Learning rate γ.
    pub learning_rate: f64,
    /// ε of the Laplace noise.
    pub epsilon: f64,
    /// Examples per local step `N_c`.
    pub examples_per_client: usize,
    /// Seed of the devices' generators (OS entropy when `None`).
    pub seed: Option<u64>,
}

impl LoadgenConfig {
    /// Defaults: 1 s warm-up, binary wire format, γ = 0.005, ε = ln 32, `N_c` = 10.
    pub fn new(server: &str, model: &str, concurrency: usize, duration: Duration) -> Self {
        Self {
            server: server.to_string(),
            model: model.to_string(),
            concurrency,
            duration,
            warmup: Duration::from_secs(1),
            json_wire: false,
            ceiling_dim: None,
            skip_local_step: false,
            learning_rate: 0.005,
            epsilon: 32f64.ln(),
            examples_per_client: 10,
            seed: None,
        }
    }
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct LoadgenReport {
    /// `model` or `ceiling`.
    pub target: String,
    /// `binary` or `json`.
    pub wire: String,
    /// Weights per model.
    pub dim: usize,
    /// Concurrent devices.
    pub concurrency: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Completed updates (draw + post answered 202 or 422) in the measured window.
    pub updates: u64,
    /// `updates / duration_s`.
    pub updates_per_second: f64,
    /// Median update latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Updates rejected by the spam filter (422).
    pub rejected: u64,
    /// Failed requests.
    pub errors: u64,
}

/// Errors of the load generator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadgenError {
    /// Bad configuration.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The server could not be reached or the model not read.
    #[error(transparent)]
    Client(#[from] ClientError),
}

struct Pool {
    dim: usize,
    x: Vec<f32>,
    y: Vec<f32>,
}

#[derive(Default)]
struct WorkerResult {
    latencies_us: Vec<u32>,
    rejected: u64,
    errors: u64,
}

fn local_step(
    step: &ClientStep,
    pool: &Pool,
    nc: usize,
    drawn: &[f32],
    rng: &mut rand::rngs::ChaCha20Rng,
) -> Vec<f32> {
    let d = pool.dim;
    let mut g = vec![0.0f64; d];
    for _ in 0..nc {
        let e = rng.random_range(0..POOL);
        let x = &pool.x[e * d..(e + 1) * d];
        let z: f64 = drawn
            .iter()
            .zip(x)
            .map(|(w, x)| (*w as f64) * (*x as f64))
            .sum();
        let p = 1.0 / (1.0 + (-z).exp());
        let r = p - pool.y[e] as f64;
        for (gj, xj) in g.iter_mut().zip(x) {
            *gj += r * *xj as f64;
        }
    }
    for gj in &mut g {
        *gj /= nc as f64;
    }
    let model: Vec<f64> = drawn.iter().map(|&w| w as f64).collect();
    match step.privatize_step(&model, &g, rng) {
        Ok(v) => v.into_iter().map(|w| w as f32).collect(),
        // Cannot happen: lengths match and the drawn weights are finite; post them unchanged.
        Err(_) => drawn.to_vec(),
    }
}

/// `HOST:PORT` of an `http://` base URL (port 80 if absent).
fn host_port(url: &str) -> Result<String, LoadgenError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        LoadgenError::Config(format!(
            "server URL `{url}` must start with http:// (the load generator speaks plain HTTP/1.1)"
        ))
    })?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(LoadgenError::Config(format!(
            "server URL `{url}` has no host"
        )));
    }
    Ok(if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    })
}

#[derive(serde::Deserialize)]
struct WeightsBody {
    weights: Vec<f32>,
}

/// One draw on `c`; an answer other than 200 with `dim` weights is an error.
async fn draw(
    c: &mut Conn,
    path: &str,
    json: bool,
    dim: usize,
) -> Result<(Vec<f32>, Option<String>), WireError> {
    let a = if json {
        c.request("GET", path, &[], &[]).await?
    } else {
        c.request("GET", path, &["Accept: application/octet-stream"], &[])
            .await?
    };
    if a.status != 200 {
        return Err(WireError::Protocol(format!("draw answered {}", a.status)));
    }
    let w = if json {
        serde_json::from_slice::<WeightsBody>(&a.body)
            .map_err(|e| WireError::Protocol(e.to_string()))?
            .weights
    } else {
        decode_f32(&a.body).ok_or_else(|| WireError::Protocol("odd binary length".into()))?
    };
    if w.len() != dim {
        return Err(WireError::Protocol(format!("draw has {} weights", w.len())));
    }
    Ok((w, a.ticket))
}

/// One update on `c`: `Ok(true)` for 202, `Ok(false)` for 422 (spam filter), else an error.
async fn submit(
    c: &mut Conn,
    path: &str,
    json: bool,
    ticket: Option<&str>,
    w: &[f32],
    body: &mut Vec<u8>,
) -> Result<bool, WireError> {
    body.clear();
    let ticket_line = ticket.map(|t| format!("Privfed-Ticket: {t}"));
    let mut headers: [&str; 2] = ["", ""];
    let n = match &ticket_line {
        Some(t) => {
            headers[1] = t;
            2
        }
        None => 1,
    };
    let a = if json {
        serde_json::to_writer(&mut *body, &serde_json::json!({ "weights": w }))
            .map_err(|e| WireError::Protocol(e.to_string()))?;
        headers[0] = "Content-Type: application/json";
        c.request("POST", path, &headers[..n], body).await?
    } else {
        encode_f32_into(w, body);
        headers[0] = "Content-Type: application/octet-stream";
        c.request("POST", path, &headers[..n], body).await?
    };
    match a.status {
        202 => Ok(true),
        422 => Ok(false),
        s => Err(WireError::Protocol(format!("update answered {s}"))),
    }
}

/// Runs the load and reports (see the [module documentation](self)).
pub async fn run(cfg: &LoadgenConfig) -> Result<LoadgenReport, LoadgenError> {
    if cfg.concurrency == 0 {
        return Err(LoadgenError::Config("concurrency must be ≥ 1".into()));
    }
    if cfg.duration.is_zero() {
        return Err(LoadgenError::Config("duration must be > 0".into()));
    }
    if cfg.examples_per_client == 0 {
        return Err(LoadgenError::Config(
            "examples per client must be ≥ 1".into(),
        ));
    }
    let client = Client::new(&cfg.server)?;
    // Fail early with a clear message on an unusable URL.
    host_port(&cfg.server)?;
    let (dim, draw_path, post_path) = match cfg.ceiling_dim {
        Some(d) => (d, format!("/bench/{d}"), format!("/bench/{d}")),
        None => {
            let info = client.model(&cfg.model).await?;
            (
                info.dim,
                format!("/v1/models/{}/draw", cfg.model),
                format!("/v1/models/{}/updates", cfg.model),
            )
        }
    };
    let step = ClientStep::new(
        cfg.learning_rate,
        ClientNoise::Laplace {
            epsilon: cfg.epsilon,
        },
        PrivacyUnit::Feature,
        dim,
    )
    .map_err(|e| LoadgenError::Config(e.to_string()))?;
    let mut seed_rng = match cfg.seed {
        Some(s) => rand::rngs::ChaCha20Rng::seed_from_u64(s),
        None => rand::rngs::ChaCha20Rng::from_rng(&mut rand::rng()),
    };
    let pool = {
        let mut x = vec![0.0f32; POOL * dim];
        for v in &mut x {
            *v = seed_rng.random::<f32>();
        }
        let y = (0..POOL)
            .map(|e| if x[e * dim] > 0.5 { 1.0 } else { 0.0 })
            .collect();
        Arc::new(Pool { dim, x, y })
    };
    let step = Arc::new(step);
    let addr = Arc::new(host_port(&cfg.server)?);
    let (draw_path, post_path) = (Arc::new(draw_path), Arc::new(post_path));
    let max_body = 64 + 32 * dim;
    let start = Instant::now();
    let measure_from = start + cfg.warmup;
    let end = measure_from + cfg.duration;
    let mut handles = Vec::with_capacity(cfg.concurrency);
    for _ in 0..cfg.concurrency {
        let pool = pool.clone();
        let step = step.clone();
        let (addr, draw_path, post_path) = (addr.clone(), draw_path.clone(), post_path.clone());
        let json_wire = cfg.json_wire;
        let skip = cfg.skip_local_step;
        let nc = cfg.examples_per_client;
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(seed_rng.random());
        handles.push(tokio::spawn(async move {
            let mut res = WorkerResult::default();
            let mut conn: Option<Conn> = None;
            let mut body = Vec::with_capacity(4 * dim);
            while Instant::now() < end {
                if conn.as_ref().is_none_or(Conn::is_closed) {
                    match Conn::connect(&addr, max_body).await {
                        Ok(c) => conn = Some(c),
                        Err(_) => {
                            res.errors += 1;
                            // Do not spin on a refused connection.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    }
                }
                let Some(c) = conn.as_mut() else { continue };
                let t0 = Instant::now();
                let drawn = draw(c, &draw_path, json_wire, dim).await;
                let (drawn, ticket) = match drawn {
                    Ok(w) => w,
                    Err(_) => {
                        res.errors += 1;
                        conn = None;
                        continue;
                    }
                };
                let t_draw = t0.elapsed();
                let update = if skip {
                    drawn
                } else {
                    local_step(&step, &pool, nc, &drawn, &mut rng)
                };
                let t1 = Instant::now();
                let sent = submit(
                    c,
                    &post_path,
                    json_wire,
                    ticket.as_deref(),
                    &update,
                    &mut body,
                )
                .await;
                let done = Instant::now();
                let lat = t_draw + (done - t1);
                let counted = done >= measure_from && done <= end;
                match sent {
                    Ok(accepted) => {
                        if counted {
                            res.latencies_us
                                .push(lat.as_micros().min(u32::MAX as u128) as u32);
                            if !accepted {
                                res.rejected += 1;
                            }
                        }
                    }
                    Err(_) => {
                        res.errors += 1;
                        conn = None;
                    }
                }
            }
            res
        }));
    }
    let mut lat = Vec::new();
    let (mut rejected, mut errors) = (0, 0);
    for h in handles {
        let r = h
            .await
            .map_err(|e| LoadgenError::Config(format!("a worker failed: {e}")))?;
        lat.extend(r.latencies_us);
        rejected += r.rejected;
        errors += r.errors;
    }
    lat.sort_unstable();
    let q = |p: f64| -> f64 {
        if lat.is_empty() {
            return f64::NAN;
        }
        let i = ((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1;
        lat[i] as f64 / 1000.0
    };
    let secs = cfg.duration.as_secs_f64();
    Ok(LoadgenReport {
        target: if cfg.ceiling_dim.is_some() {
            "ceiling".into()
        } else {
            "model".into()
        },
        wire: if cfg.json_wire {
            "json".into()
        } else {
            "binary".into()
        },
        dim,
        concurrency: cfg.concurrency,
        duration_s: secs,
        updates: lat.len() as u64,
        updates_per_second: lat.len() as f64 / secs,
        p50_ms: q(0.5),
        p99_ms: q(0.99),
        p999_ms: q(0.999),
        rejected,
        errors,
    })
}
