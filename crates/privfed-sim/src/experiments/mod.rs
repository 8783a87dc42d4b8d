//! The experiment grids of the papers, reproducible from a seed: paper 003's Draw-and-Discard
//! grids ([`ddml`]), paper 004's scalar and vector MVU experiments ([`mvu`]), paper 001's
//! comparison of accounting methods ([`paper001`]) and papers 000/001's grids of training runs
//! ([`fl`]).
//!
//! Every grid is run by the one grid runner, [`grid::Grid`] (labelled points, the cartesian
//! product of named axes, repeats with derived seeds, progress, results per point), and every
//! CSV is written by the one CSV writer, [`privfed_plot::csv::CsvWriter`]. Progress goes to an
//! [`Observer`] (the CLI draws progress bars and prints the messages on standard error); results
//! are CSV text (written to files by [`ddml`], returned by [`mvu`] and [`paper001`], written by
//! the CLI for [`fl`]).

pub mod ddml;
pub mod fl;
pub mod grid;
pub mod mvu;
pub mod paper001;

use crate::mechanism::BuildError;
use crate::simulate::Progress;
use privfed_accounting::AccountingError;
use privfed_learn::LearnError;
use privfed_mechanisms::MechanismError;
use std::path::PathBuf;

/// Receives the progress of an experiment.
pub trait Observer {
    /// One line for a human (what is being designed or run, what was written).
    fn message(&mut self, line: &str);
    /// A simulation run starts (paper 003 grids).
    fn run_started(&mut self) {}
    /// Progress of the current simulation run.
    fn run_progress(&mut self, _progress: &Progress) {}
    /// The current simulation run ended.
    fn run_finished(&mut self) {}
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Observer for Silent {
    fn message(&mut self, _line: &str) {}
}

/// Why an experiment failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// An invalid option (the message names it).
    #[error("{0}")]
    Options(String),
    /// A mechanism could not be built or designed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A mechanism failed.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// An accounting computation failed.
    #[error(transparent)]
    Accounting(#[from] AccountingError),
    /// A simulation or summary failed.
    #[error(transparent)]
    Learn(#[from] LearnError),
    /// A data set could not be built (the synthetic one).
    #[error(transparent)]
    Data(#[from] privfed_fl::datasets::DataError),
    /// A data set could not be loaded.
    #[error("loading {what} from {}", path.display())]
    Load {
        /// The data set.
        what: &'static str,
        /// Its directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: privfed_fl::datasets::DataError,
    },
    /// A result file or directory could not be written.
    #[error("{action} {}", path.display())]
    Write {
        /// `writing` or `creating`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Formatting a CSV row failed.
    #[error("formatting a CSV row")]
    Fmt(#[from] std::fmt::Error),
    /// An internal consistency check failed (a bug).
    #[error("internal: {0}")]
    Internal(String),
}

/// Writes `body` to `dir/name` and tells the observer.
fn write_file(
    dir: &std::path::Path,
    name: &str,
    body: &str,
    observer: &mut dyn Observer,
) -> Result<(), ExperimentError> {
    let p = dir.join(name);
    std::fs::write(&p, body).map_err(|source| ExperimentError::Write {
        action: "writing",
        path: p.clone(),
        source,
    })?;
    observer.message(&format!("wrote {}", p.display()));
    Ok(())
}
