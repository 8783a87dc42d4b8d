//! Errors of the server, and the one place where they become HTTP responses.
//!
//! Every error reaches the client as a JSON body `{"error": CODE, "message": TEXT}` with the
//! status below; a refused ticket's 409 and a refused update's 422 add `"reason"` (why:
//! `ticket_unknown`, `ticket_expired`, `ticket_for_another_model`, `instance_overwritten`,
//! `ticket_in_progress`; `spam_filter`, `guard_max_abs_weight`, `guard_coordinate`,
//! `guard_norm`). Internal failures (store I/O, Redis) are logged with their detail and reach the
//! client only as `{"error": "internal", "message": "internal error"}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use privfed_ddml::decision::Rejection;

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No model of that name.
    #[error("no model named `{0}`")]
    NotFound(String),
    /// A model of that name exists already.
    #[error("a model named `{0}` exists already")]
    Conflict(String),
    /// The backend failed (I/O, database, network); the detail is for logs only.
    #[error("store backend: {0}")]
    Backend(String),
    /// The store cannot accept or persist writes right now (outage, failed disk, lost
    /// persistence); nothing was acknowledged. Answered as 503 with `Retry-After`.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// There is no store where one was expected (a new one must be created explicitly).
    #[error("no store at {0}: create one explicitly (`privfed serve --init-store`)")]
    Missing(String),
    /// The model's records are damaged; it is set aside (other models are served) until an
    /// admin deletes it.
    #[error("model `{0}` is quarantined: its stored records are damaged")]
    Quarantined(String),
    /// The presented ticket is refused (unknown, expired, for another model, or its instance
    /// was overwritten and is no longer kept): the rule's reason.
    #[error("the ticket is unknown, expired or no longer valid: draw again")]
    TicketInvalid(privfed_ddml::ticket::Refusal),
    /// The model's update guard needs the ticket of the draw.
    #[error("this model checks each update against the instance drawn: send the draw's ticket")]
    TicketRequired,
    /// The ticket is being redeemed by a concurrent request.
    #[error("the ticket is being used by another request")]
    TicketInUse,
    /// The model's ticket book is full of tickets younger than the step time: the draw must
    /// wait (429 with `Retry-After`).
    #[error(transparent)]
    TicketsFull(privfed_ddml::ticket::TicketsFull),
    /// A secure-aggregation round's stored version is behind this process's replica of it: the
    /// store lost changes it had acknowledged (a Redis run with best-effort durability that
    /// crashed, or a restored backup). The coordinator aborts the round rather than continue
    /// from a history that its clients contradict.
    #[error(
        "round `{round}` went back in time: the store is at version {stored}, behind the {seen} \
         this process had seen (the store lost acknowledged changes)"
    )]
    WentBackInTime {
        /// The round id.
        round: String,
        /// The version in the store.
        stored: u64,
        /// The version of this process's replica.
        seen: u64,
    },
}

/// An error answered to an HTTP client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 401: no `Authorization: Bearer` header on an admin route.
    #[error("missing bearer token")]
    Unauthorized,
    /// 403: wrong admin token.
    #[error("invalid admin token")]
    Forbidden,
    /// 404: unknown model (or route).
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists but not with this method.
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    /// 409: the model exists.
    #[error("{0}")]
    Conflict(String),
    /// 400: malformed request (bad JSON, wrong length, non-finite weight, bad parameter).
    #[error("{0}")]
    BadRequest(String),
    /// 413: body larger than the limit (bytes).
    #[error("request body exceeds {0} bytes")]
    PayloadTooLarge(usize),
    /// 415: unsupported content type.
    #[error("unsupported content type `{0}`: use application/json or application/octet-stream")]
    UnsupportedMediaType(String),
    /// 422: the update guard or the spam filter rejected the update.
    #[error("{0}")]
    Rejected(Rejection),
    /// 429: this client's rate limit on draws and updates is exhausted; retry after the wait.
    #[error("rate limit exceeded: retry in {} ms", .0.as_millis())]
    RateLimited(std::time::Duration),
    /// 429: this client holds its share of outstanding tickets, or the model's ticket book is
    /// full of tickets younger than the step time; retry after the wait.
    #[error("too many outstanding tickets: retry in {} ms", .0.as_millis())]
    TicketsFull(std::time::Duration),
    /// 408: the request body did not arrive within the server's body timeout.
    #[error("the request body did not arrive in time")]
    RequestTimeout,
    /// 507: creating the model would exceed the server's cap on total model memory.
    #[error("{0}")]
    InsufficientStorage(String),
    /// 500: an internal failure (detail logged, never sent).
    #[error("internal error")]
    Internal(String),
    /// 503: the store cannot take the request now (detail logged, never sent); retry after
    /// [`RETRY_AFTER_SECONDS`].
    #[error("the store is unavailable; retry later")]
    Unavailable(String),
    /// 409: a ticket refused or in use; `reason` says why (the body's `reason`:
    /// [`privfed_ddml::ticket::Refusal::reason`] or
    /// [`privfed_ddml::ticket::IN_PROGRESS_REASON`]).
    #[error("{message}")]
    Ticket {
        /// The message.
        message: String,
        /// The machine-readable reason.
        reason: &'static str,
    },
    /// 428: the model needs the draw's ticket.
    #[error("{0}")]
    TicketRequired(String),
    /// 500: the model's records are damaged and it is quarantined.
    #[error("{0}")]
    Quarantined(String),
    /// 422: a secure-aggregation message breaks the protocol (wrong recipients, bad shares).
    #[error("{0}")]
    Protocol(String),
}

