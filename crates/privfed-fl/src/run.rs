//! A whole run, as `privfed fl train` and Python's `privfed.fl.train` drive it: a TOML file with
//! a `[data]` table ([`DataSpec`]) and the training sections ([`TrainConfig`]) ([`RunConfig`]);
//! the data loaded with randomness from the run's seed; the checkpoint it resumes from and
//! rewrites after every round; the outputs of a finished run (`metrics.csv`, `summary.json`,
//! `run.svg`, `run.png`) and its report ([`RunReport`], the CLI's `--json`) ([`Run`]).
//!
//! The front ends add only what is theirs: the progress display, Ctrl-C, printing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::FlError;
use super::config::{Seed, TrainConfig};
use super::data::FederatedData;
use super::spec::{DataSpec, Loaded};
use super::train::{
    RoundMetrics, Summary, Trainer, checkpoint_seed, history_csv, write_atomically,
};
use privfed_mechanisms::rng::StreamKey;
use privfed_plot::{Axis, Figure, Panel, Point, Series, Style};

/// Stream id of the data partition's generator (outside the training loop's purposes).
const DATA_STREAM: u64 = 7 << 56;

/// A whole run's configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunConfig {
    /// The data.
    pub data: DataSpec,
    /// Everything else.
    pub train: TrainConfig,
}

impl RunConfig {
    /// Parses a run's TOML: `[data]` plus the sections of [`TrainConfig`]. Unknown keys anywhere
    /// are errors naming the key.
    ///
    /// # Errors
    /// [`FlError::Config`] with the parser's message (line, key, expected values).
    pub fn from_toml(text: &str) -> Result<Self, FlError> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| FlError::Config(e.to_string()))?;
        let data = table
            .remove("data")
            .ok_or_else(|| FlError::Config("missing the [data] table".into()))?;
        let data: DataSpec = data
            .try_into()
            .map_err(|e: toml::de::Error| FlError::Config(format!("[data]: {e}")))?;
        let train: TrainConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| FlError::Config(e.to_string()))?;
        Ok(Self { data, train })
    }

    /// Reads and parses a config file.
    ///
    /// # Errors
    /// An unreadable file (named) or a bad config.
    pub fn read(path: &Path) -> Result<Self, FlError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| FlError::Config(format!("{}: {e}", path.display())))?;
        Self::from_toml(&text).map_err(|e| match e {
            FlError::Config(m) => FlError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Fixes the seed (drawn from the OS when the config has none) so the data and the training
    /// share it; returns it.
    pub fn fix_seed(&mut self) -> Seed {
        *self.train.seed.get_or_insert_with(Seed::from_os)
    }

    /// Loads the data, partitioned with randomness from the run's seed (fixed first if absent).
    ///
    /// # Errors
    /// From the data set (missing or malformed files, impossible partitions).
    pub fn load_data(&mut self, data_dir: &Path) -> Result<Loaded, FlError> {
        let seed = self.fix_seed();
        let mut rng = StreamKey::from_bytes(seed.0).stream(DATA_STREAM);
        Ok(self.data.load_with_rng(data_dir, &mut rng)?)
    }
}

/// Test accuracy and ε against rounds (two panels; ε only for private runs).
pub fn figure(title: &str, history: &[RoundMetrics]) -> Figure {
    let acc: Vec<Point> = history
        .iter()
        .filter_map(|m| m.accuracy.map(|a| Point::new(m.round as f64, a)))
        .collect();
    let eps: Vec<Point> = history
        .iter()
        .filter_map(|m| m.epsilon.map(|e| Point::new(m.round as f64, e)))
        .collect();
    let mut panels = vec![Panel {
        title: "test accuracy".into(),
        x: Axis::linear("round"),
        y: Axis::linear("accuracy"),
        series: vec![Series::points("accuracy", acc, Style::default())],
    }];
    if !eps.is_empty() {
        panels.push(Panel {
            title: "privacy spent".into(),
            x: Axis::linear("round"),
            y: Axis::linear("ε"),
            series: vec![Series::points(
                "ε",
                eps,
                Style {
                    color: 1,
                    ..Style::default()
                },
            )],
        });
    }
    Figure::new(title, panels)
}

/// Where a [`Run`] reads and writes.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Directory of the data sets (`mnist/`, `adult/`, `tinyshakespeare/`).
    pub data_dir: PathBuf,
    /// Write `metrics.csv`, `summary.json`, `run.svg`, `run.png` (and, by default, the
    /// checkpoint) here; created if missing.
    pub out_dir: Option<PathBuf>,
    /// The checkpoint file (default with `out_dir`: `out_dir/checkpoint.bin`): resumed from if
    /// it exists, rewritten after every round.
    pub checkpoint: Option<PathBuf>,
    /// Remove an existing checkpoint and start over.
    pub fresh: bool,
    /// Worker threads (at least 1). Results do not depend on it.
    pub threads: usize,
    /// The config file the run came from, recorded in `summary.json`.
    pub config_file: Option<PathBuf>,
}

