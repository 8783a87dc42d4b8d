//! A figure from a CSV written by an experiment: which columns are x, y and the interval, which
//! columns name a series or a panel, which rows to keep. This is `privfed plot`.
//!
//! * Rows whose y cell is empty are skipped (an experiment writes them for settings it could not
//!   run, e.g. an infeasible plan, with a note).
//! * A series whose single row has an empty x cell becomes a horizontal reference line
//!   ([`SeriesData::Level`]), e.g. the continuous Gaussian, which has no bit width, in a plot
//!   against bits.
//! * Series get the same colour and dash in every panel: colour by the distinct values of the
//!   `color_by` columns (default: the series columns other than `dash_by`), dash by those of
//!   `dash_by`.
//! * Wide tables: with several y columns ([`TableSpec::more_y`]) each row gives one point per y
//!   column, and the name of the y column acts as one more series column, the virtual column
//!   [`Y_COLUMN`] (`@y`), which `color_by` and `dash_by` may name too. The interval applies to
//!   the first y column only.
//! * The interval comes from two columns (`interval`), from a standard-error column (`se`:
//!   y ± f·se), or, with `average`, from the rows themselves: rows of one series with the same x
//!   become their mean with its 95% Student-t interval (e.g. one row per trial).

use super::{
    Axis, ErrorStyle, Figure, Panel, PlotError, Point, Result, Scale, Series, SeriesData, Style,
};
use crate::stats::t_quantile_975;
use std::collections::BTreeMap;
use std::path::Path;

/// The name of the virtual column that holds, for each point, the name of its y column (for
/// `series`, `color_by` and `dash_by` when a spec has several y columns).
pub const Y_COLUMN: &str = "@y";

/// A parsed CSV: a header and rows of text cells (RFC 4180 quoting).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows, each as long as the header, with their 1-based line numbers.
    pub rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    /// Parses CSV text (comma-separated, `"` quoting with `""` escapes, `\n` or `\r\n` lines).
    pub fn parse(text: &str) -> Result<Table> {
        let mut records: Vec<(usize, Vec<String>)> = Vec::new();
        let (mut field, mut record) = (String::new(), Vec::new());
        let (mut quoted, mut line, mut start) = (false, 1usize, 1usize);
        let mut chars = text.chars().peekable();
        let mut dirty = false;
        while let Some(c) = chars.next() {
            if quoted {
                match c {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => quoted = false,
                    '\n' => {
                        line += 1;
                        field.push(c);
                    }
                    c => field.push(c),
                }
                continue;
            }
            match c {
                '"' if field.is_empty() => {
                    quoted = true;
                    dirty = true;
                }
                ',' => {
                    record.push(std::mem::take(&mut field));
                    dirty = true;
                }
                '\r' if chars.peek() == Some(&'\n') => {}
                '\n' => {
                    if dirty || !field.is_empty() {
                        record.push(std::mem::take(&mut field));
                        records.push((start, std::mem::take(&mut record)));
                    }
                    dirty = false;
                    line += 1;
                    start = line;
                }
                c => {
                    field.push(c);
                    dirty = true;
                }
            }
        }
        if quoted {
            return Err(PlotError::Csv {
                line: start,
                message: "unterminated quoted field".into(),
            });
        }
        if dirty || !field.is_empty() {
            record.push(field);
            records.push((start, record));
        }
        let mut it = records.into_iter();
        let (_, header) = it
            .next()
            .ok_or_else(|| PlotError::Empty("the CSV is empty".into()))?;
        let header: Vec<String> = header.into_iter().map(|h| h.trim().to_string()).collect();
        let rows = it
            .map(|(l, r)| {
                if r.len() == header.len() {
                    Ok((l, r))
                } else {
                    Err(PlotError::Csv {
                        line: l,
                        message: format!("{} cells, the header has {}", r.len(), header.len()),
                    })
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Table { header, rows })
    }

    /// Reads and parses a CSV file.
    pub fn read(path: &Path) -> Result<Table> {
        let text = std::fs::read_to_string(path).map_err(|source| PlotError::Io {
            action: "reading",
            path: path.to_path_buf(),
            source,
        })?;
        Table::parse(&text)
    }

    /// Index of column `name`.
    pub fn column(&self, name: &str) -> Result<usize> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| PlotError::MissingColumn {
                name: name.into(),
                available: self.header.join(","),
            })
    }
}

