//! Python bindings of privfed: the native module `privfed._privfed`, re-exported by the pure
//! Python package `privfed` (`python/privfed`). They wrap the library crates — never the
//! command line. The native module is flat (one namespace, one stub file
//! `python/privfed/_privfed.pyi`); the Python modules (`privfed.accounting`, `privfed.mvu`, …)
//! re-export it by topic. Each function is registered under its public name (`plan`, `design`,
//! `simulate`, …, unique across the flat module) and its Python module sets `__module__`, so
//! `help()` and argument errors show what the user called. Conventions:
//! * numpy in, numpy out (`float32`/`float64`; 1-D or batched 2-D), inputs copied and the GIL
//!   released during work;
//! * an OS-seeded CSPRNG by default, `seed=` for experiments (`rng`);
//! * every Rust error becomes a typed exception of `privfed.errors` (`errors`); nothing panics
//!   on input.

#![forbid(unsafe_code)]

mod accounting;
mod arrays;
mod audit;
mod central;
mod ddml;
mod distributed;
mod errors;
mod fl;
mod intarrays;
mod json;
mod mechanisms;
mod mvu;
mod rng;
mod secagg;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _privfed(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    mechanisms::register(m)?;
    central::register(m)?;
    accounting::register(m)?;
    mvu::register(m)?;
    distributed::register(m)?;
    secagg::register(m)?;
    ddml::register(m)?;
    fl::register(m)?;
    audit::register(m)?;
    Ok(())
}
