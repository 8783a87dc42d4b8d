//! Integer arrays: vectors of `Z_{2^b}` as `uint64` (distributed DP, secure aggregation) and
//! class labels or tokens as `uint32` (the FL models), copied in with clear errors and written
//! back as numpy arrays.
//!
//! Any integer dtype is accepted (numpy converts it; a negative value or one too large for the
//! target is an `InvalidInput` naming the position); floats and booleans are an `InvalidDtype`,
//! so a float vector is never silently truncated to integers. Inputs are copied before the GIL
//! is released, as in [`crate::arrays`].

use crate::errors::{Kind, error};
use numpy::{
    PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;

/// A copied integer input.
pub struct Ints<T> {
    /// The values, row-major.
    pub data: Vec<T>,
    /// The array's dimensions.
    pub dims: Vec<usize>,
}

enum Raw {
    Unsigned(Vec<u64>),
    Signed(Vec<i64>),
}

/// Copies `obj` (a numpy integer array, or a list of ints) as `u64` or `i64`, by its sign.
fn read_raw(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<(Raw, Vec<usize>)> {
    let py = obj.py();
    let np = py.import("numpy")?;
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => np
            .call_method1("asarray", (obj,))
            .map_err(|e| {
                error(
                    Kind::InvalidInput,
                    format!("`{name}` is not an array of integers: {e}"),
                )
            })?
            .cast_into::<PyUntypedArray>()?,
    };
    let dims = arr.shape().to_vec();
    let dt = arr.dtype();
    let kind = dt.kind();
    let (target, signed) = match kind {
        b'u' => ("uint64", false),
        b'i' => ("int64", true),
        _ => {
            let found = dt.str()?.to_string();
            return Err(error(
                Kind::InvalidDtype,
                format!(
                    "`{name}` has dtype {found}; expected an integer array (e.g. np.uint64); \
                     floats are not rounded silently"
                ),
            ));
        }
    };
    let c = np.call_method1("ascontiguousarray", (&arr, target))?;
    if signed {
        let a = c.cast::<PyArrayDyn<i64>>()?.readonly();
        Ok((Raw::Signed(a.as_slice()?.to_vec()), dims))
    } else {
        let a = c.cast::<PyArrayDyn<u64>>()?.readonly();
        Ok((Raw::Unsigned(a.as_slice()?.to_vec()), dims))
    }
}

fn out_of_range(name: &str, index: usize, value: impl std::fmt::Display, range: &str) -> PyErr {
    error(
        Kind::InvalidInput,
        format!("`{name}`: entry {index} is {value}, outside {range}"),
    )
}

/// Copies an integer array as `u64` (negative entries are an error).
pub fn read_u64(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Ints<u64>> {
    let (raw, dims) = read_raw(obj, name)?;
    let data = match raw {
        Raw::Unsigned(v) => v,
        Raw::Signed(v) => {
            if let Some(i) = v.iter().position(|&x| x < 0) {
                return Err(out_of_range(name, i, v[i], "[0, 2^64)"));
            }
            v.into_iter().map(|x| x as u64).collect()
        }
    };
    Ok(Ints { data, dims })
}

/// Copies a 1-D integer array as `u64`.
pub fn read_u64_vector(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u64>> {
    let v = read_u64(obj, name)?;
    if v.dims.len() != 1 {
        return Err(error(
            Kind::InvalidInput,
            format!("`{name}` must be 1-D; got shape {:?}", v.dims),
        ));
    }
    Ok(v.data)
}

/// Copies an integer array as `u32` (labels, tokens): entries must lie in `[0, 2^32)`.
pub fn read_u32(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Ints<u32>> {
    let (raw, dims) = read_raw(obj, name)?;
    let data = match raw {
        Raw::Unsigned(v) => v
            .iter()
            .enumerate()
            .map(|(i, &x)| u32::try_from(x).map_err(|_| out_of_range(name, i, x, "[0, 2^32)")))
            .collect::<PyResult<Vec<u32>>>()?,
        Raw::Signed(v) => v
            .iter()
            .enumerate()
            .map(|(i, &x)| u32::try_from(x).map_err(|_| out_of_range(name, i, x, "[0, 2^32)")))
            .collect::<PyResult<Vec<u32>>>()?,
    };
    Ok(Ints { data, dims })
}

/// A numpy `uint64` array of shape `dims` holding `data`.
pub fn write_u64<'py>(
    py: Python<'py>,
    data: Vec<u64>,
    dims: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, data).reshape(dims)?.into_any())
}
