//! The HTTP API (routes in the crate documentation), generic over the [`Store`].

use crate::ddml::model::{
    CreateModel, ModelSpec, encode_f32, f64_to_f32_weights, validate_name, validate_weights,
};
use crate::ddml::store::{Admission, Store, SubmitOutcome};
use crate::ddml::ticket::{TICKET_HEADER, Ticket};
use crate::http::auth::check_admin;
use crate::http::body::{BodyBudget, DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, declared_length, read_body};
use crate::http::defence::Defence;
use crate::http::error::StoreUnavailable;
use crate::http::error::{ApiError, StoreError};
use crate::http::extract::Peer;
use crate::http::metrics::Metrics;
use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use privfed_ddml::engine::{InstanceStats, initialize_with_std};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

/// Largest body of `POST /v1/models`.
pub const ADMIN_BODY_LIMIT: usize = 64 * 1024;

/// Default cap on the total size of all models' weights (`4·dim·k` bytes summed over models):
/// 2 GiB. The embedded store holds about twice that in memory (each instance also kept in its
/// wire encoding), so the default keeps a full server near 4 GiB of RAM.
pub const DEFAULT_MAX_MODEL_BYTES: u64 = 2 << 30;

/// Models with more floats than this (`dim·k`) have their `GET /v1/models/{name}` view rendered
/// off the async workers, at most [`HEAVY_READS`] at a time, and cached for [`VIEW_TTL`].
pub const SMALL_VIEW_FLOATS: usize = 1 << 18;

/// Renders of large model views running at once; a request that finds no fresh cached view and
/// waits [`HEAVY_READ_WAIT`] for a render slot is answered 503 with `Retry-After`.
pub const HEAVY_READS: usize = 2;

