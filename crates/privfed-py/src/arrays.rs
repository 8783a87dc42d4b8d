//! numpy in, numpy out: reading `float32`/`float64` arrays (1-D or batched 2-D) into `f64`
//! buffers with clear errors, and writing results back in the caller's dtype.
//!
//! Inputs are copied before the GIL is released (a Python thread could otherwise write to the
//! array while Rust reads it); the copy is a small part of any mechanism's cost.

use crate::errors::{Kind, error};
use numpy::{
    PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyInt};

/// The floating-point type of an input, kept for the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `float32`.
    F32,
    /// `float64` (also Python floats and lists).
    F64,
}

/// The shape of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A Python scalar (`float` or `int`).
    Scalar,
    /// Any array, by its dimensions (row-major).
    Array,
}

/// A copied input.
pub struct Floats {
    /// The values, row-major.
    pub data: Vec<f64>,
    /// The array's dimensions (empty for a scalar).
    pub dims: Vec<usize>,
    /// The dtype to return.
    pub dtype: Dtype,
    /// Scalar or array.
    pub shape: Shape,
}

fn dtype_error(name: &str, found: &str) -> PyErr {
    error(
        Kind::InvalidDtype,
        format!(
            "`{name}` has dtype {found}; expected float32 or float64 (use x.astype(np.float64))"
        ),
    )
}

/// Copies `obj` (a numpy array of `float32`/`float64`, a Python float, or anything
/// `numpy.asarray` turns into `float64`) as `f64`.
pub fn read_floats(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Floats> {
    let py = obj.py();
    if obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyInt>() {
        let v: f64 = obj.extract()?;
        return Ok(Floats {
            data: vec![v],
            dims: vec![],
            dtype: Dtype::F64,
            shape: Shape::Scalar,
        });
    }
    let owned;
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => {
            // Lists and other sequences: numpy decides (a ragged list is its ValueError).
            owned = py
                .import("numpy")?
                .call_method1("asarray", (obj, "float64"))
                .map_err(|e| {
                    error(
                        Kind::InvalidInput,
                        format!("`{name}` is not an array of numbers: {e}"),
                    )
                })?;
            owned.cast_into::<PyUntypedArray>()?
        }
    };
    let dims = arr.shape().to_vec();
    if !arr.is_c_contiguous() {
        return Err(error(
            Kind::InvalidInput,
            format!(
                "`{name}` (shape {dims:?}) is not C-contiguous; pass np.ascontiguousarray({name})"
            ),
        ));
    }
    let dt = arr.dtype();
    if dt.is_equiv_to(&numpy::dtype::<f64>(py)) {
        let a = arr.cast::<PyArrayDyn<f64>>()?.readonly();
        Ok(Floats {
            data: a.as_slice()?.to_vec(),
            dims,
            dtype: Dtype::F64,
            shape: Shape::Array,
        })
    } else if dt.is_equiv_to(&numpy::dtype::<f32>(py)) {
        let a = arr.cast::<PyArrayDyn<f32>>()?.readonly();
        Ok(Floats {
            data: a.as_slice()?.iter().map(|&v| f64::from(v)).collect(),
            dims,
            dtype: Dtype::F32,
            shape: Shape::Array,
        })
    } else {
        Err(dtype_error(name, &dt.str()?.to_string()))
    }
}

/// Writes `data` back with `dims` in `dtype` (a Python float for [`Shape::Scalar`]).
pub fn write_floats<'py>(
    py: Python<'py>,
    data: Vec<f64>,
    dims: &[usize],
    dtype: Dtype,
    shape: Shape,
) -> PyResult<Bound<'py, PyAny>> {
    if shape == Shape::Scalar {
        return Ok(PyFloat::new(py, data.first().copied().unwrap_or(f64::NAN)).into_any());
    }
    match dtype {
        Dtype::F64 => Ok(PyArray1::from_vec(py, data).reshape(dims)?.into_any()),
        Dtype::F32 => {
            let v: Vec<f32> = data.iter().map(|&x| x as f32).collect();
            Ok(PyArray1::from_vec(py, v).reshape(dims)?.into_any())
        }
    }
}

#[allow(dead_code)] // for the protocol modules
/// Copies a 1-D `float64`-convertible vector (parameters, weights): any float dtype or list.
pub fn read_vector(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
    let f = read_floats(obj, name)?;
    if f.dims.len() != 1 {
        return Err(error(
            Kind::InvalidInput,
            format!("`{name}` must be 1-D; got shape {:?}", f.dims),
        ));
    }
    Ok(f.data)
}
