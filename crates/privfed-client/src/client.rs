//! A Rust client of the server (reqwest), used by the load generator, the simulator's `--server`
//! mode and the tests.

use privfed_ddml::engine::SpamRejection;
use privfed_ddml::wire::{CreateModel, decode_f32, encode_f32};
use serde::Deserialize;

/// A client failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Transport failure (connection refused, timeout, …); the detail is the source (print
    /// the error chain, e.g. `anyhow`'s `{:#}`).
    #[error("HTTP request failed")]
    Http(#[from] reqwest::Error),
    /// The server answered with an error status and a JSON error body.
    #[error("server answered {status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The body's `error` code.
        code: String,
        /// The body's `message`.
        message: String,
        /// The body's `reason`, which a 409 for a refused ticket carries (`ticket_unknown`,
        /// `ticket_expired`, `ticket_for_another_model`, `instance_overwritten`,
        /// `ticket_in_progress`; see the server's API documentation).
        reason: Option<String>,
        /// The answer's `Retry-After` (429 and 503 carry one): how long to wait before trying
        /// again.
        retry_after: Option<std::time::Duration>,
    },
    /// The server's answer could not be decoded.
    #[error("could not decode the answer: {0}")]
    Decode(String),
}

impl ClientError {
    /// The HTTP status, if the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Why the server refused (the body's `reason`: a 409 for a refused ticket has one), if it
    /// said.
    pub fn reason(&self) -> Option<&str> {
        match self {
            ClientError::Api { reason, .. } => reason.as_deref(),
            _ => None,
        }
    }

    /// How long the server asked to wait before trying again (`Retry-After` of a 429 or 503),
    /// if it did.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ClientError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The header carrying a draw's single-use ticket (its home is `privfed_ddml::wire`, which the
/// server reads too).
pub use privfed_ddml::wire::TICKET_HEADER;

/// A drawn instance and the ticket to send back with the update computed from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    /// The instance's weights.
    pub weights: Vec<f32>,
    /// The draw's ticket (`Privfed-Ticket`), if the server issued one.
    pub ticket: Option<String>,
}