/// Longest wait for a render slot of a large model view.
pub const HEAVY_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a rendered view of a large model is served from cache (its counters and mean may be
/// this much behind).
pub const VIEW_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// JSON draws of models with more weights than this are streamed in chunks, so an unread answer
/// holds one chunk besides the instance bytes shared with the store.
pub const STREAM_JSON_FLOATS: usize = 1 << 14;

/// Shared state of the handlers.
pub struct AppState<S> {
    /// The store.
    pub store: S,
    /// The admin bearer token.
    pub admin_token: String,
    /// Metrics of this process.
    pub metrics: Metrics,
    /// Whether the benchmark ceiling routes (`/bench/{dim}`) are mounted.
    pub bench_routes: bool,
    /// Per-client limit on draws and updates (`None`: unlimited); see [`crate::http::ratelimit`].
    pub rate_limit: Option<crate::http::ratelimit::RateLimiter>,
    /// Cap on the total size of all models' weights in bytes (`4·dim·k` summed); creating a model
    /// beyond it answers 507. Default [`DEFAULT_MAX_MODEL_BYTES`].
    pub max_model_bytes: u64,
    /// The secure-aggregation coordinator, whose routes (`/v1/secagg/…`, see
    /// [`crate::secagg::api`]) are mounted when it is set.
    pub secagg: Option<Arc<crate::secagg::Coordinator>>,
    /// Caps the tickets each client address holds (`None`: no cap); see
    /// [`crate::ddml::ticket::DrawQuota`].
    pub draw_quota: Option<crate::ddml::ticket::DrawQuota>,
    /// Bytes of update bodies read at once, at most (default
    /// [`DEFAULT_MAX_BODY_BYTES_IN_FLIGHT`]); an update that finds no room within
    /// [`BODY_BUDGET_WAIT`](crate::http::body::BODY_BUDGET_WAIT) answers 503. It bounds what anonymous posts to models without an
    /// update guard can hold in memory.
    pub body_budget: BodyBudget,
    /// The defences' counters and log lines.
    pub defences: crate::http::defence::Defences,
    /// The store outage in progress, if any (503s are logged per transition).
    outage: std::sync::Mutex<Option<Outage>>,
    /// Whether `outage` is set (read on every request without the lock).
    outage_active: std::sync::atomic::AtomicBool,
    /// Rendered views of large models (see [`SMALL_VIEW_FLOATS`]).
    views: std::sync::Mutex<std::collections::HashMap<String, CachedView>>,
    /// Bounds renders of large views ([`HEAVY_READS`]).
    heavy_reads: tokio::sync::Semaphore,
}

/// A store outage in progress: since when, and how many requests it refused.
#[derive(Debug)]
struct Outage {
    since: Instant,
    refused: u64,
}

/// A rendered `GET /v1/models/{name}` answer of a large model.
struct CachedView {
    generation: u64,
    at: Instant,
    body: bytes::Bytes,
}

impl<S: Store> AppState<S> {
    /// State with the given store and admin token, metrics zeroed, no bench routes.
    pub fn new(store: S, admin_token: impl Into<String>) -> Self {
        Self {
            store,
            admin_token: admin_token.into(),
            metrics: Metrics::default(),
            bench_routes: false,
            max_model_bytes: DEFAULT_MAX_MODEL_BYTES,
            rate_limit: None,
            secagg: None,
            draw_quota: Some(crate::ddml::ticket::DrawQuota::new(
                crate::ddml::ticket::DEFAULT_TICKETS_PER_CLIENT,
                crate::ddml::ticket::DEFAULT_TICKET_MIN_AGE,
            )),
            body_budget: BodyBudget::new(DEFAULT_MAX_BODY_BYTES_IN_FLIGHT),
            defences: Default::default(),
            outage: Default::default(),
            outage_active: Default::default(),
            views: Default::default(),
            heavy_reads: tokio::sync::Semaphore::new(HEAVY_READS),
        }
    }

    /// Logs a store outage once when it starts (WARN, with its cause) and once when it ends
    /// (INFO, with how long it lasted and how many requests it refused), not once per request.
    fn note_store(&self, unavailable: Option<&StoreUnavailable>) {
        let mut o = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        match (unavailable, o.as_mut()) {
            (Some(u), None) => {
                tracing::warn!(detail = %u.0, "store unavailable: answering 503 until it recovers");
                *o = Some(Outage {
                    since: Instant::now(),
                    refused: 1,
                });
                self.outage_active
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            (Some(_), Some(out)) => out.refused += 1,
            (None, Some(out)) => {
                tracing::info!(
                    after_ms = out.since.elapsed().as_millis() as u64,
                    refused = out.refused,
                    "store available again"
                );
                *o = None;
                self.outage_active
                    .store(false, std::sync::atomic::Ordering::Relaxed);
            }
            (None, None) => {}
        }
    }
}

/// The router with every route, the metrics layer and JSON fallbacks for unknown routes and
/// methods.
pub fn router<S: Store>(state: Arc<AppState<S>>) -> Router {
    let mut r = Router::new()
        .route("/v1/models", post(create_model::<S>))
        .route(
            "/v1/models/{name}",
            get(get_model::<S>).delete(delete_model::<S>),
        )
        .route("/v1/models/{name}/draw", get(draw::<S>))
        .route("/v1/models/{name}/updates", post(post_update::<S>))
        .route("/healthz", get(healthz::<S>))
        .route("/metrics", get(metrics::<S>))
        .route("/openapi.json", get(openapi));
    if state.bench_routes {
        r = r.route("/bench/{dim}", get(bench_draw).post(bench_update));
    }
    let mut r: Router = r.with_state(state.clone());
    if let Some(coordinator) = &state.secagg {
        r = r.merge(crate::secagg::api::router(coordinator.clone()));
    }
    // `layer` (not `route_layer`) after the fallbacks: unknown routes (404) and methods (405)
    // are counted too.
    r.fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state, track::<S>))
}

