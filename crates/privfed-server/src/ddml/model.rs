//! Model specifications, request validation and the binary weight format.

use crate::http::error::ApiError;
use privfed_ddml::engine::SpamFilter;
use privfed_ddml::guard::{GuardSpec, StepGuard, UpdateGuard};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How many initialization standard deviations the guard's absolute bound must leave room for
/// (an initial weight beyond `10·init_std` has probability below 2e-23).
pub const INIT_STD_MARGIN: f64 = 10.0;

// The request body and the weight format are shared with devices (privfed-ddml's `wire`); they
// stay importable from here.
pub use privfed_ddml::wire::{CreateModel, decode_f32, encode_f32, encode_f32_into};

/// Largest number of weights a model may have.
pub const MAX_DIM: usize = 1 << 22;
/// Largest number of instances.
pub const MAX_K: usize = 1000;
/// Largest `dim × k` (floats held per model).
pub const MAX_FLOATS: usize = 1 << 25;

/// Accepted range of `spam_sigmas`: below 1σ the band rejects most honest updates; beyond 1000σ
/// it rejects nothing a finite `f32` could hold against any realistic spread (and products with
/// the spread overflow for huge values).
pub const SPAM_SIGMAS_RANGE: (f64, f64) = (1.0, 1000.0);

/// A model as the server stores it. Weights are stored as `f32`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Name: 1–64 characters from `[A-Za-z0-9_.-]`.
    pub name: String,
    /// Number of weights `p`.
    pub dim: usize,
    /// Number of instances `k`.
    pub k: usize,
    /// Standard deviation of the initialization `N(0, init_std²)`; paper 003 asks for
    /// `√((k/2)·σ²)` with `σ²` the clients' noise variance.
    pub init_std: f64,
    /// The spam filter, if enabled.
    pub spam: Option<SpamFilter>,
    /// A random identifier of this incarnation of the model (a deleted and re-created model has
    /// a new one), used by stores shared between processes.
    pub generation: u64,
    /// The declared client step that every update is checked against
    /// ([`privfed_ddml::guard`]); `None` when the creation said `"update_guard": "off"` (or for
    /// a model stored before the guard existed).
    #[serde(default)]
    pub guard: Option<GuardSpec>,
    /// The guard built from [`ModelSpec::guard`] ([`ModelSpec::prepared`]); not stored.
    #[serde(skip)]
    pub step_guard: Option<Arc<StepGuard>>,
}

/// Checks a model name.
pub fn validate_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        // Path segments `.` and `..` are resolved away by clients and proxies: unreachable.
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(
            "model name must be 1-64 characters from [A-Za-z0-9_.-], not `.` or `..`".into(),
        ))
    }
}

impl ModelSpec {
    /// Validates a creation request against this server's limits and builds the spec (with the
    /// given generation).
    pub fn from_request(req: CreateModel, generation: u64) -> Result<ModelSpec, ApiError> {
        validate_name(&req.name)?;
        if req.dim == 0 || req.dim > MAX_DIM {
            return Err(ApiError::BadRequest(format!(
                "dim must lie in 1..={MAX_DIM}"
            )));
        }
        if req.k == 0 || req.k > MAX_K {
            return Err(ApiError::BadRequest(format!("k must lie in 1..={MAX_K}")));
        }
        if req.dim * req.k > MAX_FLOATS {
            return Err(ApiError::BadRequest(format!(
                "dim × k must be at most {MAX_FLOATS}"
            )));
        }
        let init_std = req.init_std.unwrap_or(0.0);
        if !(init_std.is_finite() && (0.0..=1e6).contains(&init_std)) {
            return Err(ApiError::BadRequest(
                "init_std must be finite and in [0, 1e6]".into(),
            ));
        }
        let spam = match req.spam_sigmas {
            None => {
                if req.spam_max_outside_fraction.is_some() {
                    return Err(ApiError::BadRequest(
                        "spam_max_outside_fraction needs spam_sigmas".into(),
                    ));
                }
                None
            }
            Some(t) => {
                if !(SPAM_SIGMAS_RANGE.0..=SPAM_SIGMAS_RANGE.1).contains(&t) {
                    return Err(ApiError::BadRequest(format!(
                        "spam_sigmas must lie in [{}, {}]",
                        SPAM_SIGMAS_RANGE.0, SPAM_SIGMAS_RANGE.1
                    )));
                }
                let f = SpamFilter::new(t, req.spam_max_outside_fraction.unwrap_or(0.0))
                    .map_err(|e| ApiError::BadRequest(e.to_string()))?;
                if req.k < 2 || init_std == 0.0 {
                    return Err(ApiError::BadRequest(
                        "the spam filter needs k ≥ 2 and init_std > 0 (a spread across instances)"
                            .into(),
                    ));
                }
                Some(f)
            }
        };
        let guard = match req.update_guard {
            None => {
                return Err(ApiError::BadRequest(
                    "declare update_guard: the clients' step, e.g. {\"learning_rate\": 0.005, \"noise\": {\"kind\": \"laplace\", \"epsilon\": 3.47}}, so each update is checked as a step from the instance drawn; or \"off\" to accept any finite update".into(),
                ));
            }
            Some(UpdateGuard::Off(_)) => None,
            Some(UpdateGuard::Step(g)) => {
                let sg = StepGuard::new(&g, req.dim)
                    .map_err(|e| ApiError::BadRequest(format!("update_guard: {e}")))?;
                if INIT_STD_MARGIN * init_std > sg.max_abs_weight() {
                    return Err(ApiError::BadRequest(format!(
                        "update_guard.max_abs_weight {} must be at least {INIT_STD_MARGIN}·init_std = {}",
                        sg.max_abs_weight(),
                        INIT_STD_MARGIN * init_std
                    )));
                }
                Some(g)
            }
        };
        ModelSpec {
            name: req.name,
            dim: req.dim,
            k: req.k,
            init_std,
            spam,
            generation,
            guard,
            step_guard: None,
        }
        .prepared()
        .map_err(ApiError::BadRequest)
    }

