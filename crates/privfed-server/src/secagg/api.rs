//! HTTP routes of the secure-aggregation coordinator.
//!
//! | route | who | answers |
//! |---|---|---|
//! | `POST /v1/secagg/rounds` `{"clients","bits","dim","threshold"?,"graph"?,"dropout"?,"stage_timeout_ms"?,"threat_model"?,"roster"?,"open"?}` | admin | 201 `{"round","config"}`, plus `"join_tickets"` (one per client) for an honest-but-curious round that is not open; 400, 401, 403 |
//! | `POST /v1/secagg/rounds/{id}/join` (active rounds: `{"device","signature"}`, an enrolled device's signature of the round; honest-but-curious rounds: `{"ticket"}`, one of the round's join tickets; open rounds: no body) | an enrolled device (active); the holder of an unused join ticket (honest-but-curious); anyone (open) | 200 `{"client","token","config"}`, 401 (no credential), 403 (not enrolled, bad signature, unknown ticket), 404, 409 (full, started, device already joined, ticket used) |
//! | `POST /v1/secagg/rounds/{id}/messages` (postcard `ClientMessage`, `Authorization: Bearer CLIENT_TOKEN`) | a joined client | 202 `{"status":"accepted"}` (`"durable": false` added with a best-effort Redis store), 200 `{"status":"duplicate"}` (a byte-identical retry of the message stored from this client for that stage, also once the stage closed), 400, 403 (unknown token, or a message under another client's id; refused before the body is read), 409 (stale or closed stage, other session, conflicting retry), 413 (longer than the round's largest legitimate message, refused unread when `Content-Length` says so), 422 (breaks the protocol), 503 |
//! | `GET /v1/secagg/rounds/{id}/next?client=ID&wait=SECONDS` (`Authorization: Bearer CLIENT_TOKEN`) | a joined client | 200 postcard `ServerMessage`, 204 (not yet; long poll up to 30 s), 410 `{"status","reason"}` (round over for this client), 403 |
//! | `GET /v1/secagg/rounds/{id}` | anyone | 200 (status, stage, config, joined, pending, deadline, version) |
//! | `GET /v1/secagg/rounds/{id}/result` | admin | 200 `{"sum","survivors","dropped"}`, 409 (not finished / aborted) |
//! | `POST /v1/secagg/rounds/{id}/close` (close the current stage now: an operator's deadline) | admin | 204, 409 (over) |
//! | `DELETE /v1/secagg/rounds/{id}` | admin | 204 |
//!
//! `graph` is `"auto"` (default: complete up to 128 clients, SecAgg+ planned for `dropout`
//! above), `"complete"`, `"plus"`, or `{"harary": {"degree": K}}` (then `threshold` is required).
//! `threat_model` is `"honest-but-curious"` (default) or `"active"`, which needs `roster` (the
//! enrollment authority's signed [`privfed_secagg::Roster`]; the coordinator cannot check the
//! authority's signature, the devices do) and plans the active mode's thresholds. The round's
//! public view (`GET …/{id}`) carries the roster, so devices can fetch and verify it.
//! An honest-but-curious round is joined with **join tickets**: its creation answers one
//! single-use ticket per client (256 bits from the OS CSPRNG; only their SHA-256 is stored),
//! which the administrator hands to the devices it admits, so a stranger cannot fill the round
//! with Sybils. `"open": true` creates a round anyone may join (experiments on a closed
//! network; Sybils then count as noise contributors).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use privfed_secagg::plan::{GraphChoice, round_config_for};
use privfed_secagg::{GraphSpec, Receipt, Roster, ThreatModel};
use serde::Deserialize;

use super::{
    Coordinator, DEFAULT_STAGE_TIMEOUT, JoinCredential, JoinWith, NewRound, Next, protocol_error,
};
use crate::http::auth::check_admin;
use crate::http::body::read_body;
use crate::http::error::ApiError;

