//! `privfed plot`: an SVG or PNG figure from a CSV an experiment wrote
//! ([`privfed_plot::table`]).

use anyhow::{Result, bail};
use clap::Args;
use privfed_plot::table::{Table, TableSpec, figure_from_table};
use privfed_plot::{ErrorStyle, ImageFormat, Scale, write_png, write_svg};
use std::path::PathBuf;

/// Arguments of `privfed plot`.
#[derive(Debug, Args)]
#[command(after_help = "Example (paper 001's DME figure, one panel per n):\n  \
    privfed plot experiments/paper001_dme.csv --x epsilon_target --y mse_per_coord \\\n    \
    --interval mse_per_coord_lo,mse_per_coord_hi --series mechanism,bits --dash-by mechanism \\\n    \
    --panel clients --log-y --out experiments/paper001_dme.svg\n\n\
    Rows with an empty y cell are skipped; a series whose only row has an empty x cell is drawn \
    as a horizontal reference line. With several --y columns (a wide table) each is its own \
    series; the virtual column @y (the y column's name) can be given to --color-by and --dash-by. \
    --out FILE.png writes a PNG of the same picture.")]
pub struct PlotArgs {
    /// The CSV file (header row, comma-separated, RFC 4180 quotes).
    csv: PathBuf,
    /// Column of x.
    #[arg(long)]
    x: String,
    /// Column of y, or several (comma-separated) for a wide table: one series per column.
    #[arg(long, value_delimiter = ',', required = true)]
    y: Vec<String>,
    /// Columns of the interval around y: LOWER,UPPER (e.g. a 95% confidence interval).
    #[arg(long, value_delimiter = ',', num_args = 1)]
    interval: Vec<String>,
    /// Column of a standard error: the interval is y ± F·SE with F from --se-times.
    #[arg(long, value_name = "COLUMN", conflicts_with_all = ["interval", "average"])]
    se: Option<String>,
    /// The factor F of --se (1: ±1 standard error; 1.96: a normal 95% interval).
    #[arg(long, default_value_t = 1.0, requires = "se")]
    se_times: f64,
    /// Average the rows of a series that share an x (e.g. one row per trial): the mean with its
    /// 95% Student-t interval.
    #[arg(long, conflicts_with = "interval")]
    average: bool,
    /// Draw intervals as a shaded band or as error bars.
    #[arg(long, value_enum, default_value_t = ErrorStyle::Band)]
    errors: ErrorStyle,
    /// Columns whose values name a series (comma-separated).
    #[arg(long, value_delimiter = ',')]
    series: Vec<String>,
    /// Columns whose values name a panel; panels are placed side by side.
    #[arg(long, value_delimiter = ',')]
    panel: Vec<String>,
    /// Keep only rows with COLUMN=VALUE, or COLUMN=V1|V2|… for any of several values (numeric
    /// comparison when both are numbers); repeatable.
    #[arg(long = "where", value_name = "COLUMN=VALUE")]
    filters: Vec<String>,
    /// Columns that choose the colour (default: the series columns other than --dash-by).
    #[arg(long, value_delimiter = ',')]
    color_by: Vec<String>,
    /// Column that chooses the dash pattern.
    #[arg(long)]
    dash_by: Option<String>,
    /// Logarithmic x axis (every x must be > 0).
    #[arg(long)]
    log_x: bool,
    /// Logarithmic y axis (every y must be > 0; interval lower ends ≤ 0 are clipped).
    #[arg(long)]
    log_y: bool,
    /// Label of the x axis (default: the column name).
    #[arg(long, default_value = "")]
    x_label: String,
    /// Label of the y axis (default: the column name).
    #[arg(long, default_value = "")]
    y_label: String,
    /// Title of the figure.
    #[arg(long, default_value = "")]
    title: String,
    /// Size of one panel in pixels, WIDTHxHEIGHT.
    #[arg(long, default_value = "420x320")]
    size: String,
    /// Where to write the figure: FILE.svg or FILE.png.
    #[arg(long, short)]
    out: PathBuf,
    /// PNG only: pixels per SVG unit (2 gives twice the SVG's width and height).
    #[arg(long, default_value_t = privfed_plot::DEFAULT_PNG_SCALE)]
    png_scale: f64,
}

/// Runs `privfed plot`.
pub fn run(args: &PlotArgs) -> Result<()> {
    let interval = match args.interval.as_slice() {
        [] => None,
        [lo, hi] => Some((lo.clone(), hi.clone())),
        _ => bail!("--interval takes two columns: LOWER,UPPER"),
    };
    let filters = args
        .filters
        .iter()
        .map(|f| match f.split_once('=') {
            Some((c, v)) if !c.is_empty() => {
                Ok((c.to_string(), v.split('|').map(str::to_string).collect()))
            }
            _ => bail!("--where takes COLUMN=VALUE (got {f:?})"),
        })
        .collect::<Result<Vec<_>>>()?;
    let size = args
        .size
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse::<f64>().ok()?, h.trim().parse::<f64>().ok()?)));
    let Some(size) = size else {
        bail!("--size takes WIDTHxHEIGHT in pixels (got {:?})", args.size);
    };
    let scale = |log: bool| if log { Scale::Log } else { Scale::Linear };
    // Before any work: an output name that is neither .svg nor .png is an error.
    let format = ImageFormat::from_path(&args.out)?;
    let (y, more_y) = match args.y.split_first() {
        Some((y, more)) => (y.clone(), more.to_vec()),
        None => bail!("--y takes at least one column"),
    };
    let spec = TableSpec {
        x: args.x.clone(),
        y,
        more_y,
        interval,
        se: args.se.clone().map(|c| (c, args.se_times)),
        average: args.average,
        series: args.series.clone(),
        panels: args.panel.clone(),
        filters,
        color_by: args.color_by.clone(),
        dash_by: args.dash_by.clone(),
        errors: args.errors,
        x_scale: scale(args.log_x),
        y_scale: scale(args.log_y),
        x_label: args.x_label.clone(),
        y_label: args.y_label.clone(),
        title: args.title.clone(),
        panel_size: Some(size),
    };
    let table = Table::read(&args.csv)?;
    let figure = figure_from_table(&table, &spec)?;
    match format {
        ImageFormat::Svg => write_svg(&figure, &args.out)?,
        ImageFormat::Png => write_png(&figure, &args.out, args.png_scale)?,
    }
    let series: usize = figure.panels.iter().map(|p| p.series.len()).sum();
    eprintln!(
        "wrote {} ({} panels, {series} series)",
        args.out.display(),
        figure.panels.len()
    );
    Ok(())
}