/// Counts every request in the metrics and logs it at DEBUG (method, route template, status,
/// latency in µs; one event, cheap when DEBUG is off).
async fn track<S: Store>(State(st): State<Arc<AppState<S>>>, req: Request, next: Next) -> Response {
    let route = crate::http::metrics::route_index(
        req.extensions()
            .get::<MatchedPath>()
            .map_or("other", |p| p.as_str()),
    );
    let method = req.method().clone();
    let t0 = Instant::now();
    let resp = next.run(req).await;
    let elapsed = t0.elapsed();
    let status = resp.status().as_u16();
    st.metrics
        .record_index(route, status, elapsed.as_secs_f64());
    let unavailable = resp.extensions().get::<StoreUnavailable>();
    if unavailable.is_some()
        || (st.outage_active.load(std::sync::atomic::Ordering::Relaxed)
            && (200..300).contains(&status)
            && route != crate::http::metrics::route_index("/metrics"))
    {
        st.note_store(unavailable);
    }
    tracing::debug!(
        target: "privfed_server::request",
        %method,
        route = crate::http::metrics::ROUTES[route.min(crate::http::metrics::ROUTES.len() - 1)],
        status,
        latency_us = elapsed.as_micros() as u64,
        "request"
    );
    resp
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route".into())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// A `{name}` path segment, validated; extraction failures become JSON errors like any other.
struct ModelName(String);

impl<St: Send + Sync> FromRequestParts<St> for ModelName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, ApiError> {
        let Path(name) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(format!("invalid path: {}", e.body_text())))?;
        validate_name(&name)?;
        Ok(ModelName(name))
    }
}

/// Takes a token of the client's rate limit, if the server has one.
fn rate_limited<S>(st: &AppState<S>, peer: &Peer) -> Result<(), ApiError> {
    match (&st.rate_limit, peer.0) {
        (Some(r), Some(ip)) => r.take(ip).map_err(|wait| {
            st.defences.fired(Defence::RateLimit, Some(ip));
            ApiError::RateLimited(wait)
        }),
        _ => Ok(()),
    }
}

/// A `{dim}` path segment of the ceiling routes.
struct Dim(usize);

impl<St: Send + Sync> FromRequestParts<St> for Dim {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, ApiError> {
        let Path(dim) = Path::<usize>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(format!("invalid path: {}", e.body_text())))?;
        if dim == 0 || dim > crate::ddml::model::MAX_DIM {
            return Err(ApiError::BadRequest("bad dim".into()));
        }
        Ok(Dim(dim))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsIn {
    weights: Vec<f64>,
}

#[derive(Serialize)]
struct WeightsOut<'a> {
    weights: &'a [f32],
}

enum Format {
    Json,
    Binary,
}

fn content_format(headers: &HeaderMap) -> Result<Format, ApiError> {
    match headers.get(header::CONTENT_TYPE) {
        None => Ok(Format::Json),
        Some(v) => {
            let s = v.to_str().unwrap_or("");
            let mime = s.split(';').next().unwrap_or("").trim();
            if mime.eq_ignore_ascii_case("application/json") {
                Ok(Format::Json)
            } else if mime.eq_ignore_ascii_case("application/octet-stream") {
                Ok(Format::Binary)
            } else {
                Err(ApiError::UnsupportedMediaType(
                    s.chars().take(100).collect(),
                ))
            }
        }
    }
}

fn wants_binary(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/octet-stream"))
}

/// Reads and validates an update body (JSON `{"weights": [...]}` or raw little-endian `f32`) of
/// at most `limit` bytes.
async fn read_weights(
    headers: &HeaderMap,
    format: Format,
    body: Body,
    dim: usize,
    limit: usize,
) -> Result<Vec<f32>, ApiError> {
    let bytes = read_body(headers, body, limit).await?;
    let weights = match format {
        Format::Json => {
            let w: WeightsIn = serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
            f64_to_f32_weights(&w.weights)?
        }
        Format::Binary => crate::ddml::model::decode_f32(&bytes).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "binary body of {} bytes is not a whole number of f32",
                bytes.len()
            ))
        })?,
    };
    validate_weights(&weights, dim)?;
    Ok(weights)
}

