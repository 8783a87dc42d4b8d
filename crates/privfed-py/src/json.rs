//! Rust values ↔ Python objects through their serde (JSON) form: dicts, lists, floats.

use crate::errors::{Kind, error};
use pyo3::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The Python form (`json.loads`) of a value's serde JSON.
pub fn to_python<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let s = serde_json::to_string(v)
        .map_err(|e| error(Kind::Base, format!("serializing a result: {e}")))?;
    py.import("json")?.call_method1("loads", (s,))
}

/// Parses a Python object (dict / list / JSON `str`) as `T`, with `what` naming it in errors.
pub fn from_python<T: DeserializeOwned>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    kind: Kind,
) -> PyResult<T> {
    let s: String = match obj.extract::<String>() {
        Ok(s) => s,
        Err(_) => obj
            .py()
            .import("json")?
            .call_method1("dumps", (obj,))
            .map_err(|e| error(kind, format!("{what} is not JSON-serializable: {e}")))?
            .extract()?,
    };
    serde_json::from_str(&s).map_err(|e| error(kind, format!("invalid {what}: {e}")))
}
