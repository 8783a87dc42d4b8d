//! What travels between a Draw-and-Discard server and a device, as plain data: the body of a
//! model-creation request ([`CreateModel`]), the header that carries a draw's ticket
//! ([`TICKET_HEADER`]) and the binary weight format (little-endian `f32`, [`encode_f32`],
//! [`decode_f32`]). The server (`privfed-server`) and the device-side client
//! (`privfed-client`) both use these, so neither has to link the other. Validation of a request
//! against a server's limits stays in the server.

use serde::{Deserialize, Serialize};

/// The HTTP header carrying a draw's single-use ticket: the answer of `GET …/draw`, sent back
/// with the `POST …/updates` computed from that draw (32 hex digits).
pub const TICKET_HEADER: &str = "privfed-ticket";

/// The body of `POST /v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateModel {
    /// Model name.
    pub name: String,
    /// Number of weights.
    pub dim: usize,
    /// Number of instances.
    pub k: usize,
    /// Initialization standard deviation (default 0).
    #[serde(default)]
    pub init_std: Option<f64>,
    /// Spam filter band in standard deviations (default: no filter). Use at least
    /// [`crate::engine::RECOMMENDED_SPAM_SIGMAS`] (8): the instances share ancestry, so
    /// narrower bands reject many honest updates (measured with `k = 20` and 387 weights: 53% at
    /// 4σ, 6% at 5σ, 0.085% at 8σ).
    #[serde(default)]
    pub spam_sigmas: Option<f64>,
    /// Fraction of weights allowed outside the band (default 0).
    #[serde(default)]
    pub spam_max_outside_fraction: Option<f64>,
    /// The update guard ([`crate::guard`]): a declaration of the clients' step (updates are then
    /// accepted only as plausible steps from the instance drawn), or `"off"`. Absent here means
    /// "not said"; the server refuses a creation that does not say.
    #[serde(default)]
    pub update_guard: Option<crate::guard::UpdateGuard>,
}

impl CreateModel {
    /// A request for `k` instances of `dim` weights named `name` with this update guard and the
    /// defaults of the optional fields (no initialization spread: every instance starts at 0; no
    /// spam filter). Set the other fields with struct update syntax.
    pub fn new(
        name: impl Into<String>,
        dim: usize,
        k: usize,
        update_guard: crate::guard::UpdateGuard,
    ) -> Self {
        Self {
            name: name.into(),
            dim,
            k,
            init_std: None,
            spam_sigmas: None,
            spam_max_outside_fraction: None,
            update_guard: Some(update_guard),
        }
    }

    /// [`CreateModel::new`] with the guard `"off"`: updates are not checked as steps.
    pub fn unguarded(name: impl Into<String>, dim: usize, k: usize) -> Self {
        Self::new(
            name,
            dim,
            k,
            crate::guard::UpdateGuard::Off(crate::guard::GuardOff::Off),
        )
    }
}

/// Weights as little-endian `f32` bytes.
pub fn encode_f32(w: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * w.len());
    encode_f32_into(w, &mut out);
    out
}

/// Appends the little-endian bytes of `w` to `out`.
pub fn encode_f32_into(w: &[f32], out: &mut Vec<u8>) {
    // Sized first and filled in fixed chunks, which the compiler vectorizes (4–5× faster than
    // appending 4 bytes at a time, measured at 387 weights); this is on the server's hot path.
    let start = out.len();
    out.resize(start + 4 * w.len(), 0);
    for (c, x) in out[start..].chunks_exact_mut(4).zip(w) {
        c.copy_from_slice(&x.to_le_bytes());
    }
}

/// Little-endian `f32` bytes to weights; `None` if the length is not a multiple of 4.
pub fn decode_f32(b: &[u8]) -> Option<Vec<f32>> {
    if !b.len().is_multiple_of(4) {
        return None;
    }
    // Filled in place rather than collected from an iterator: vectorized, ≈ 3× faster.
    let mut w = vec![0f32; b.len() / 4];
    for (x, c) in w.iter_mut().zip(b.chunks_exact(4)) {
        *x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unguarded_is_the_request_with_only_the_guard_said() {
        let parsed: CreateModel =
            serde_json::from_str(r#"{"name": "m", "dim": 3, "k": 4, "update_guard": "off"}"#)
                .unwrap();
        assert_eq!(CreateModel::unguarded("m", 3, 4), parsed);
    }

    #[test]
    fn f32_round_trip_and_bad_length() {
        let w = [1.0f32, -0.5, f32::MIN_POSITIVE, 3.25e7];
        let b = encode_f32(&w);
        assert_eq!(b.len(), 16);
        assert_eq!(&b[..4], &1.0f32.to_le_bytes());
        assert_eq!(decode_f32(&b).unwrap(), w);
        assert!(decode_f32(&b[..3]).is_none());
        let mut out = vec![9u8];
        encode_f32_into(&w[..1], &mut out);
        assert_eq!(out, [9, 0, 0, 0x80, 0x3f]);
    }

    #[test]
    fn create_model_optional_fields_and_unknown_keys() {
        let r: CreateModel = serde_json::from_str(r#"{"name":"m","dim":3,"k":2}"#).unwrap();
        assert_eq!(r.init_std, None);
        assert_eq!(r.spam_sigmas, None);
        assert_eq!(r.update_guard, None);
        let r: CreateModel =
            serde_json::from_str(r#"{"name":"m","dim":3,"k":2,"update_guard":"off"}"#).unwrap();
        assert_eq!(
            r.update_guard,
            Some(crate::guard::UpdateGuard::Off(crate::guard::GuardOff::Off))
        );
        let r: CreateModel = serde_json::from_str(
            r#"{"name":"m","dim":3,"k":2,"update_guard":{"learning_rate":0.1,"noise":{"kind":"none"}}}"#,
        )
        .unwrap();
        assert!(matches!(
            r.update_guard,
            Some(crate::guard::UpdateGuard::Step(_))
        ));
        assert!(
            serde_json::from_str::<CreateModel>(r#"{"name":"m","dim":3,"k":2,"x":1}"#).is_err()
        );
    }
}
