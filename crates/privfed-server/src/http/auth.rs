//! The admin routes' bearer token.

use crate::http::error::ApiError;
use axum::http::{HeaderMap, header};

/// Checks `Authorization: Bearer TOKEN` against the configured token (scheme case-insensitive,
/// constant-time comparison): 401 without it, 403 with a wrong one.
pub fn check_admin(headers: &HeaderMap, token: &str) -> Result<(), ApiError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(ApiError::Unauthorized)?
        .as_bytes();
    // The scheme is case-insensitive (RFC 9110 §11.1): `Bearer`, `bearer`, `BEARER`.
    let presented = match value.split_at_checked(7) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"bearer ") => rest,
        _ => return Err(ApiError::Unauthorized),
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn auth(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    /// The scheme is matched case-insensitively, the token exactly.
    #[test]
    fn bearer_scheme_is_case_insensitive() {
        for ok in ["Bearer tok", "bearer tok", "BEARER tok", "bEaReR tok"] {
            assert!(check_admin(&auth(ok), "tok").is_ok(), "{ok}");
        }
        for (v, code) in [
            ("Bearer Tok", 403),
            ("bearer tok2", 403),
            ("Bearer ", 403),
            ("Basic tok", 401),
            ("Bearertok", 401),
            ("bear", 401),
        ] {
            let e = check_admin(&auth(v), "tok").unwrap_err();
            assert_eq!(e.status().as_u16(), code, "{v}");
        }
        assert!(check_admin(&HeaderMap::new(), "tok").is_err());
    }
}