/// [`weights_response`] for weights already in the binary format.
fn encoded_weights_response(headers: &HeaderMap, le: bytes::Bytes) -> Result<Response, ApiError> {
    if wants_binary(headers) {
        Ok((
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            )],
            le,
        )
            .into_response())
    } else if !le.len().is_multiple_of(4) {
        Err(ApiError::Internal(
            "stored instance has an odd length".into(),
        ))
    } else if le.len() / 4 > STREAM_JSON_FLOATS {
        let mut resp = Body::new(JsonWeightsBody { le, pos: 0 }).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(resp)
    } else {
        let w = crate::ddml::model::decode_f32(&le)
            .ok_or_else(|| ApiError::Internal("stored instance has an odd length".into()))?;
        weights_response(headers, &w)
    }
}

/// A JSON draw `{"weights":[…]}` produced in chunks from the shared instance bytes (the same
/// text as serializing the whole answer), so a slow or absent reader holds one chunk.
struct JsonWeightsBody {
    le: bytes::Bytes,
    /// Next float to write; `usize::MAX` once the closing bracket is out.
    pos: usize,
}

/// Floats per chunk of [`JsonWeightsBody`] (about 100 KB of JSON).
const JSON_CHUNK_FLOATS: usize = 8192;

impl http_body::Body for JsonWeightsBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let n = self.le.len() / 4;
        if self.pos == usize::MAX {
            return std::task::Poll::Ready(None);
        }
        let start = self.pos;
        let end = (start + JSON_CHUNK_FLOATS).min(n);
        let mut out = Vec::with_capacity(16 * (end - start) + 16);
        if start == 0 {
            out.extend_from_slice(b"{\"weights\":[");
        }
        for (i, c) in self.le[4 * start..4 * end].chunks_exact(4).enumerate() {
            if start + i > 0 {
                out.push(b',');
            }
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            // Writing a finite f32 into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, &x);
        }
        if end == n {
            out.extend_from_slice(b"]}");
            self.pos = usize::MAX;
        } else {
            self.pos = end;
        }
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(out.into()))))
    }

    fn is_end_stream(&self) -> bool {
        self.pos == usize::MAX
    }
}

fn weights_response(headers: &HeaderMap, w: &[f32]) -> Result<Response, ApiError> {
    if wants_binary(headers) {
        let mut resp = encode_f32(w).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        Ok(resp)
    } else {
        let body = serde_json::to_vec(&WeightsOut { weights: w })
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let mut resp = body.into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(resp)
    }
}

async fn create_model<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    check_admin(&headers, &st.admin_token)?;
    if let Format::Binary = content_format(&headers)? {
        return Err(ApiError::UnsupportedMediaType(
            "application/octet-stream".into(),
        ));
    }
    let bytes = read_body(&headers, body, ADMIN_BODY_LIMIT).await?;
    let req: CreateModel = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    // ThreadRng is not Send: use it before the first await.
    let (spec, init) = {
        let mut rng = rand::rng();
        let spec = ModelSpec::from_request(req, rng.next_u64())?;
        let init = initialize_with_std(&vec![0.0; spec.dim], spec.k, spec.init_std, &mut rng)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        (spec, init)
    };
    let instances: Vec<Vec<f32>> = init
        .into_iter()
        .map(|v| v.into_iter().map(|x| x as f32).collect())
        .collect();
    let view = model_view(&spec);
    check_model_memory(&st, &spec).await?;
    st.store.create_model(spec, instances).await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

fn model_view(spec: &ModelSpec) -> serde_json::Value {
    serde_json::json!({
        "name": spec.name, "dim": spec.dim, "k": spec.k, "init_std": spec.init_std,
        "spam_sigmas": spec.spam.map(|f| f.sigmas()),
        "spam_max_outside_fraction": spec.spam.map(|f| f.max_outside_fraction()),
        "update_guard": match &spec.guard {
            Some(g) => serde_json::to_value(g).unwrap_or_default(),
            None => serde_json::Value::from("off"),
        },
    })
}

