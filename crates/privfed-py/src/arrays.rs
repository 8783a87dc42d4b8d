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
#[allow(dead_code)] // `dtype` and `shape` are for the protocol modules
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

#[allow(dead_code)] // for the protocol modules
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

/// A private `float64` copy of an input, in memory numpy allocated (numpy asks the kernel for
/// huge pages on large arrays: a fresh 8 MB `Vec` costs ~2,000 page faults per call, measured
/// at 2–3× the mechanism's own time at d = 10^6). Only this crate holds a reference to the
/// copy, so it can be read with the GIL released.
pub struct PrivateFloats<'py> {
    /// The copy (C-contiguous `float64`).
    pub array: Bound<'py, PyArrayDyn<f64>>,
    /// The input's dimensions (empty for a scalar).
    pub dims: Vec<usize>,
    /// The dtype to return.
    pub dtype: Dtype,
    /// Scalar or array.
    pub shape: Shape,
}

/// Like [`read_floats`], into a private numpy copy.
pub fn read_private<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<PrivateFloats<'py>> {
    let py = obj.py();
    let np = py.import("numpy")?;
    if obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyInt>() {
        let v: f64 = obj.extract()?;
        return Ok(PrivateFloats {
            array: PyArray1::from_slice(py, &[v]).reshape(vec![1])?,
            dims: vec![],
            dtype: Dtype::F64,
            shape: Shape::Scalar,
        });
    }
    let (copy, dtype) = match obj.cast::<PyUntypedArray>() {
        Ok(arr) => {
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
            let dtype = if dt.is_equiv_to(&numpy::dtype::<f64>(py)) {
                Dtype::F64
            } else if dt.is_equiv_to(&numpy::dtype::<f32>(py)) {
                Dtype::F32
            } else {
                return Err(dtype_error(name, &dt.str()?.to_string()));
            };
            // `astype` always copies (copy=True is its default).
            (arr.call_method1("astype", ("float64",))?, dtype)
        }
        Err(_) => {
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("dtype", "float64")?;
            kwargs.set_item("copy", true)?;
            let a = np
                .getattr("array")?
                .call((obj,), Some(&kwargs))
                .map_err(|e| {
                    error(
                        Kind::InvalidInput,
                        format!("`{name}` is not an array of numbers: {e}"),
                    )
                })?;
            (np.call_method1("ascontiguousarray", (a,))?, Dtype::F64)
        }
    };
    let array = copy.cast_into::<PyArrayDyn<f64>>()?;
    let dims = array.shape().to_vec();
    Ok(PrivateFloats {
        array,
        dims,
        dtype,
        shape: Shape::Array,
    })
}

/// A new zeroed `float64` array of `dims` (numpy's allocation), for outputs written without
/// the GIL before anyone else can see the array.
pub fn new_output<'py>(py: Python<'py>, dims: &[usize]) -> Bound<'py, PyArrayDyn<f64>> {
    let dims: Vec<usize> = if dims.is_empty() {
        vec![1]
    } else {
        dims.to_vec()
    };
    PyArrayDyn::<f64>::zeros(py, dims, false)
}

/// Returns an output array to Python: as is (`float64`), cast (`float32`), or its one value
/// (a scalar input).
pub fn finish_output<'py>(
    out: Bound<'py, PyArrayDyn<f64>>,
    dtype: Dtype,
    shape: Shape,
) -> PyResult<Bound<'py, PyAny>> {
    if shape == Shape::Scalar {
        let v = out
            .readonly()
            .as_slice()?
            .first()
            .copied()
            .unwrap_or(f64::NAN);
        return Ok(PyFloat::new(out.py(), v).into_any());
    }
    match dtype {
        Dtype::F64 => Ok(out.into_any()),
        Dtype::F32 => out.call_method1("astype", ("float32",)),
    }
}