fn ticket_of(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get(TICKET_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Result of a submitted update.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// 202: stored.
    Accepted,
    /// 202 with `"replayed": true`: this ticket's update was stored by an earlier attempt (a
    /// retry); nothing new was applied.
    Replayed,
    /// 422: rejected by the spam filter, with the server's reason.
    Rejected(Rejection),
}

/// The body of a 422 answer: why the spam filter or the update guard rejected an update.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// The server's message.
    pub message: String,
    /// The structured reason (the body's `rejection` field), if it was present and readable.
    pub detail: Option<SpamRejection>,
    /// The body's `reason`: `spam_filter`, or the update guard's failed test
    /// (`guard_max_abs_weight`, `guard_coordinate`, `guard_norm`), if present.
    pub reason: Option<String>,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `GET /v1/models/{name}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModelInfo {
    /// Name.
    pub name: String,
    /// Weights.
    pub dim: usize,
    /// Instances.
    pub k: usize,
    /// Initialization std.
    pub init_std: f64,
    /// Spam band, if any.
    pub spam_sigmas: Option<f64>,
    /// Accepted updates.
    pub updates_accepted: u64,
    /// Rejected updates.
    pub updates_rejected: u64,
    /// Average of the instances.
    pub mean: Vec<f64>,
    /// Sample variance across instances, averaged over weights.
    pub intra_model_variance: f64,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: String,
    message: String,
    /// Present on 422 answers; read leniently (a malformed one is dropped, not an error).
    #[serde(default)]
    rejection: Option<serde_json::Value>,
    /// Present on a refused ticket's 409.
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct WeightsBody {
    weights: Vec<f32>,
}

/// A client of one server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    admin_token: Option<String>,
}

async fn api_error(resp: reqwest::Response) -> ClientError {
    let status = resp.status().as_u16();
    // Whole seconds (the server's form; an HTTP date is not parsed).
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_secs);
    match resp.json::<ErrorBody>().await {
        Ok(b) => ClientError::Api {
            status,
            code: b.error,
            message: b.message,
            reason: b.reason,
            retry_after,
        },
        Err(_) => ClientError::Api {
            status,
            code: "unknown".into(),
            message: "non-JSON error body".into(),
            reason: None,
            retry_after,
        },
    }
}

/// Reads a 422 answer.
async fn rejection(resp: reqwest::Response) -> Result<Rejection, ClientError> {
    let b = resp
        .json::<ErrorBody>()
        .await
        .map_err(|e| ClientError::Decode(format!("422 answer: {e}")))?;
    Ok(Rejection {
        message: b.message,
        detail: b.rejection.and_then(|v| serde_json::from_value(v).ok()),
        reason: b.reason,
    })
}

impl Client {
    /// A client of the server at `base_url` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base_url: &str) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(usize::MAX)
            .tcp_nodelay(true)
            .build()?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            admin_token: None,
        })
    }

    /// Uses `token` as the admin bearer token.
    pub fn with_admin_token(mut self, token: &str) -> Self {
        self.admin_token = Some(token.to_string());
        self
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn admin(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.admin_token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// `POST /v1/models`.
    pub async fn create_model(&self, req: &CreateModel) -> Result<(), ClientError> {
        let resp = self
            .admin(self.http.post(self.url("/v1/models")))
            .json(req)
            .send()
            .await?;
        if resp.status().as_u16() == 201 {
            Ok(())
        } else {
            Err(api_error(resp).await)
        }
    }

    /// `DELETE /v1/models/{name}`.
    pub async fn delete_model(&self, name: &str) -> Result<(), ClientError> {
        let resp = self
            .admin(self.http.delete(self.url(&format!("/v1/models/{name}"))))
            .send()
            .await?;
        if resp.status().as_u16() == 204 {
            Ok(())
        } else {
            Err(api_error(resp).await)
        }
    }

    /// `GET /v1/models/{name}/draw` in the binary format: an instance and its ticket.
    pub async fn draw(&self, name: &str) -> Result<Drawn, ClientError> {
        self.draw_path(&format!("/v1/models/{name}/draw")).await
    }

    /// `GET` of a draw-like path (binary); used for the benchmark ceiling too.
    pub async fn draw_path(&self, path: &str) -> Result<Drawn, ClientError> {
        let resp = self
            .http
            .get(self.url(path))
            .header("accept", "application/octet-stream")
            .send()
            .await?;
        if resp.status().as_u16() != 200 {
            return Err(api_error(resp).await);
        }
        let ticket = ticket_of(&resp);
        let b = resp.bytes().await?;
        let weights = decode_f32(&b)
            .ok_or_else(|| ClientError::Decode("length not a multiple of 4".into()))?;
        Ok(Drawn { weights, ticket })
    }

    /// `GET /v1/models/{name}/draw` in JSON.
    pub async fn draw_json(&self, name: &str) -> Result<Drawn, ClientError> {
        self.draw_json_path(&format!("/v1/models/{name}/draw"))
            .await
    }

    /// `GET` of a draw-like path in JSON.
    pub async fn draw_json_path(&self, path: &str) -> Result<Drawn, ClientError> {
        let resp = self.http.get(self.url(path)).send().await?;
        if resp.status().as_u16() != 200 {
            return Err(api_error(resp).await);
        }
        let ticket = ticket_of(&resp);
        let weights = resp.json::<WeightsBody>().await?.weights;
        Ok(Drawn { weights, ticket })
    }

    /// `POST /v1/models/{name}/updates` in the binary format, with the ticket of the draw the
    /// update steps from (retrying with the same ticket is safe: it is applied once).
    pub async fn submit(
        &self,
        name: &str,
        ticket: Option<&str>,
        weights: &[f32],
    ) -> Result<Submitted, ClientError> {
        self.submit_path(&format!("/v1/models/{name}/updates"), ticket, weights)
            .await
    }

    /// `POST` of an update to a path (binary); used for the benchmark ceiling too.
    pub async fn submit_path(
        &self,
        path: &str,
        ticket: Option<&str>,
        weights: &[f32],
    ) -> Result<Submitted, ClientError> {
        let mut rb = self
            .http
            .post(self.url(path))
            .header("content-type", "application/octet-stream");
        if let Some(t) = ticket {
            rb = rb.header(TICKET_HEADER, t);
        }
        let resp = rb.body(encode_f32(weights)).send().await?;
        Self::submitted(resp).await
    }

    /// `POST /v1/models/{name}/updates` in JSON.
    pub async fn submit_json(
        &self,
        name: &str,
        ticket: Option<&str>,
        weights: &[f32],
    ) -> Result<Submitted, ClientError> {
        self.submit_json_path(&format!("/v1/models/{name}/updates"), ticket, weights)
            .await
    }

    /// `POST` of an update to a path in JSON.
    pub async fn submit_json_path(
        &self,
        path: &str,
        ticket: Option<&str>,
        weights: &[f32],
    ) -> Result<Submitted, ClientError> {
        let mut rb = self.http.post(self.url(path));
        if let Some(t) = ticket {
            rb = rb.header(TICKET_HEADER, t);
        }
        let resp = rb
            .json(&serde_json::json!({ "weights": weights }))
            .send()
            .await?;
        Self::submitted(resp).await
    }

    async fn submitted(resp: reqwest::Response) -> Result<Submitted, ClientError> {
        match resp.status().as_u16() {
            202 => {
                let body: serde_json::Value = resp.json().await.unwrap_or_default();
                if body["replayed"] == serde_json::Value::Bool(true) {
                    Ok(Submitted::Replayed)
                } else {
                    Ok(Submitted::Accepted)
                }
            }
            422 => Ok(Submitted::Rejected(rejection(resp).await?)),
            _ => Err(api_error(resp).await),
        }
    }

    /// `GET /v1/models/{name}`.
    pub async fn model(&self, name: &str) -> Result<ModelInfo, ClientError> {
        let resp = self
            .http
            .get(self.url(&format!("/v1/models/{name}")))
            .send()
            .await?;
        if resp.status().as_u16() != 200 {
            return Err(api_error(resp).await);
        }
        resp.json::<ModelInfo>()
            .await
            .map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// `GET /healthz` answered 200.
    pub async fn healthy(&self) -> Result<bool, ClientError> {
        Ok(self
            .http
            .get(self.url("/healthz"))
            .send()
            .await?
            .status()
            .as_u16()
            == 200)
    }
}