/// The `Retry-After` of a 503, in seconds.
pub const RETRY_AFTER_SECONDS: u64 = 1;

impl ApiError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Rejected(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::RateLimited(_) | ApiError::TicketsFull(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Ticket { .. } => StatusCode::CONFLICT,
            ApiError::TicketRequired(_) => StatusCode::PRECONDITION_REQUIRED,
            ApiError::Quarantined(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Protocol(_) => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }

    /// The stable machine-readable code in the body's `error` field.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::Rejected(Rejection::Spam(_)) => "rejected_by_spam_filter",
            ApiError::Rejected(Rejection::Guard(_)) => "rejected_by_guard",
            ApiError::RequestTimeout => "request_timeout",
            ApiError::RateLimited(_) => "rate_limited",
            ApiError::TicketsFull(_) => "tickets_full",
            ApiError::InsufficientStorage(_) => "insufficient_storage",
            ApiError::Internal(_) => "internal",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Ticket { .. } => "ticket_invalid",
            ApiError::TicketRequired(_) => "ticket_required",
            ApiError::Quarantined(_) => "quarantined",
            ApiError::Protocol(_) => "protocol_violation",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(n) => ApiError::NotFound(format!("no model named `{n}`")),
            StoreError::Conflict(n) => ApiError::Conflict(format!("a model named `{n}` exists")),
            StoreError::Backend(d) => ApiError::Internal(d),
            StoreError::Unavailable(d) => ApiError::Unavailable(d),
            e @ StoreError::Missing(_) => ApiError::Unavailable(e.to_string()),
            e @ StoreError::TicketInvalid(why) => ApiError::Ticket {
                message: e.to_string(),
                reason: why.reason(),
            },
            e @ StoreError::TicketInUse => ApiError::Ticket {
                message: e.to_string(),
                reason: privfed_ddml::ticket::IN_PROGRESS_REASON,
            },
            e @ StoreError::TicketRequired => ApiError::TicketRequired(e.to_string()),
            e @ StoreError::Quarantined(_) => ApiError::Quarantined(e.to_string()),
            e @ StoreError::WentBackInTime { .. } => ApiError::Internal(e.to_string()),
            StoreError::TicketsFull(f) => ApiError::TicketsFull(f.retry_after),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        let status = self.status();
        let mut body = serde_json::json!({"error": self.code(), "message": self.to_string()});
        if let ApiError::Ticket { reason, .. } = &self {
            body["reason"] = serde_json::Value::from(*reason);
        }
        if let ApiError::Rejected(r) = &self {
            body["reason"] = serde_json::Value::from(r.reason());
            body["rejection"] = match r {
                Rejection::Spam(r) => serde_json::to_value(r).unwrap_or_default(),
                Rejection::Guard(r) => serde_json::to_value(r).unwrap_or_default(),
            };
        }
        let mut resp = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        if let ApiError::Unavailable(detail) = &self {
            // Logged by the request layer once per outage, not once per request.
            resp.extensions_mut()
                .insert(StoreUnavailable(detail.clone()));
        }
        if let ApiError::RateLimited(wait) | ApiError::TicketsFull(wait) = &self {
            // Whole seconds, rounded up (at least 1).
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        resp
    }
}

/// A 503 answer's detail, handed from [`ApiError`]'s response to the logging middleware.
#[derive(Debug, Clone)]
pub(crate) struct StoreUnavailable(pub(crate) String);