async fn delete_model<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_admin(&headers, &st.admin_token)?;
    st.store.delete_model(&name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// 507 if a model of `spec`'s size would take the store past [`AppState::max_model_bytes`].
/// (Checked before the create, not atomically with it: two racing creates may both pass.)
async fn check_model_memory<S: Store>(st: &AppState<S>, spec: &ModelSpec) -> Result<(), ApiError> {
    let have = st.store.total_floats().await?.saturating_mul(4);
    let want = (spec.dim as u64)
        .saturating_mul(spec.k as u64)
        .saturating_mul(4);
    if have.saturating_add(want) > st.max_model_bytes {
        return Err(ApiError::InsufficientStorage(format!(
            "the model needs {want} bytes; the models hold {have} of the server's cap of {} bytes",
            st.max_model_bytes
        )));
    }
    Ok(())
}

/// The body of `GET /v1/models/{name}`.
#[derive(Serialize)]
struct ModelView<'a> {
    name: &'a str,
    dim: usize,
    k: usize,
    init_std: f64,
    spam_sigmas: Option<f64>,
    spam_max_outside_fraction: Option<f64>,
    updates_accepted: u64,
    updates_rejected: u64,
    mean: &'a [f64],
    intra_model_variance: f64,
}

/// Renders a snapshot as JSON: `O(k·dim)` time, `O(dim)` memory besides the snapshot.
fn render_view(snap: &crate::ddml::store::ModelSnapshot) -> Result<bytes::Bytes, ApiError> {
    let stats = InstanceStats::from_instances(&snap.instances)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let means = stats.means();
    let spec = &snap.spec;
    let view = ModelView {
        name: &spec.name,
        dim: spec.dim,
        k: spec.k,
        init_std: spec.init_std,
        spam_sigmas: spec.spam.map(|f| f.sigmas()),
        spam_max_outside_fraction: spec.spam.map(|f| f.max_outside_fraction()),
        updates_accepted: snap.accepted,
        updates_rejected: snap.rejected,
        mean: &means,
        intra_model_variance: stats.intra_model_variance(),
    };
    serde_json::to_vec(&view)
        .map(Into::into)
        .map_err(|e| ApiError::Internal(e.to_string()))
}

fn json_response(body: bytes::Bytes) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// Small models are rendered exactly on each request. Views of large ones are rendered on the
/// blocking pool (the async workers keep answering `/healthz`), at most [`HEAVY_READS`] at once
/// (503 after waiting [`HEAVY_READ_WAIT`] for a slot), and shared for [`VIEW_TTL`] by every reader: concurrent and unread answers
/// hold one copy.
async fn get_model<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
) -> Result<Response, ApiError> {
    let spec = st.store.spec(&name).await?;
    if spec.dim.saturating_mul(spec.k) <= SMALL_VIEW_FLOATS {
        let snap = st.store.snapshot(&name).await?;
        return Ok(json_response(render_view(&snap)?));
    }
    let cached = |st: &AppState<S>| -> Option<bytes::Bytes> {
        let views = st.views.lock().ok()?;
        let v = views.get(&name)?;
        (v.generation == spec.generation && v.at.elapsed() < VIEW_TTL).then(|| v.body.clone())
    };
    if let Some(body) = cached(&st) {
        return Ok(json_response(body));
    }
    // Waiting holds no memory; a request that waits too long is answered 503.
    let _permit = tokio::time::timeout(HEAVY_READ_WAIT, st.heavy_reads.acquire())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| {
            ApiError::Unavailable(format!(
                "{HEAVY_READS} views of large models are being rendered"
            ))
        })?;
    if let Some(body) = cached(&st) {
        return Ok(json_response(body));
    }
    let snap = st.store.snapshot(&name).await?;
    let generation = snap.spec.generation;
    let body = tokio::task::spawn_blocking(move || render_view(&snap))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    if let Ok(mut views) = st.views.lock() {
        views.retain(|_, v| v.at.elapsed() < VIEW_TTL);
        views.insert(
            name,
            CachedView {
                generation,
                at: Instant::now(),
                body: body.clone(),
            },
        );
    }
    Ok(json_response(body))
}

