//! A run as the command line (and later the Python bindings) sees it: a TOML file with a `[data]`
//! table ([`DataSpec`]) and the training sections ([`TrainConfig`]), the data loaded with
//! randomness from the run's seed, and the figure of a finished run.

use std::path::Path;

use serde::Serialize;

use super::FlError;
use super::config::{Seed, TrainConfig};
use super::spec::{DataSpec, Loaded};
use super::train::RoundMetrics;
use crate::plot::{Axis, Figure, Panel, Point, Series, Style};
use privfed_mechanisms::rng::StreamKey;

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