/// The report of a finished (or paused) run: the [`Summary`] with every round's metrics, the
/// wall time of this invocation, the threads and the output directory — `privfed fl train
/// --json` and the dict `privfed.fl.train` returns.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run's summary (its keys are the report's top level).
    #[serde(flatten)]
    pub summary: Summary,
    /// One entry per completed round.
    pub rounds: Vec<RoundMetrics>,
    /// Wall-clock seconds of this invocation.
    pub seconds: f64,
    /// Worker threads.
    pub threads: usize,
    /// The output directory, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
}

/// One training run with its data, checkpoint and outputs. The [`Trainer`] borrows the data the
/// run owns:
///
/// ```no_run
/// # use privfed_fl::run::{Run, RunConfig, RunOptions};
/// # use privfed_fl::StepOutcome;
/// # fn main() -> Result<(), privfed_fl::FlError> {
/// let config = RunConfig::read("examples/fl/quickstart.toml".as_ref())?;
/// let options = RunOptions { data_dir: "../shared/data".into(), threads: 2, ..Default::default() };
/// let run = Run::open(config, options)?;
/// let mut trainer = run.trainer()?;
/// while let StepOutcome::Round(m) = trainer.step()? {
///     run.round_done(&trainer)?; // the checkpoint, if the run has one
///     println!("round {} ε {:?}", m.round, m.epsilon);
/// }
/// let report = run.finish(&trainer)?; // outputs written, report returned
/// # let _ = report;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Run {
    config: RunConfig,
    options: RunOptions,
    data: FederatedData,
    existing: Option<Vec<u8>>,
    started: Instant,
}

impl Run {
    /// Prepares a run: creates the output directory, removes the checkpoint when `fresh`, reads
    /// an existing one (whose seed the run takes when the config has none: the data partition
    /// depends on it), and loads the data.
    ///
    /// # Errors
    /// [`FlError::Io`] for a directory or checkpoint that cannot be created, removed or read;
    /// [`FlError::Checkpoint`] for a checkpoint that is not one; the data set's errors.
    pub fn open(config: RunConfig, options: RunOptions) -> Result<Self, FlError> {
        Self::prepare(config, options, None)
    }

    /// Prepares a run that resumes from a checkpoint's bytes (e.g. Python's
    /// `Trainer.resume(bytes, config)`) rather than from `options.checkpoint`'s file.
    ///
    /// # Errors
    /// As [`Run::open`].
    pub fn resume_from(
        config: RunConfig,
        options: RunOptions,
        checkpoint: Vec<u8>,
    ) -> Result<Self, FlError> {
        Self::prepare(config, options, Some(checkpoint))
    }

