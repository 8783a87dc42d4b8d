//! The central Gaussian step (`privfed_mechanisms::central::CentralGaussian`): project each
//! update onto the ℓ2 ball of radius `M`, average over a given batch size and add
//! `N(0, (z·M/batch)²)` per coordinate from privfed's generator (`docs/RANDOMNESS.md`).
//! privfed.flwr's central-DP strategy draws all of its noise here.

use crate::arrays::{new_output, read_floats};
use crate::errors::{Kind, PyResultExt, error};
use crate::rng::SharedRng;
use numpy::{PyArrayDyn, PyArrayMethods};
use privfed_mechanisms::central::CentralGaussian as CentralGaussianMech;
use pyo3::prelude::*;

/// Clip to `clip_norm` (ℓ2), average, add Gaussian noise of standard deviation
/// `noise_multiplier·clip_norm/batch_size` (paper 000 eq. 13's central layer).
///
/// Privacy is not computed here: account the release with `privfed.accounting`.
#[pyclass(frozen, module = "privfed")]
pub struct CentralGaussian {
    inner: CentralGaussianMech,
    rng: SharedRng,
}

#[pymethods]
impl CentralGaussian {
    #[new]
    #[pyo3(signature = (clip_norm, noise_multiplier, *, seed=None))]
    fn new(
        clip_norm: f64,
        noise_multiplier: f64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            inner: CentralGaussianMech::new(clip_norm, noise_multiplier).py()?,
            rng: SharedRng::new(seed)?,
        })
    }

    /// `M`, the radius of the ℓ2 ball the updates are projected onto.
    #[getter]
    fn clip_norm(&self) -> f64 {
        self.inner.clip_norm()
    }

    /// `z`, the noise standard deviation in units of `M/batch_size`.
    #[getter]
    fn noise_multiplier(&self) -> f64 {
        self.inner.noise_multiplier()
    }

    /// `z·M/batch_size`: the standard deviation of the noise `aggregate` adds to the average.
    fn noise_std(&self, batch_size: f64) -> f64 {
        self.inner.noise_std(batch_size)
    }

    /// `v·min(1, M/‖v‖₂)` (float64, shape `(dim,)`); the result's computed norm is at most `M`.
    fn project<'py>(&self, py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let f = read_floats(v, "v")?;
        if f.dims.len() != 1 {
            return Err(error(
                Kind::InvalidInput,
                format!(
                    "project takes one vector of shape (dim,); got shape {:?}",
                    f.dims
                ),
            ));
        }
        let p = py.detach(|| self.inner.project(&f.data));
        Ok(numpy::PyArray1::from_vec(py, p).into_any())
    }

    /// `(Σ_i Π_M(u_i))/batch_size + N(0, σ²I)`, `σ = z·M/batch_size`, over the rows of
    /// `updates` (shape `(n, dim)`, float32 or float64; `n` may be 0: pure noise). float64 out.
    fn aggregate<'py>(
        &self,
        py: Python<'py>,
        updates: &Bound<'py, PyAny>,
        batch_size: f64,
    ) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
        let f = read_floats(updates, "updates")?;
        if f.dims.len() != 2 {
            return Err(error(
                Kind::InvalidInput,
                format!("updates must have shape (n, dim); got shape {:?}", f.dims),
            ));
        }
        let dim = f.dims[1];
        let mut rng = self.rng.fork();
        let m = &self.inner;
        let rows: Vec<&[f64]> = if dim == 0 {
            Vec::new()
        } else {
            f.data.chunks(dim).collect()
        };
        let mean = py
            .detach(|| m.aggregate(rows, dim, batch_size, &mut rng))
            .py()?;
        let out = new_output(py, &[dim]);
        out.readwrite().as_slice_mut()?.copy_from_slice(&mean);
        Ok(out)
    }
}

/// Registers the class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CentralGaussian>()
}
