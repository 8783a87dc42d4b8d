//! Writing CSV (RFC 4180), the counterpart of the reader [`Table::parse`](crate::table::Table::parse):
//! every CSV file of privfed — the experiment grids of `privfed-sim`, a training run's
//! `metrics.csv` in `privfed-fl` — is written by [`CsvWriter`], and `privfed plot` reads it back.
//!
//! * Cells are written with their [`Display`] form, so numbers look as `format!("{x}")` makes them
//!   (`0.1`, `1e-5` as `0.00001`, `inf`, `NaN`); an absent number is an empty cell ([`opt`]).
//! * A cell that holds a comma, a double quote, CR or LF is quoted, with its quotes doubled; every
//!   other cell is written as it is. Lines end in `\n`.
//!
//! ```
//! use privfed_plot::csv::{CsvWriter, opt};
//! use privfed_plot::table::Table;
//!
//! let mut csv = CsvWriter::with_header("config,epsilon,accuracy");
//! csv.row(&[&"k=10, no noise", &0.5, &opt(None)]);
//! csv.row(&[&"say \"hi\"", &f64::INFINITY, &opt(Some(0.25))]);
//! assert_eq!(
//!     csv.as_str(),
//!     "config,epsilon,accuracy\n\"k=10, no noise\",0.5,\n\"say \"\"hi\"\"\",inf,0.25\n"
//! );
//! let table = Table::parse(csv.as_str()).unwrap();
//! assert_eq!(table.rows[1].1[0], "say \"hi\"");
//! ```

use std::fmt::{Display, Write as _};

/// CSV text built row by row (RFC 4180 quoting, `\n` line ends).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsvWriter {
    text: String,
    cell: String,
}

impl CsvWriter {
    /// An empty CSV (no header yet: the first [`record`](Self::record) is the header).
    pub fn new() -> Self {
        Self::default()
    }

    /// A CSV whose header is `columns`, column names separated by commas.
    pub fn with_header(columns: &str) -> Self {
        let mut csv = Self::new();
        csv.record(columns.split(','));
        csv
    }

    /// Appends one row of cells of any [`Display`] type, quoted where they need it.
    pub fn record<I>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator,
        I::Item: Display,
    {
        for (i, c) in cells.into_iter().enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            self.cell.clear();
            // Writing into a String cannot fail.
            let _ = write!(self.cell, "{c}");
            push_field(&mut self.text, &self.cell);
        }
        self.text.push('\n');
        self
    }

    /// Appends one row of cells of mixed types: `csv.row(&[&label, &k, &mean])`.
    pub fn row(&mut self, cells: &[&dyn Display]) -> &mut Self {
        self.record(cells)
    }

    /// The CSV text so far.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The CSV text.
    pub fn into_string(self) -> String {
        self.text
    }
}

/// Appends `cell` to `out` as one CSV field: quoted, with its quotes doubled, when it holds a
/// comma, a double quote, CR or LF; as it is otherwise.
pub fn push_field(out: &mut String, cell: &str) {
    if cell.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&cell.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(cell);
    }
}

/// The cell of an optional number: empty when absent, else its [`Display`] form.
pub fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| format!("{x}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Table;

    fn field(cell: &str) -> String {
        let mut s = String::new();
        push_field(&mut s, cell);
        s
    }

    #[test]
    fn quoting_follows_rfc_4180() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field(""), "");
        assert_eq!(field("k=30 gamma=0.005"), "k=30 gamma=0.005");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("\""), "\"\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field("cr\rhere"), "\"cr\rhere\"");
        assert_eq!(field("crlf\r\n"), "\"crlf\r\n\"");
        // Spaces and other punctuation are not special.
        assert_eq!(field(" a; b "), " a; b ");
    }

    /// Numbers keep the `{}` form the experiments wrote before the writer existed.
    #[test]
    fn numbers_keep_their_display_form() {
        let mut csv = CsvWriter::with_header("a,b,c,d,e,f,g");
        csv.row(&[
            &1u64,
            &0.1,
            &1e-5,
            &f64::INFINITY,
            &f64::NAN,
            &-2.5e300,
            &opt(None),
        ]);
        assert_eq!(
            csv.as_str(),
            format!("a,b,c,d,e,f,g\n1,0.1,{},inf,NaN,{},\n", 1e-5, -2.5e300)
        );
        assert_eq!(opt(Some(0.25)), "0.25");
        assert_eq!(CsvWriter::new().as_str(), "");
    }

    /// Whatever the cells hold, the reader gets them back.
    #[test]
    fn round_trips_through_the_reader() {
        let cells = [
            vec!["name", "value", "note"],
            vec!["plain", "1.5", ""],
            vec!["a,b", "\"quoted\"", "x"],
            vec!["multi\nline", "cr\r\nlf", ",\","],
            vec!["", "", ""],
            vec!["trailing ", " leading", "ε = ∞"],
        ];
        let mut csv = CsvWriter::new();
        for row in &cells {
            csv.record(row);
        }
        let table = Table::parse(csv.as_str()).unwrap();
        assert_eq!(table.header, cells[0]);
        let rows: Vec<Vec<String>> = table.rows.into_iter().map(|(_, r)| r).collect();
        let want: Vec<Vec<String>> = cells[1..]
            .iter()
            .map(|r| r.iter().map(|c| (*c).to_string()).collect())
            .collect();
        assert_eq!(rows, want);
    }

    #[test]
    fn the_text_is_built_row_by_row() {
        let mut csv = CsvWriter::with_header("x");
        csv.record([1, 2]).record(["3"]);
        assert_eq!(csv.clone().into_string(), "x\n1,2\n3\n");
    }
}