    fn prepare(
        mut config: RunConfig,
        mut options: RunOptions,
        bytes: Option<Vec<u8>>,
    ) -> Result<Self, FlError> {
        let started = Instant::now();
        if options.threads == 0 {
            return Err(FlError::Config("threads must be at least 1".into()));
        }
        if let Some(dir) = &options.out_dir {
            std::fs::create_dir_all(dir).map_err(|e| io_error("creating", dir, e))?;
        }
        if options.checkpoint.is_none() {
            options.checkpoint = options.out_dir.as_ref().map(|d| d.join("checkpoint.bin"));
        }
        if options.fresh
            && let Some(p) = &options.checkpoint
        {
            match std::fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("removing", p, e)),
            }
        }
        let existing = match (bytes, &options.checkpoint) {
            (Some(b), _) => Some(b),
            (None, Some(p)) if p.exists() => {
                Some(std::fs::read(p).map_err(|e| io_error("reading", p, e))?)
            }
            _ => None,
        };
        if let Some(bytes) = &existing
            && config.train.seed.is_none()
        {
            config.train.seed = Some(checkpoint_seed(bytes)?);
        }
        let data = config
            .load_data(&options.data_dir)
            .map_err(|e| {
                FlError::Data(format!(
                    "loading the data from {}: {e}",
                    options.data_dir.display()
                ))
            })?
            .data;
        Ok(Self {
            config,
            options,
            data,
            existing,
            started,
        })
    }

    /// The trainer: resumed from the checkpoint when there was one, else fresh.
    ///
    /// # Errors
    /// A config the data cannot train (named), or a checkpoint written by another config.
    pub fn trainer(&self) -> Result<Trainer<'_>, FlError> {
        let train = self.config.train.clone();
        match &self.existing {
            Some(bytes) => {
                Trainer::resume(train, &self.data, self.options.threads, bytes).map_err(|e| {
                    match &self.options.checkpoint {
                        Some(p) => FlError::Checkpoint(format!(
                            "resuming from {}: {e} (the fresh option starts over)",
                            p.display()
                        )),
                        None => e,
                    }
                })
            }
            None => Trainer::new(train, &self.data, self.options.threads),
        }
    }

    /// Whether the run resumes from a checkpoint.
    pub fn resumes(&self) -> bool {
        self.existing.is_some()
    }

    /// The run's configuration (its seed fixed).
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The data the run trains on.
    pub fn data(&self) -> &FederatedData {
        &self.data
    }

    /// After each round: rewrites the checkpoint (atomically), if the run has one.
    ///
    /// # Errors
    /// The checkpoint could not be written.
    pub fn round_done(&self, trainer: &Trainer<'_>) -> Result<(), FlError> {
        match &self.options.checkpoint {
            Some(p) => write_atomically(p, &trainer.checkpoint()?),
            None => Ok(()),
        }
    }

    /// Ends this invocation: the checkpoint once more (also after a budget stop, so a rerun
    /// sees the stop instead of retrying the round), the outputs, and the report.
    ///
    /// # Errors
    /// A file that could not be written (named).
    pub fn finish(&self, trainer: &Trainer<'_>) -> Result<RunReport, FlError> {
        self.round_done(trainer)?;
        if let Some(dir) = &self.options.out_dir {
            self.write_outputs(dir, trainer)?;
        }
        Ok(RunReport {
            summary: trainer.summary(),
            rounds: trainer.history().to_vec(),
            seconds: self.started.elapsed().as_secs_f64(),
            threads: self.options.threads,
            out: self
                .options
                .out_dir
                .as_ref()
                .map(|d| d.display().to_string()),
        })
    }

    /// `metrics.csv`, `summary.json` (the summary, the config and the config file) and, when
    /// the run evaluated, `run.svg` and `run.png`.
    fn write_outputs(&self, dir: &Path, trainer: &Trainer<'_>) -> Result<(), FlError> {
        #[derive(Serialize)]
        struct SummaryFile<'a> {
            #[serde(flatten)]
            summary: Summary,
            config: &'a TrainConfig,
            config_file: Option<String>,
        }
        let csv = dir.join("metrics.csv");
        std::fs::write(&csv, history_csv(trainer.history()))
            .map_err(|e| io_error("writing", &csv, e))?;
        let path = dir.join("summary.json");
        let file = SummaryFile {
            summary: trainer.summary(),
            config: trainer.config(),
            config_file: self
                .options
                .config_file
                .as_ref()
                .map(|p| p.display().to_string()),
        };
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| FlError::Io(format!("serializing {}: {e}", path.display())))?;
        std::fs::write(&path, text).map_err(|e| io_error("writing", &path, e))?;
        if trainer.history().iter().any(|m| m.accuracy.is_some()) {
            let title = format!("{} ({} rounds)", trainer.summary().data, trainer.round());
            let fig = figure(&title, trainer.history());
            for name in ["run.svg", "run.png"] {
                let p = dir.join(name);
                privfed_plot::write_figure(&fig, &p)
                    .map_err(|e| FlError::Io(format!("writing {}: {e}", p.display())))?;
            }
        }
        Ok(())
    }
}

/// `what` (creating, reading, …) `path` failed.
fn io_error(what: &str, path: &Path, e: std::io::Error) -> FlError {
    FlError::Io(format!("{what} {}: {e}", path.display()))
}
