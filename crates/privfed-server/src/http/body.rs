//! Reading request bodies within limits: the cap on one body ([`read_body`]), the budget of
//! bytes of bodies read at once ([`BodyBudget`]), the declared length checked before a byte is
//! read ([`declared_length`]), and the connection layer's body deadline ([`BodyTimeout`]).

use crate::http::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::time::Duration;

/// Default `AppState::body_budget`: 256 MiB of update bodies read at once.
pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: u64 = 256 << 20;

/// How long an update waits for room in the `AppState::body_budget` before answering 503.
pub const BODY_BUDGET_WAIT: std::time::Duration = Duration::from_secs(1);

/// The bytes of update bodies that may be read at once (kept in KiB units in a semaphore).
#[derive(Debug)]
pub struct BodyBudget {
    kib: tokio::sync::Semaphore,
    total_kib: u32,
}

impl BodyBudget {
    /// A budget of `bytes` (rounded up to KiB; at least 1 KiB, at most 4 TiB).
    pub fn new(bytes: u64) -> Self {
        let total_kib = u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX);
        Self {
            kib: tokio::sync::Semaphore::new(total_kib as usize),
            total_kib,
        }
    }

    /// Takes room for a body of up to `bytes` (a body larger than the whole budget takes all of
    /// it), waiting at most [`BODY_BUDGET_WAIT`].
    pub async fn take(&self, bytes: usize) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let kib = u32::try_from(bytes.div_ceil(1024).max(1))
            .unwrap_or(u32::MAX)
            .min(self.total_kib);
        tokio::time::timeout(BODY_BUDGET_WAIT, self.kib.acquire_many(kib))
            .await
            .ok()?
            .ok()
    }
}

/// The error of a request body that did not arrive within the body timeout; the API answers it
/// with 408.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimeout(pub Duration);

/// The request's `Content-Length`, if it has a valid one.
pub fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
}

/// Reads a body of at most `limit` bytes: refused before reading if its declared length is
/// larger (413), cut off when it grows past the limit (413), 408 past the body deadline
/// ([`BodyTimeout`]).
pub async fn read_body(
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
        Err(e) if is_body_timeout(&*e) => Err(ApiError::RequestTimeout),
        Err(e) => Err(ApiError::BadRequest(format!(
            "could not read the body: {e}"
        ))),
    }
}

/// Whether a body error is (or wraps) the connection layer's body timeout.
fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.is::<BodyTimeout>() {
            return true;
        }
        cur = c.source();
    }
    false
}
