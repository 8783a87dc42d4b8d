//! The HTTP API (routes in the crate documentation), generic over the [`Store`].

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::model::{
    CreateModel, ModelSpec, encode_f32, f64_to_f32_weights, validate_name, validate_weights,
};
use crate::store::{Store, Submission, SubmitOutcome};
use crate::ticket::{TICKET_HEADER, Ticket};
use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use privfed_ddml::engine::{InstanceStats, initialize_with_std};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

/// Largest body of `POST /v1/models`.
pub const ADMIN_BODY_LIMIT: usize = 64 * 1024;

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
}

impl<S: Store> AppState<S> {
    /// State with the given store and admin token, metrics zeroed, no bench routes.
    pub fn new(store: S, admin_token: impl Into<String>) -> Self {
        Self {
            store,
            admin_token: admin_token.into(),
            metrics: Metrics::default(),
            bench_routes: false,
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
    r.route_layer(middleware::from_fn_with_state(state.clone(), track::<S>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn track<S: Store>(State(st): State<Arc<AppState<S>>>, req: Request, next: Next) -> Response {
    let route = crate::metrics::route_index(
        req.extensions()
            .get::<MatchedPath>()
            .map_or("other", |p| p.as_str()),
    );
    let t0 = Instant::now();
    let resp = next.run(req).await;
    st.metrics
        .record_index(route, resp.status().as_u16(), t0.elapsed().as_secs_f64());
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

/// A `{dim}` path segment of the ceiling routes.
struct Dim(usize);

impl<St: Send + Sync> FromRequestParts<St> for Dim {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &St) -> Result<Self, ApiError> {
        let Path(dim) = Path::<usize>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::BadRequest(format!("invalid path: {}", e.body_text())))?;
        if dim == 0 || dim > crate::model::MAX_DIM {
            return Err(ApiError::BadRequest("bad dim".into()));
        }
        Ok(Dim(dim))
    }
}

/// Constant-time comparison of the presented token with the configured one.
fn check_admin(headers: &HeaderMap, token: &str) -> Result<(), ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(ApiError::Unauthorized)?
        .as_bytes();
    let presented = value
        .strip_prefix(b"Bearer ")
        .ok_or(ApiError::Unauthorized)?;
    let expected = token.as_bytes();
    let mut diff = (presented.len() != expected.len()) as u8;
    for (i, &e) in expected.iter().enumerate() {
        diff |= e ^ presented.get(i).copied().unwrap_or(0);
    }
    if diff == 0 && !expected.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Forbidden)
    }
}

async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<bytes::Bytes, ApiError> {
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > limit
    {
        return Err(ApiError::PayloadTooLarge(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::PayloadTooLarge(limit))
        }
        Err(e) => Err(ApiError::BadRequest(format!(
            "could not read the body: {e}"
        ))),
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

/// Reads and validates an update body (JSON `{"weights": [...]}` or raw little-endian `f32`).
async fn read_weights(
    headers: &HeaderMap,
    body: Body,
    dim: usize,
    json_limit: usize,
    binary_limit: usize,
) -> Result<Vec<f32>, ApiError> {
    let weights = match content_format(headers)? {
        Format::Json => {
            let bytes = read_body(headers, body, json_limit).await?;
            let w: WeightsIn = serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
            f64_to_f32_weights(&w.weights)?
        }
        Format::Binary => {
            let bytes = read_body(headers, body, binary_limit).await?;
            crate::model::decode_f32(&bytes).ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "binary body of {} bytes is not a whole number of f32",
                    bytes.len()
                ))
            })?
        }
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
    } else {
        let w = crate::model::decode_f32(&le)
            .ok_or_else(|| ApiError::Internal("stored instance has an odd length".into()))?;
        weights_response(headers, &w)
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

async fn get_model<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
) -> Result<Response, ApiError> {
    let snap = st.store.snapshot(&name).await?;
    let stats = InstanceStats::from_instances(&snap.instances)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut view = model_view(&snap.spec);
    view["updates_accepted"] = snap.accepted.into();
    view["updates_rejected"] = snap.rejected.into();
    view["mean"] = stats.means().into();
    view["intra_model_variance"] = stats.intra_model_variance().into();
    Ok(Json(view).into_response())
}

async fn draw<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let drawn = st.store.draw(&name).await?;
    let mut resp = encoded_weights_response(&headers, drawn.weights)?;
    if let Ok(v) = HeaderValue::from_str(&drawn.ticket.to_string()) {
        resp.headers_mut().insert(TICKET_HEADER, v);
    }
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

async fn post_update<S: Store>(
    State(st): State<Arc<AppState<S>>>,
    ModelName(name): ModelName,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let ticket = ticket_of(&headers)?;
    let spec = st.store.spec(&name).await?;
    let weights = read_weights(
        &headers,
        body,
        spec.dim,
        spec.json_body_limit(),
        spec.binary_body_limit(),
    )
    .await?;
    let sub = Submission {
        generation: spec.generation,
        ticket,
        weights,
    };
    match st.store.submit(&name, sub).await? {
        SubmitOutcome::Accepted => {
            st.metrics.accepted();
            Ok(accepted_response(st.store.durable_acks()))
        }
        SubmitOutcome::Rejected(r) => {
            st.metrics.rejected();
            Err(ApiError::Rejected(r))
        }
        SubmitOutcome::Replayed(first) => match *first {
            SubmitOutcome::Rejected(r) => Err(ApiError::Rejected(r)),
            _ => Ok((
                StatusCode::ACCEPTED,
                Json(serde_json::json!({"status": "accepted", "replayed": true})),
            )
                .into_response()),
        },
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
    let mut resp = st.metrics.render().into_response();
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
    read_weights(&headers, body, dim, 64 + 32 * dim, 4 * dim + 1024).await?;
    Ok(accepted_response(true))
}
