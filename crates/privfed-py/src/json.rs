//! Rust values ↔ Python objects through their serde (JSON) form: dicts, lists, floats.
//!
//! Python objects are read by walking them into a `serde_json::Value` (no JSON text, so no
//! parser positions), and deserialization errors name the field by its path
//! (`field `event.rate`: invalid type: string "a", expected f64`), never a line and column.

use crate::errors::{Kind, error};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A value's serde JSON text (fields in declaration order, as the CLI prints them).
pub fn to_json<T: Serialize + ?Sized>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| error(Kind::Base, format!("serializing a result: {e}")))
}

/// The Python form (`json.loads`) of serde JSON text.
pub fn json_to_python<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// The Python form (`json.loads`) of a value's serde JSON.
pub fn to_python<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyAny>> {
    json_to_python(py, &to_json(v)?)
}

/// `what` and a field path, for messages: "field `a.b`" or "the top level".
fn field(path: &str) -> String {
    if path.is_empty() || path == "." {
        "the top level".into()
    } else {
        format!("field `{path}`")
    }
}

/// A serde_json message without its " at line L column C" suffix (for JSON text input).
fn without_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) if e.line() > 0 => s[..i].to_string(),
        _ => s,
    }
}

/// Walks a Python object (dict with `str` keys, list, tuple, bool, int, float, str, None) into
/// a JSON value; a non-finite float or another type is an error naming the field.
fn to_value(obj: &Bound<'_, PyAny>, path: &str) -> Result<Value, String> {
    let here = |p: &str| field(p);
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::from(v));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::from(v));
        }
        return Err(format!("{}: integer out of range", here(path)));
    }
    if obj.is_instance_of::<PyFloat>() {
        let v: f64 = obj.extract().map_err(|e| format!("{}: {e}", here(path)))?;
        return serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| format!("{}: expected a finite number, got {v}", here(path)));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_string()));
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut m = Map::new();
        for (k, v) in d.iter() {
            let k: String = k
                .extract()
                .map_err(|_| format!("{}: keys must be strings", here(path)))?;
            let v = to_value(&v, &join(&k))?;
            m.insert(k, v);
        }
        return Ok(Value::Object(m));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter().map_err(|e| e.to_string())?.enumerate() {
            let item = item.map_err(|e| e.to_string())?;
            out.push(to_value(&item, &join(&i.to_string()))?);
        }
        return Ok(Value::Array(out));
    }
    // numpy scalars and other numbers: an index (integers), else a float.
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(Value::from(v));
    }
    if let Ok(v) = obj.extract::<f64>() {
        return serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| format!("{}: expected a finite number, got {v}", here(path)));
    }
    let ty = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    Err(format!(
        "{}: a {ty} is not a JSON value (dict, list, number, string, bool or None)",
        here(path)
    ))
}

/// Parses a Python object (dict / list / JSON `str`) as `T`, with `what` naming it in errors:
/// `invalid {what}: field `a.b`: ...`, without parser positions.
pub fn from_python<T: DeserializeOwned>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    kind: Kind,
) -> PyResult<T> {
    let fail = |m: String| error(kind, format!("invalid {what}: {m}"));
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_string();
        let mut de = serde_json::Deserializer::from_str(&text);
        return match serde_path_to_error::deserialize::<_, T>(&mut de) {
            Ok(v) => de
                .end()
                .map(|()| v)
                .map_err(|e| fail(format!("trailing characters: {}", without_position(&e)))),
            Err(e) => {
                let p = e.path().to_string();
                match serde_json::from_str::<Value>(&text) {
                    // Valid JSON that is not a `T`, with the path lost (inside an internally
                    // tagged enum): the value is searched for the field, as for a dict.
                    Ok(value) if p.is_empty() || p == "." => from_value(value, what, kind),
                    _ => Err(fail(format!(
                        "{}: {}",
                        field(&p),
                        without_position(e.inner())
                    ))),
                }
            }
        };
    }
    let value = to_value(obj, "").map_err(fail)?;
    from_value(value, what, kind)
}

/// Deserializes a JSON value as `T`, with `what` naming it in errors: `invalid {what}: field
/// `a.b`: ...` (a value has no text, so no parser positions).
pub fn from_value<T: DeserializeOwned>(value: Value, what: &str, kind: Kind) -> PyResult<T> {
    let fail = |m: String| error(kind, format!("invalid {what}: {m}"));
    serde_path_to_error::deserialize::<_, T>(value.clone()).map_err(|e| {
        let mut p = e.path().to_string();
        let msg = e.inner().to_string();
        if p.is_empty() || p == "." {
            // Inside an internally tagged enum (e.g. a privacy event) serde buffers the fields
            // and the path is lost: find the value the message quotes.
            if let Some(found) = locate(&value, &msg) {
                p = found;
            }
        }
        fail(format!("{}: {msg}", field(&p)))
    })
}

/// How serde's `Unexpected` would describe a JSON value (`string "a"`, `integer `5``,
/// `floating point `1.5``, `boolean `true``, `sequence`, `map`, `null`).
fn describe(v: &Value) -> Vec<String> {
    match v {
        Value::Null => vec!["null".into(), "unit value".into()],
        Value::Bool(b) => vec![format!("boolean `{b}`")],
        Value::String(s) => vec![format!("string {s:?}")],
        Value::Array(_) => vec!["sequence".into()],
        Value::Object(_) => vec!["map".into()],
        Value::Number(n) => {
            let mut out = Vec::new();
            if let Some(i) = n.as_i64() {
                out.push(format!("integer `{i}`"));
            }
            if let Some(u) = n.as_u64() {
                out.push(format!("integer `{u}`"));
            }
            if let Some(f) = n.as_f64() {
                let t = f.to_string();
                let t = if t.contains(['.', 'e', 'E']) || !f.is_finite() {
                    t
                } else {
                    format!("{t}.0")
                };
                out.push(format!("floating point `{t}`"));
            }
            out
        }
    }
}

/// The path of the one value (not the top level) that an "invalid type/value: X, expected Y"
/// message describes as X, if exactly one matches.
fn locate(root: &Value, msg: &str) -> Option<String> {
    let rest = msg
        .strip_prefix("invalid type: ")
        .or_else(|| msg.strip_prefix("invalid value: "))?;
    let what = &rest[..rest.rfind(", expected")?];
    let mut found = Vec::new();
    fn walk(v: &Value, path: &str, what: &str, found: &mut Vec<String>) {
        if !path.is_empty() && describe(v).iter().any(|d| d == what) {
            found.push(path.to_string());
        }
        let join = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| walk(x, &join(k), what, found)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(x, &join(&i.to_string()), what, found)),
            _ => {}
        }
    }
    walk(root, "", what, &mut found);
    (found.len() == 1).then(|| found.remove(0))
}
