//! # privfed-plot
//!
//! Figures for the experiments: line plots with several series, linear or log axes, 95% bands or
//! error bars, legends, axis labels and titles, written as SVG or PNG.
//!
//! The SVG is written by hand (no plotting crate), and the axes are ours to get right — log axes
//! put their major ticks on whole decades (labels `10^k`) with minor ticks at 2–9 × 10^k, linear
//! axes on 1–2–5 steps. (Measured before choosing: plotters 0.3.7 with only its SVG backend
//! builds without fonts and 24 crates, but its log axis over [1e-3, 1] labelled 0.01, 0.1 and
//! 1.0 only, and its PNG backend needs a font file.)
//!
//! PNG is the same SVG rasterized ([`render_png`]): resvg (usvg + tiny-skia, pure Rust) draws
//! it, and its text is set in Ubuntu Light (Hack as the fallback for characters Ubuntu lacks,
//! such as the superscript minus of `10⁻³`), font bytes that the `epaint_default_fonts` crate
//! (egui's default fonts: Ubuntu Light under the Ubuntu Font Licence 1.0, Hack under MIT and the
//! Bitstream Vera licence) compiles into the binary — no system font, fontconfig or freetype.
//! The SVG names `Ubuntu` first in its `font-family`, so a viewer that has the font shows the SVG
//! as the PNG; others fall back to DejaVu Sans, Helvetica or Arial (the layout assumes ≈ 6.8
//! pixels per character at 12 pixels, which all of them roughly meet). Titles are marked bold but
//! are drawn in the Light face in the PNG (the crate ships no bold face). Cost, measured with
//! `cargo build --release -p privfed -j 1` on the project's 2-core machine: 37 more crates,
//! about 5 more minutes of a cold single-job build, +4.1 MB on the stripped `privfed` binary
//! (12.5 → 16.7 MB; 0.67 MB of it the fonts); drawing a two-panel figure as PNG takes ≈ 70 ms
//! more than as SVG. Details in `BENCHMARKS.md` ("PNG figures").
//!
//! * [`Figure`] → [`Panel`]s side by side → [`Series`]; [`render_svg`] turns it into SVG text
//!   (validated first: NaN, ∞, empty input or non-positive values on a log axis are a
//!   [`PlotError`], never a broken picture); [`render_png`] into PNG bytes; [`write_figure`]
//!   writes either, by the file's extension.
//! * [`table`]: a figure from a CSV that an experiment wrote (columns for x, y, interval,
//!   series, panels, filters), which is what `privfed plot` does; [`csv`]: the one CSV writer
//!   (RFC 4180) that every experiment and training run writes its tables with.
//!
//! Each series is a `<g class="series" data-series="NAME">` group and the legend a
//! `<g class="legend">` group, so a figure can be checked by reading its SVG.
//!
//! ## Example
//! ```
//! use privfed_plot::{Axis, Figure, Panel, Point, Series, Style, render_png, render_svg};
//!
//! let pts = |c: f64| (1..=6).map(|e| Point::with_interval(e as f64, c / e as f64, 0.9 * c / e as f64, 1.1 * c / e as f64)).collect();
//! let panel = Panel {
//!     title: "n = 100".into(),
//!     x: Axis::linear("ε"),
//!     y: Axis::log("MSE"),
//!     series: vec![
//!         Series::points("gaussian", pts(0.05), Style::default()),
//!         Series::points("skellam", pts(0.07), Style { color: 1, ..Style::default() }),
//!     ],
//! };
//! let figure = Figure::new("DME", vec![panel]);
//! let svg = render_svg(&figure).unwrap();
//! assert!(svg.contains(r#"data-series="skellam""#));
//! // The same picture as PNG, at 2 pixels per SVG unit (`write_figure` picks by extension).
//! let png = render_png(&figure, 2.0).unwrap();
//! assert!(png.starts_with(b"\x89PNG"));
//! ```

pub mod csv;
mod png;
pub mod stats;
mod svg;
pub mod table;
mod ticks;