async fn draw<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
    peer: Peer,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    rate_limited(&st, &peer)?;
    // Only draws whose tickets the model's updates need count against the client's quota.
    let quota = match st.draw_quota.as_ref().zip(peer.0) {
        Some(q) if crate::ddml::store::needs_ticket(&*st.store.spec(&name).await?) => Some(q),
        _ => None,
    };
    if let Some((q, ip)) = quota {
        q.draw(ip).map_err(|full| {
            st.defences.fired(Defence::DrawQuota, Some(ip));
            ApiError::TicketsFull(full.retry_after)
        })?;
    }
    let drawn = match st.store.draw(&name).await {
        Ok(d) => d,
        Err(e) => {
            if let Some((q, ip)) = quota {
                // No ticket was issued: the draw does not count against the client.
                q.redeemed(ip);
            }
            if matches!(e, StoreError::TicketsFull(_)) {
                st.defences.fired(Defence::TicketsFull, peer.0);
            }
            return Err(e.into());
        }
    };
    let mut resp = encoded_weights_response(&headers, drawn.weights)?;
    resp.headers_mut()
        .insert(TICKET_HEADER, drawn.ticket.header_value());
    Ok(resp)
}

/// The `Privfed-Ticket` header of an update, if any; 400 if malformed.
fn ticket_of(headers: &HeaderMap) -> Result<Option<Ticket>, ApiError> {
    match headers.get(TICKET_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(Ticket::parse)
            .map(Some)
            .ok_or_else(|| {
                ApiError::BadRequest("the Privfed-Ticket header must be 32 hex digits".into())
            }),
    }
}

/// `POST /v1/models/{name}/updates`. Everything that can refuse the update without its body
/// (rate limit, model, content type, declared length, ticket) is checked before one byte of the
/// body is read; a refused request's body is never read (the connection is then closed).
async fn post_update<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
    peer: Peer,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    rate_limited(&st, &peer)?;
    let ticket = ticket_of(&headers)?;
    let spec = st.store.spec(&name).await?;
    let format = content_format(&headers)?;
    let limit = match format {
        Format::Json => spec.json_body_limit(),
        Format::Binary => spec.binary_body_limit(),
    };
    let declared = declared_length(&headers);
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::PayloadTooLarge(limit));
    }
    let admitted = match st.store.admit(&name, &spec, ticket).await {
        Ok(Admission::Admitted(a)) => a,
        Ok(Admission::Replayed(first)) => return replayed_response(first),
        Err(
            e @ (StoreError::TicketRequired
            | StoreError::TicketInvalid(_)
            | StoreError::TicketInUse),
        ) => {
            st.defences.fired(Defence::UnreadRefused, peer.0);
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    let Some(_room) = st.body_budget.take(declared.unwrap_or(limit)).await else {
        st.defences.fired(Defence::BodyBudget, peer.0);
        st.store.release(admitted).await;
        return Err(ApiError::Unavailable(
            "the budget of update bodies read at once is spent".into(),
        ));
    };
    let weights = match read_weights(&headers, format, body, spec.dim, limit).await {
        Ok(w) => w,
        Err(e) => {
            st.store.release(admitted).await;
            return Err(e);
        }
    };
    drop(_room);
    let outcome = st.store.apply(&name, admitted, weights).await?;
    if ticket.is_some()
        && crate::ddml::store::needs_ticket(&spec)
        && let Some((q, ip)) = st.draw_quota.as_ref().zip(peer.0)
    {
        // The client stepped from a ticket: it holds one fewer.
        q.redeemed(ip);
    }
    match outcome {
        SubmitOutcome::Accepted => {
            st.metrics.accepted();
            Ok(accepted_response(st.store.durable_acks()))
        }
        SubmitOutcome::Rejected(r) => {
            st.metrics.rejected();
            Err(ApiError::Rejected(r))
        }
        SubmitOutcome::Replayed(first) => replayed_response(*first),
    }
}

/// The answer to a retried update: the first outcome of its ticket.
fn replayed_response(first: SubmitOutcome) -> Result<Response, ApiError> {
    match first {
        SubmitOutcome::Rejected(r) => Err(ApiError::Rejected(r)),
        _ => Ok((
            StatusCode::ACCEPTED,
            Json(serde_json::json!({"status": "accepted", "replayed": true})),
        )
            .into_response()),
    }
}

/// `202 {"status":"accepted"}`, or `{"status":"accepted","durable":false}` when the store does
/// not promise that an accepted update survives a crash ([`Store::durable_acks`]); built without
/// serializing (it is the hot path's answer).
fn accepted_response(durable: bool) -> Response {
    (
        StatusCode::ACCEPTED,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        if durable {
            r#"{"status":"accepted"}"#
        } else {
            r#"{"status":"accepted","durable":false}"#
        },
    )
        .into_response()
}

async fn healthz<S: Store>(State(st): State<Arc<AppState<S>>>) -> Response {
    if st.store.healthy().await {
        Json(serde_json::json!({"status": "ok"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "store unavailable"})),
        )
            .into_response()
    }
}