    /// Builds [`ModelSpec::step_guard`] from [`ModelSpec::guard`] (after reading a stored
    /// spec); `Err` with the reason if the stored declaration is invalid.
    pub fn prepared(mut self) -> Result<Self, String> {
        self.step_guard = match &self.guard {
            None => None,
            Some(g) => Some(Arc::new(
                StepGuard::new(g, self.dim).map_err(|e| format!("update_guard: {e}"))?,
            )),
        };
        Ok(self)
    }
}

impl ModelSpec {
    /// Largest accepted JSON body for an update: 64 bytes plus 32 per weight (the shortest
    /// round-trip form of an `f32` has at most 15 characters).
    pub fn json_body_limit(&self) -> usize {
        64 + 32 * self.dim
    }

    /// Largest accepted binary body: `4·dim` bytes plus slack, so near misses are reported as a
    /// wrong length (400) and only gross excess as 413.
    pub fn binary_body_limit(&self) -> usize {
        4 * self.dim + 1024
    }
}

/// Checks an update's length and that every weight is finite.
pub fn validate_weights(w: &[f32], dim: usize) -> Result<(), ApiError> {
    if w.len() != dim {
        return Err(ApiError::BadRequest(format!(
            "update has {} weights, the model has {dim}",
            w.len()
        )));
    }
    if let Some(i) = w.iter().position(|x| !x.is_finite()) {
        return Err(ApiError::BadRequest(format!(
            "weight {i} is not finite (or overflows f32)"
        )));
    }
    Ok(())
}

/// Converts JSON numbers to `f32`, rejecting values that overflow it.
pub fn f64_to_f32_weights(w: &[f64]) -> Result<Vec<f32>, ApiError> {
    w.iter()
        .enumerate()
        .map(|(i, &x)| {
            let y = x as f32;
            if y.is_finite() {
                Ok(y)
            } else {
                Err(ApiError::BadRequest(format!(
                    "weight {i} is not finite (or overflows f32)"
                )))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `.` and `..` are not model names (clients resolve them away).
    #[test]
    fn dot_names_are_refused() {
        for bad in [".", "..", "", "a/b", "a b"] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "...", ".a", "a.", "m-1_x.y"] {
            assert!(validate_name(good).is_ok(), "{good:?}");
        }
    }

    /// `spam_sigmas` outside [1, 1000] is refused.
    #[test]
    fn spam_sigmas_range() {
        let req = |t: f64| CreateModel {
            name: "m".into(),
            dim: 2,
            k: 4,
            init_std: Some(1.0),
            spam_sigmas: Some(t),
            spam_max_outside_fraction: None,
            update_guard: Some(UpdateGuard::Off(privfed_ddml::guard::GuardOff::Off)),
        };
        for bad in [1e-300, 0.5, 1000.5, 1e300, f64::NAN, f64::INFINITY] {
            assert!(ModelSpec::from_request(req(bad), 0).is_err(), "{bad}");
        }
        for good in [1.0, 8.0, 1000.0] {
            assert!(ModelSpec::from_request(req(good), 0).is_ok(), "{good}");
        }
    }
}