pub use png::{DEFAULT_PNG_SCALE, render_png, write_png};
pub use svg::render_svg;
pub use ticks::{Tick, TickLabel, Ticks, linear_ticks, log_ticks};

use std::path::{Path, PathBuf};

/// Why a figure could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// Nothing to draw (no panels, no series, a series without points, a CSV without rows).
    #[error("nothing to plot: {0}")]
    Empty(String),
    /// A coordinate was NaN or infinite.
    #[error("series {series:?}, point {index}: {field} is {value} (must be finite)")]
    NonFinite {
        /// The series.
        series: String,
        /// Index of the point in the series.
        index: usize,
        /// `x`, `y`, `lower` or `upper`.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// A value on a log axis was not positive (interval lower ends may be ≤ 0: they are clipped).
    #[error("series {series:?}: {axis} value {value} cannot be shown on a log axis (must be > 0)")]
    NonPositiveOnLog {
        /// The series.
        series: String,
        /// `x` or `y`.
        axis: &'static str,
        /// The value.
        value: f64,
    },
    /// An interval that does not contain its point (`lower ≤ y ≤ upper` is required).
    #[error(
        "series {series:?}, point {index}: interval [{lower}, {upper}] does not contain y = {y}"
    )]
    BadInterval {
        /// The series.
        series: String,
        /// Index of the point.
        index: usize,
        /// The point's y.
        y: f64,
        /// Lower end.
        lower: f64,
        /// Upper end.
        upper: f64,
    },
    /// The panel size was not finite or too small (at least 120 × 100 pixels).
    #[error("panel size {width} × {height} is invalid (at least 120 × 100 pixels)")]
    Size {
        /// Width in pixels.
        width: f64,
        /// Height in pixels.
        height: f64,
    },
    /// A CSV could not be parsed.
    #[error("CSV line {line}: {message}")]
    Csv {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// A column named in the request is not in the CSV.
    #[error("no column {name:?} in the CSV (columns: {available})")]
    MissingColumn {
        /// The requested column.
        name: String,
        /// The columns there are, comma-separated.
        available: String,
    },
    /// A cell that must be a number is not.
    #[error("CSV line {line}, column {column:?}: {value:?} is not a number")]
    NotANumber {
        /// 1-based line number.
        line: usize,
        /// The column.
        column: String,
        /// The cell.
        value: String,
    },
    /// An invalid request (the message names the option).
    #[error("{0}")]
    Options(String),
    /// The SVG could not be rasterized or the PNG encoded (a bug, not bad input: the message
    /// is the rasterizer's).
    #[error("rendering the PNG: {0}")]
    Render(String),
    /// The PNG would be too large (at most 16,384 pixels a side) or empty.
    #[error("a PNG of {width} × {height} pixels is out of range (1 to 16384 pixels a side)")]
    Raster {
        /// Width in pixels.
        width: f64,
        /// Height in pixels.
        height: f64,
    },
    /// A file could not be read or written.
    #[error("{action} {}", path.display())]
    Io {
        /// `reading` or `writing`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Result type of this module.
pub type Result<T> = std::result::Result<T, PlotError>;

/// How an axis maps values to positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Scale {
    /// Linear, ticks on 1–2–5 steps.
    #[default]
    Linear,
    /// Base-10 logarithmic, ticks on decades; every value must be > 0.
    Log,
}

/// An axis: its label and scale (the range comes from the data).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Axis {
    /// Label under (x) or beside (y) the axis.
    pub label: String,
    /// Linear or log.
    pub scale: Scale,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
        }
    }

    /// A log axis.
    pub fn log(label: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            scale: Scale::Log,
        }
    }
}

/// How a series shows its intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ErrorStyle {
    /// A shaded band between the lower and upper ends.
    #[default]
    Band,
    /// A vertical bar with caps at each point.
    Bars,
}

/// The look of a series: indices into a fixed palette and a fixed list of dash patterns (both
/// wrap around), and how intervals are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    /// Palette index (10 colours).
    pub color: usize,
    /// Dash index (0 solid, then dashed, dotted, dash-dot).
    pub dash: usize,
    /// Band or bars.
    pub errors: ErrorStyle,
}