async fn metrics<S: Store>(State(st): State<Arc<AppState<S>>>) -> Response {
    let mut text = st.metrics.render();
    st.defences.render(&mut text);
    if let Some(c) = st.store.commit_stats() {
        crate::http::metrics::render_commits(
            &mut text,
            crate::http::metrics::CommitCounters {
                commits: c.commits,
                operations: c.operations,
                checkpoints: c.checkpoints,
            },
        );
    }
    let mut resp = text.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    resp
}

async fn openapi() -> Json<serde_json::Value> {
    Json(crate::openapi::document())
}

/// Ceiling: answers `dim` zeros in the draw format, touching no store.
async fn bench_draw(Dim(dim): Dim, headers: HeaderMap) -> Result<Response, ApiError> {
    let w = vec![0.0f32; dim];
    weights_response(&headers, &w)
}

/// Ceiling: reads and validates an update exactly like the real route, stores nothing.
async fn bench_update(Dim(dim): Dim, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let format = content_format(&headers)?;
    let limit = match format {
        Format::Json => 64 + 32 * dim,
        Format::Binary => 4 * dim + 1024,
    };
    read_weights(&headers, format, body, dim, limit).await?;
    Ok(accepted_response(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// The streamed JSON draw is byte for byte what serializing the whole answer gives, at and
    /// around chunk boundaries.
    #[test]
    fn streamed_json_matches_serde_json() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for n in [
            1,
            JSON_CHUNK_FLOATS - 1,
            JSON_CHUNK_FLOATS,
            JSON_CHUNK_FLOATS + 1,
            3 * JSON_CHUNK_FLOATS + 7,
        ] {
            let w: Vec<f32> = (0..n)
                .map(|i| (i as f32 - 17.0) * 1.2345e-3 * if i % 3 == 0 { 1e30 } else { 1.0 })
                .collect();
            let body = JsonWeightsBody {
                le: crate::ddml::model::encode_f32(&w).into(),
                pos: 0,
            };
            let got = rt.block_on(body.collect()).unwrap().to_bytes();
            let want = serde_json::to_vec(&WeightsOut { weights: &w }).unwrap();
            assert_eq!(got.as_ref(), want.as_slice(), "n = {n}");
        }
    }
}