/// The routes, over `coordinator`.
pub fn router(coordinator: Arc<Coordinator>) -> Router {
    Router::new()
        .route("/v1/secagg/rounds", post(create))
        .route("/v1/secagg/rounds/{id}", get(view).delete(delete))
        .route("/v1/secagg/rounds/{id}/join", post(join))
        .route("/v1/secagg/rounds/{id}/messages", post(message))
        .route("/v1/secagg/rounds/{id}/next", get(next))
        .route("/v1/secagg/rounds/{id}/result", get(result))
        .route("/v1/secagg/rounds/{id}/close", post(close))
        .with_state(coordinator)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum GraphIn {
    Named(String),
    Spec(GraphSpec),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateRound {
    clients: u32,
    bits: u32,
    dim: usize,
    threshold: Option<u32>,
    graph: Option<GraphIn>,
    dropout: Option<f64>,
    stage_timeout_ms: Option<u64>,
    threat_model: Option<String>,
    roster: Option<Roster>,
    #[serde(default)]
    open: bool,
}

/// Largest body of a round creation.
const CREATE_LIMIT: usize = 4096;

async fn create(
    State(c): State<Arc<Coordinator>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    check_admin(&headers, c.admin_token())?;
    let bytes = read_body(&headers, body, CREATE_LIMIT).await?;
    let req: CreateRound = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::BadRequest(format!("invalid round: {e}")))?;
    let dropout = req.dropout.unwrap_or(0.1);
    let model = match (req.threat_model.as_deref(), &req.roster) {
        (None | Some("honest-but-curious"), None) => ThreatModel::HonestButCurious,
        (None | Some("honest-but-curious"), Some(_)) => {
            return Err(ApiError::BadRequest(
                "a roster belongs to an active round: add \"threat_model\": \"active\"".into(),
            ));
        }
        (Some("active"), Some(r)) => ThreatModel::Active {
            roster: Some(r.digest()),
        },
        (Some("active"), None) => {
            return Err(ApiError::BadRequest(
                "an active round needs a roster (the devices' credential to join)".into(),
            ));
        }
        (Some(other), _) => {
            return Err(ApiError::BadRequest(format!(
                "unknown threat_model `{other}`: honest-but-curious or active"
            )));
        }
    };
    if let Some(r) = &req.roster
        && (r.devices.is_empty() || !r.devices.windows(2).all(|w| w[0] < w[1]))
    {
        return Err(ApiError::BadRequest(
            "the roster's devices must be sorted, without repeats, and not empty".into(),
        ));
    }
    let planned = |choice| {
        round_config_for(
            model,
            req.clients,
            req.bits,
            req.dim,
            dropout,
            choice,
            [0; 32],
        )
        .map(|c| (c.graph, Some(c.threshold)))
        .map_err(protocol_error)
    };
    let (graph, default_threshold) = match &req.graph {
        None => planned(GraphChoice::Auto)?,
        Some(GraphIn::Named(n)) => planned(match n.as_str() {
            "auto" => GraphChoice::Auto,
            "complete" => GraphChoice::Complete,
            "plus" => GraphChoice::Plus,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown graph `{other}`: auto, complete, plus or {{\"harary\": {{\"degree\": K}}}}"
                )));
            }
        })?,
        Some(GraphIn::Spec(spec)) => (*spec, None),
    };
    let threshold = req.threshold.or(default_threshold).ok_or_else(|| {
        ApiError::BadRequest("an explicit graph needs an explicit threshold".into())
    })?;
    let stage_timeout = req
        .stage_timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_STAGE_TIMEOUT);
    let created = c
        .create_round(NewRound {
            clients: req.clients,
            threshold,
            bits: req.bits,
            dim: req.dim,
            graph,
            stage_timeout,
            roster: req.roster,
            open: req.open,
        })
        .await?;
    let mut body = serde_json::json!({"round": created.id, "config": created.config});
    if !created.join_tickets.is_empty() {
        body["join_tickets"] = serde_json::json!(created.join_tickets);
    }
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// Largest join body (a device key and a signature in JSON arrays, or a ticket).
const JOIN_LIMIT: usize = 1024;