/// What to plot from a [`Table`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TableSpec {
    /// Column of x.
    pub x: String,
    /// Column of y.
    pub y: String,
    /// Further y columns (a wide table): every row gives one point for `y` and one for each of
    /// these, and the y column's name becomes part of the series name (the virtual column
    /// [`Y_COLUMN`]).
    pub more_y: Vec<String>,
    /// Columns of the interval's lower and upper ends (both or neither).
    pub interval: Option<(String, String)>,
    /// A standard-error column and a factor `f`: the interval is `y ± f·se` (e.g. `f = 1` for
    /// ±1 s.e.). Not together with `interval` or `average`.
    pub se: Option<(String, f64)>,
    /// Average the rows of a series that share an x: the point is their mean and its interval
    /// the 95% Student-t interval of the mean (none for a single row). Not together with
    /// `interval` or `se`.
    pub average: bool,
    /// Columns whose values name a series (none: one series).
    pub series: Vec<String>,
    /// Columns whose values name a panel (none: one panel).
    pub panels: Vec<String>,
    /// Keep only rows where each column equals one of the values (numerically when both parse).
    pub filters: Vec<(String, Vec<String>)>,
    /// Columns that pick the colour (empty: the series columns other than `dash_by`).
    pub color_by: Vec<String>,
    /// Column that picks the dash pattern.
    pub dash_by: Option<String>,
    /// Bands or bars.
    pub errors: ErrorStyle,
    /// Scale of x.
    pub x_scale: Scale,
    /// Scale of y.
    pub y_scale: Scale,
    /// Label of x (empty: the column name).
    pub x_label: String,
    /// Label of y (empty: the column name).
    pub y_label: String,
    /// Figure title.
    pub title: String,
    /// Panel size in pixels; `None`: the default.
    pub panel_size: Option<(f64, f64)>,
}

/// Whether cell `a` equals the requested value `b` (as numbers when both parse).
fn cell_matches(a: &str, b: &str) -> bool {
    match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

fn number(table: &Table, line: usize, col: usize, cell: &str) -> Result<f64> {
    cell.trim()
        .parse::<f64>()
        .map_err(|_| PlotError::NotANumber {
            line,
            column: table.header[col].clone(),
            value: cell.into(),
        })
}

/// A column of the table, or the virtual y-column-name column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Real(usize),
    Y,
}

/// Joins the non-empty values of `cols` in `row` with spaces (`ycol` names the y column).
fn key(row: &[String], cols: &[Col], ycol: &str) -> String {
    cols.iter()
        .map(|&c| match c {
            Col::Real(c) => row[c].trim(),
            Col::Y => ycol,
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Rows of one series within one panel: `(x cell empty?, point)`.
type Rows = Vec<(bool, Point)>;

/// A panel being built: its title and its series (name, style, rows).
type PanelRows = (String, Vec<(String, Style, Rows)>);

/// Where the interval of the first y column comes from.
enum IntervalFrom {
    None,
    Columns(usize, usize),
    Se(usize, f64),
}

/// The mean of `ys` (non-empty) and, with at least two values, the 95% Student-t interval of
/// the mean.
pub fn mean_with_interval(ys: &[f64]) -> (f64, Option<(f64, f64)>) {
    let n = ys.len() as f64;
    let mean = ys.iter().sum::<f64>() / n;
    let interval = (ys.len() >= 2).then(|| {
        let var = ys.iter().map(|y| (y - mean) * (y - mean)).sum::<f64>() / (n - 1.0);
        let half = t_quantile_975(ys.len() - 1) * (var / n).sqrt();
        (mean - half, mean + half)
    });
    (mean, interval)
}

/// Replaces the rows that share an x (or that all lack one) by their mean, with the 95%
/// Student-t interval of the mean when there are at least two.
fn average_rows(mut rows: Rows) -> Rows {
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.x.total_cmp(&b.1.x)));
    let mut out: Rows = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let (no_x, x) = (rows[i].0, rows[i].1.x);
        let j = i + rows[i..]
            .iter()
            .take_while(|(n, p)| *n == no_x && (no_x || p.x.total_cmp(&x).is_eq()))
            .count();
        let ys: Vec<f64> = rows[i..j].iter().map(|(_, p)| p.y).collect();
        let (mean, interval) = mean_with_interval(&ys);
        out.push((
            no_x,
            Point {
                x,
                y: mean,
                interval,
            },
        ));
        i = j;
    }
    out
}