/// One point, with an optional interval around its y (e.g. a 95% confidence interval).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// `(lower, upper)` with `lower ≤ y ≤ upper`.
    pub interval: Option<(f64, f64)>,
}

impl Point {
    /// A point without interval.
    pub fn new(x: f64, y: f64) -> Self {
        Point {
            x,
            y,
            interval: None,
        }
    }

    /// A point with the interval `[lower, upper]`.
    pub fn with_interval(x: f64, y: f64, lower: f64, upper: f64) -> Self {
        Point {
            x,
            y,
            interval: Some((lower, upper)),
        }
    }
}

/// What a series holds.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesData {
    /// Points joined by a line in the given order.
    Points(Vec<Point>),
    /// A horizontal line across the panel at `y` (with its interval as a band): a reference
    /// that has no x, e.g. the continuous Gaussian in a plot against bit width.
    Level {
        /// The level.
        y: f64,
        /// Optional `(lower, upper)`.
        interval: Option<(f64, f64)>,
    },
}

/// A named series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry (series with the same name and style share one legend entry).
    pub name: String,
    /// Its data.
    pub data: SeriesData,
    /// Its look.
    pub style: Style,
}

impl Series {
    /// A series of points.
    pub fn points(name: impl Into<String>, points: Vec<Point>, style: Style) -> Self {
        Series {
            name: name.into(),
            data: SeriesData::Points(points),
            style,
        }
    }

    /// A horizontal reference line.
    pub fn level(
        name: impl Into<String>,
        y: f64,
        interval: Option<(f64, f64)>,
        style: Style,
    ) -> Self {
        Series {
            name: name.into(),
            data: SeriesData::Level { y, interval },
            style,
        }
    }
}

/// One plot area with its axes and series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Panel {
    /// Title above the panel (may be empty).
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The series, drawn in order.
    pub series: Vec<Series>,
}

/// A figure: panels side by side, a title, one legend for all panels on the right.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Title on top (may be empty).
    pub title: String,
    /// The panels, left to right.
    pub panels: Vec<Panel>,
    /// Width of one panel in pixels (default 420).
    pub panel_width: f64,
    /// Height of one panel in pixels (default 320).
    pub panel_height: f64,
    /// Heading of the legend (may be empty).
    pub legend_title: String,
}

impl Figure {
    /// A figure with the default panel size.
    pub fn new(title: impl Into<String>, panels: Vec<Panel>) -> Self {
        Figure {
            title: title.into(),
            panels,
            panel_width: 420.0,
            panel_height: 320.0,
            legend_title: String::new(),
        }
    }
}

/// The image formats a figure can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// SVG text ([`render_svg`]).
    Svg,
    /// PNG pixels ([`render_png`]).
    Png,
}

impl ImageFormat {
    /// The format named by `path`'s extension (`.svg` or `.png`, any case); anything else is a
    /// [`PlotError::Options`].
    pub fn from_path(path: &Path) -> Result<ImageFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("svg") => Ok(ImageFormat::Svg),
            Some("png") => Ok(ImageFormat::Png),
            _ => Err(PlotError::Options(format!(
                "cannot tell the image format of {}: the file name must end in .svg or .png",
                path.display()
            ))),
        }
    }
}

/// Writes `figure` to `path` as SVG or PNG, chosen by the extension ([`ImageFormat::from_path`]);
/// PNG at [`DEFAULT_PNG_SCALE`] pixels per SVG unit.
pub fn write_figure(figure: &Figure, path: &Path) -> Result<()> {
    match ImageFormat::from_path(path)? {
        ImageFormat::Svg => write_svg(figure, path),
        ImageFormat::Png => write_png(figure, path, DEFAULT_PNG_SCALE),
    }
}

/// Renders `figure` and writes it to `path` as SVG.
pub fn write_svg(figure: &Figure, path: &Path) -> Result<()> {
    let svg = render_svg(figure)?;
    std::fs::write(path, svg).map_err(|source| PlotError::Io {
        action: "writing",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