/// A join body: `{"device", "signature"}` (active rounds) or `{"ticket"}` (honest-but-curious
/// rounds); empty for an open round.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinBody {
    device: Option<[u8; 32]>,
    signature: Option<Vec<u8>>,
    ticket: Option<String>,
}

async fn join(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_body(&headers, body, JOIN_LIMIT).await?;
    let bad = || {
        ApiError::BadRequest(
            "a join credential is {\"device\", \"signature\"} (active rounds) or {\"ticket\"} \
             (honest-but-curious rounds)"
                .into(),
        )
    };
    let credential = if bytes.is_empty() {
        JoinWith::Nothing
    } else {
        let b: JoinBody = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        match (b.device, b.signature, b.ticket) {
            (Some(device), Some(signature), None) => {
                JoinWith::Device(JoinCredential { device, signature })
            }
            (None, None, Some(ticket)) => JoinWith::Ticket(ticket),
            _ => return Err(bad()),
        }
    };
    let (client, token, config) = c.join(&id, &credential).await?;
    Ok(
        axum::Json(serde_json::json!({"client": client, "token": token, "config": config}))
            .into_response(),
    )
}

/// The client's bearer token.
fn client_token(headers: &HeaderMap) -> Result<String, ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(ApiError::Unauthorized)?
        .to_str()
        .map_err(|_| ApiError::Unauthorized)?;
    match value.split_at_checked(7) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer ") => Ok(rest.to_string()),
        _ => Err(ApiError::Unauthorized),
    }
}

/// Largest message body of any round: a masked input of 2^28 × 64 bits is 2 GiB, far above what
/// a server should take; messages are capped at 256 MiB (d = 2^25 at 64 bits). Each round caps
/// its own messages lower, at the largest one its honest clients send.
const MESSAGE_LIMIT: usize = 256 << 20;

async fn message(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let token = client_token(&headers)?;
    // Round, client and size are settled before the body is read: a stranger's or an oversized
    // body is refused unread.
    let (client, limit) = c.admit_message(&id, &token).await?;
    let bytes = read_body(&headers, body, limit.min(MESSAGE_LIMIT)).await?;
    match c.post_message(&id, client, &token, &bytes).await? {
        Receipt::Accepted => {
            // As for model updates: a store run without durable acknowledgments says so.
            let body = if c.durable_acks() {
                serde_json::json!({"status": "accepted"})
            } else {
                serde_json::json!({"status": "accepted", "durable": false})
            };
            Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response())
        }
        Receipt::Duplicate => {
            Ok(axum::Json(serde_json::json!({"status": "duplicate"})).into_response())
        }
    }
}

#[derive(Deserialize)]
struct NextQuery {
    client: u32,
    wait: Option<f64>,
}

async fn next(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
    Query(q): Query<NextQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let token = client_token(&headers)?;
    let wait = q.wait.unwrap_or(0.0);
    if !(wait.is_finite() && wait >= 0.0) {
        return Err(ApiError::BadRequest(
            "wait must be a non-negative number of seconds".into(),
        ));
    }
    let wait = Duration::from_secs_f64(wait.min(super::MAX_WAIT.as_secs_f64()));
    match c.next_message(&id, q.client, &token, wait).await? {
        Next::Message(bytes) => {
            Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
        }
        Next::NotYet => Ok(StatusCode::NO_CONTENT.into_response()),
        Next::Over(reason) => {
            let status = if reason == "finished" {
                "finished"
            } else {
                "over"
            };
            Ok((
                StatusCode::GONE,
                axum::Json(serde_json::json!({"status": status, "reason": reason})),
            )
                .into_response())
        }
    }
}

async fn view(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(axum::Json(c.view(&id).await?).into_response())
}

async fn result(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_admin(&headers, c.admin_token())?;
    Ok(axum::Json(c.result(&id).await?).into_response())
}

async fn delete(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_admin(&headers, c.admin_token())?;
    c.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn close(
    State(c): State<Arc<Coordinator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_admin(&headers, c.admin_token())?;
    c.close_now(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