/// Builds the figure `spec` asks for from `table`.
pub fn figure_from_table(table: &Table, spec: &TableSpec) -> Result<Figure> {
    let xc = table.column(&spec.x)?;
    let ycols = std::iter::once(&spec.y)
        .chain(&spec.more_y)
        .map(|y| table.column(y))
        .collect::<Result<Vec<_>>>()?;
    let wide = ycols.len() > 1;
    let interval_from = match (&spec.interval, &spec.se, spec.average) {
        (None, None, _) => IntervalFrom::None,
        (Some((lo, hi)), None, false) => {
            IntervalFrom::Columns(table.column(lo)?, table.column(hi)?)
        }
        (None, Some((se, f)), false) => {
            if !(f.is_finite() && *f > 0.0) {
                return Err(PlotError::Options(format!(
                    "the standard-error factor must be finite and > 0 (got {f})"
                )));
            }
            IntervalFrom::Se(table.column(se)?, *f)
        }
        _ => {
            return Err(PlotError::Options(
                "give the interval one way: interval columns, a standard-error column, or the \
                 average of the rows"
                    .into(),
            ));
        }
    };
    let col = |name: &str| -> Result<Col> {
        if name == Y_COLUMN {
            if wide {
                Ok(Col::Y)
            } else {
                Err(PlotError::Options(format!(
                    "{Y_COLUMN} names the y column and needs several y columns"
                )))
            }
        } else {
            table.column(name).map(Col::Real)
        }
    };
    let cols = |names: &[String]| names.iter().map(|n| col(n)).collect::<Result<Vec<_>>>();
    let mut series_cols = cols(&spec.series)?;
    if wide && !series_cols.contains(&Col::Y) {
        series_cols.push(Col::Y);
    }
    let panel_cols = cols(&spec.panels)?;
    let dash_col = spec.dash_by.as_deref().map(col).transpose()?;
    let color_cols = if spec.color_by.is_empty() {
        series_cols
            .iter()
            .copied()
            .filter(|c| Some(*c) != dash_col)
            .collect()
    } else {
        cols(&spec.color_by)?
    };
    let filters = spec
        .filters
        .iter()
        .map(|(c, v)| Ok((table.column(c)?, v.as_slice())))
        .collect::<Result<Vec<_>>>()?;

    // Panels and series in order of first appearance; styles from first appearances of keys.
    let mut panels: Vec<PanelRows> = Vec::new();
    let (mut colors, mut dashes): (BTreeMap<String, usize>, BTreeMap<String, usize>) =
        Default::default();
    for (line, row) in &table.rows {
        let kept = filters
            .iter()
            .all(|(c, vs)| vs.iter().any(|v| cell_matches(&row[*c], v)));
        if !kept {
            continue;
        }
        for (j, &yc) in ycols.iter().enumerate() {
            if row[yc].trim().is_empty() {
                continue;
            }
            let yname = table.header[yc].as_str();
            let y = number(table, *line, yc, &row[yc])?;
            let no_x = row[xc].trim().is_empty();
            let x = if no_x {
                f64::NAN
            } else {
                number(table, *line, xc, &row[xc])?
            };
            let interval = match interval_from {
                _ if j > 0 => None,
                IntervalFrom::None => None,
                IntervalFrom::Columns(l, h) => Some((
                    number(table, *line, l, &row[l])?,
                    number(table, *line, h, &row[h])?,
                )),
                IntervalFrom::Se(c, f) => {
                    let se = number(table, *line, c, &row[c])?;
                    Some((y - f * se, y + f * se))
                }
            };
            let n = colors.len();
            let color = *colors.entry(key(row, &color_cols, yname)).or_insert(n);
            let dash = match dash_col {
                Some(d) => {
                    let n = dashes.len();
                    *dashes.entry(key(row, &[d], yname)).or_insert(n)
                }
                None => 0,
            };
            let style = Style {
                color,
                dash,
                errors: spec.errors,
            };
            let pname = panel_cols
                .iter()
                .map(|&c| match c {
                    Col::Real(c) => format!("{} = {}", table.header[c], row[c].trim()),
                    Col::Y => yname.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ");
            let pi = match panels.iter().position(|(p, _)| *p == pname) {
                Some(i) => i,
                None => {
                    panels.push((pname, Vec::new()));
                    panels.len() - 1
                }
            };
            let sname = key(row, &series_cols, yname);
            let sname = if sname.is_empty() {
                spec.y.clone()
            } else {
                sname
            };
            let series = &mut panels[pi].1;
            let si = match series.iter().position(|(s, _, _)| *s == sname) {
                Some(i) => i,
                None => {
                    series.push((sname, style, Vec::new()));
                    series.len() - 1
                }
            };
            series[si].2.push((no_x, Point { x, y, interval }));
        }
    }
    if panels.is_empty() {
        return Err(PlotError::Empty(
            "no CSV row passes the filters with a y value".into(),
        ));
    }
    let label = |given: &str, col: &str| {
        if given.is_empty() {
            col.to_string()
        } else {
            given.to_string()
        }
    };
    let y_names = std::iter::once(&spec.y)
        .chain(&spec.more_y)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let panels = panels
        .into_iter()
        .map(|(title, series)| {
            let series = series
                .into_iter()
                .map(|(name, style, rows)| {
                    let mut rows = if spec.average {
                        average_rows(rows)
                    } else {
                        rows
                    };
                    let data = match rows.iter().filter(|(no_x, _)| *no_x).count() {
                        0 => {
                            rows.sort_by(|a, b| a.1.x.total_cmp(&b.1.x));
                            SeriesData::Points(rows.into_iter().map(|(_, p)| p).collect())
                        }
                        1 if rows.len() == 1 => SeriesData::Level {
                            y: rows[0].1.y,
                            interval: rows[0].1.interval,
                        },
                        _ => {
                            return Err(PlotError::Options(format!(
                                "series {name:?} in panel {title:?}: rows without x can only be a \
                                 single reference row (filter the others out)"
                            )));
                        }
                    };
                    Ok(Series { name, data, style })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Panel {
                title,
                x: Axis {
                    label: label(&spec.x_label, &spec.x),
                    scale: spec.x_scale,
                },
                y: Axis {
                    label: label(&spec.y_label, &y_names),
                    scale: spec.y_scale,
                },
                series,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut fig = Figure::new(spec.title.clone(), panels);
    fig.legend_title = spec
        .series
        .iter()
        .filter(|s| *s != Y_COLUMN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if let Some((w, h)) = spec.panel_size {
        fig.panel_width = w;
        fig.panel_height = h;
    }
    Ok(fig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quotes_crlf_and_empty_cells() {
        let t = Table::parse("a,b,note\r\n1,,\"x, \"\"y\"\"\"\r\n2,3,\"two\nlines\"\n\n").unwrap();
        assert_eq!(t.header, vec!["a", "b", "note"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0].1, vec!["1", "", "x, \"y\""]);
        assert_eq!(t.rows[1].1[2], "two\nlines");
        assert_eq!(t.rows[1].0, 3);
    }

    #[test]
    fn ragged_rows_and_open_quotes_are_errors() {
        assert!(matches!(
            Table::parse("a,b\n1\n"),
            Err(PlotError::Csv { line: 2, .. })
        ));
        assert!(matches!(
            Table::parse("a\n\"1\n"),
            Err(PlotError::Csv { .. })
        ));
        assert!(matches!(Table::parse(""), Err(PlotError::Empty(_))));
    }
}
