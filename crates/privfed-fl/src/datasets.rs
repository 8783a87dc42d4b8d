//! Datasets for the Draw-and-Discard experiments of paper 003 (`docs/ALGORITHMS.md` §4.4): MNIST from
//! the original gzip'd IDX files, UCI Adult from the original text files, and the synthetic
//! "production" model of paper 003 §V-C with known weights.
//!
//! The loaders take the data directory as a path and never download anything. The files are read unchanged
//! (users fetch the originals themselves); every failure — missing file, truncated gzip stream,
//! wrong magic number, wrong count, malformed row — is a [`DataError::File`] naming the file.
//!
//! Features are stored compactly as `f32` in a row-major [`Table`]; [`Table::example`] builds the
//! `f64` [`Example`] the models take.
//!
//! ## MNIST (`DIR/mnist/`, paper 003 §V-A)
//! `train-images-idx3-ubyte.gz`, `train-labels-idx1-ubyte.gz`, `t10k-images-idx3-ubyte.gz`,
//! `t10k-labels-idx1-ubyte.gz`. IDX: big-endian `u32` magic (`0x00000803` images, `0x00000801`
//! labels), `u32` count, for images `u32` rows and columns (28 × 28), then `u8` values. The 784
//! pixels are scaled to `[0, 1]` by `/255` (the paper's normalization); no intercept feature is
//! added (the paper's 784 features). Model: softmax over 10 classes, 7,840 weights.
//!
//! ## UCI Adult (`DIR/adult/adult.data`, `DIR/adult/adult.test`)
//! 15 comma-separated fields per row; the test file starts with `|1x3 Cross validator` and its
//! labels end in a dot. Encoding (105 features, all in `[0, 1]`, so every per-example gradient
//! coordinate `(ŷ − y)·x_j` already lies in `[−1, 1]` and the client's clipping only bounds the
//! sensitivity):
//! * a constant 1 (intercept);
//! * numerics `age`, `education-num`, `hours-per-week`: min–max scaled with the training file's
//!   minimum and maximum; `capital-gain`, `capital-loss`: `ln(1 + v)` then min–max scaled (they are
//!   heavy-tailed); test values are clamped to `[0, 1]`. `fnlwgt` (a census sampling weight, not
//!   an attribute of the person) is dropped;
//! * the 8 categoricals (`workclass`, `education`, `marital-status`, `occupation`,
//!   `relationship`, `race`, `sex`, `native-country`) one-hot over the levels seen in the training
//!   file, sorted; `?` (missing) and levels unseen in training encode as all zeros.
//!
//! The label is 1 for `>50K` (`>50K.` in the test file), 0 for `<=50K`. Model: logistic.
//!
//! ## Synthetic production model (paper 003 §V-C)
//! Logistic regression with 33 weights over a boolean `B`, a categorical `E1` (levels A, B, C;
//! dummies `E11` = A, `E12` = B, reference C), a categorical `E2` (levels a, b, c, d; dummies
//! `E21`, `E22`, `E23`, reference d), a double `D` and an integer `I`, plus all two-way crosses,
//! with the paper's true weights ([`SYNTHETIC_TRUE_WEIGHTS`], order in
//! [`SYNTHETIC_FEATURE_NAMES`]). The paper does not give the feature distributions; the ones
//! chosen here are
//!
//! | predictor | distribution |
//! |---|---|
//! | `B` | Bernoulli(1/2) |
//! | `E1` | uniform on {A, B, C} |
//! | `E2` | uniform on {a, b, c, d} |
//! | `D` | uniform on `[0, 1]` |
//! | `I` | Binomial(2, 1/6) (values 0, 1, 2) |
//!
//! all independent, and the outcome is Bernoulli(σ(w·x)). They give a base rate of about 46.9%
//! (the paper: "about 46%") and a Bayes accuracy of about 77% (the paper's trained model: 80%),
//! measured by Monte Carlo with 4·10⁵ draws (`scripts` are not needed: the generator is here).
//! The paper's text lists the crosses `B·E21, B·E22, B·E23` twice (with different weights) and
//! no `D·E2` crosses; the second list (−0.51, −0.68, 1.65) is taken as `D·E21, D·E22, D·E23`,
//! which makes the 33 weights the paper counts (1 + 8 main effects + 24 crosses).

use privfed_learn::LearnError;
use privfed_learn::glm::{Example, Glm};

/// Why a data set could not be loaded or built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// A dataset file is missing, unreadable or malformed.
    #[error("dataset file {path}: {reason}")]
    File {
        /// The file (or directory) concerned.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A table or model that cannot be built from the data (a parameter, a length, a label).
    #[error(transparent)]
    Learn(#[from] LearnError),
}

/// Result alias of the loaders.
pub type Result<T, E = DataError> = std::result::Result<T, E>;
use privfed_mechanisms::Rng;
use rand::RngExt;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A dense, row-major table of `f32` features with one `f64` label per row.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    features: usize,
    x: Vec<f32>,
    y: Vec<f64>,
}

impl Table {
    /// A table from row-major `x` (`rows × features`) and labels `y` (`rows`). Errors on a length
    /// mismatch or `features = 0`.
    pub fn new(features: usize, x: Vec<f32>, y: Vec<f64>) -> Result<Self> {
        if features == 0 {
            return Err(LearnError::invalid("features", 0.0, "must be ≥ 1").into());
        }
        if x.len() != y.len() * features {
            return Err(LearnError::DimensionMismatch {
                what: "table features",
                expected: y.len() * features,
                got: x.len(),
            }
            .into());
        }
        Ok(Self { features, x, y })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.y.len()
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Number of features per row.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The features of row `i` (panics if `i ≥ len`).
    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.features..(i + 1) * self.features]
    }

    /// The label of row `i` (panics if `i ≥ len`).
    pub fn label(&self, i: usize) -> f64 {
        self.y[i]
    }

    /// All labels.
    pub fn labels(&self) -> &[f64] {
        &self.y
    }

    /// Row `i` as an [`Example`] (panics if `i ≥ len`).
    pub fn example(&self, i: usize) -> Example {
        Example::new(
            self.row(i).iter().map(|&v| f64::from(v)).collect(),
            self.y[i],
        )
    }

    /// Rows `indices` as examples.
    pub fn examples(&self, indices: &[usize]) -> Vec<Example> {
        indices.iter().map(|&i| self.example(i)).collect()
    }
}

/// Which dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatasetKind {
    /// The 33-weight model with known weights of paper 003 §V-C.
    SyntheticProduction,
    /// MNIST digits (paper 003 §V-A).
    Mnist,
    /// UCI Adult income.
    Adult,
}

impl DatasetKind {
    /// The name used on the command line (`synthetic-production`, `mnist`, `adult`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::SyntheticProduction => "synthetic-production",
            Self::Mnist => "mnist",
            Self::Adult => "adult",
        }
    }
}

/// A train/test split, the model it is meant for and, for synthetic data, the true weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Which dataset.
    pub kind: DatasetKind,
    /// The model: softmax(784, 10) for MNIST, logistic for Adult and synthetic-production.
    pub glm: Glm,
    /// Training rows (spread over the clients).
    pub train: Table,
    /// Held-out rows (accuracy and loss).
    pub test: Table,
    /// The weights the labels were generated from (synthetic-production only).
    pub true_weights: Option<Vec<f64>>,
}

pub(crate) fn data_err(path: &Path, reason: impl Into<String>) -> DataError {
    DataError::File {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

fn read_gz(path: &Path) -> Result<Vec<u8>> {
    let file =
        std::fs::File::open(path).map_err(|e| data_err(path, format!("cannot open: {e}")))?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::io::BufReader::new(file))
        .read_to_end(&mut out)
        .map_err(|e| data_err(path, format!("not a complete gzip stream: {e}")))?;
    Ok(out)
}

fn be_u32(bytes: &[u8], at: usize, path: &Path) -> Result<u32> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| {
            data_err(
                path,
                format!("truncated IDX header ({} bytes)", bytes.len()),
            )
        })
}

/// MNIST IDX magic number of an image file (`u8` data, 3 dimensions).
pub const IDX_IMAGES_MAGIC: u32 = 0x0000_0803;
/// MNIST IDX magic number of a label file (`u8` data, 1 dimension).
pub const IDX_LABELS_MAGIC: u32 = 0x0000_0801;

/// Parses a decompressed IDX image file: returns (count, rows·cols, pixels). Validates the
/// magic number, that rows and columns are nonzero and that the payload has exactly
/// `count·rows·cols` bytes.
pub fn parse_idx_images(bytes: &[u8], path: &Path) -> Result<(usize, usize, Vec<u8>)> {
    let magic = be_u32(bytes, 0, path)?;
    if magic != IDX_IMAGES_MAGIC {
        return Err(data_err(
            path,
            format!("IDX magic {magic:#010x}, expected {IDX_IMAGES_MAGIC:#010x} (images)"),
        ));
    }
    let n = be_u32(bytes, 4, path)? as usize;
    let rows = be_u32(bytes, 8, path)? as usize;
    let cols = be_u32(bytes, 12, path)? as usize;
    if rows == 0 || cols == 0 {
        return Err(data_err(path, format!("image size {rows}×{cols}")));
    }
    let expected = n
        .checked_mul(rows * cols)
        .ok_or_else(|| data_err(path, "image count overflows"))?;
    let payload = &bytes[16..];
    if payload.len() != expected {
        return Err(data_err(
            path,
            format!(
                "{} pixel bytes, expected {n}·{rows}·{cols} = {expected}",
                payload.len()
            ),
        ));
    }
    Ok((n, rows * cols, payload.to_vec()))
}

/// Parses a decompressed IDX label file: validates the magic number, the count and that every
/// label is in `0..classes`.
pub fn parse_idx_labels(bytes: &[u8], classes: u8, path: &Path) -> Result<Vec<u8>> {
    let magic = be_u32(bytes, 0, path)?;
    if magic != IDX_LABELS_MAGIC {
        return Err(data_err(
            path,
            format!("IDX magic {magic:#010x}, expected {IDX_LABELS_MAGIC:#010x} (labels)"),
        ));
    }
    let n = be_u32(bytes, 4, path)? as usize;
    let payload = &bytes[8..];
    if payload.len() != n {
        return Err(data_err(
            path,
            format!("{} label bytes, expected {n}", payload.len()),
        ));
    }
    if let Some((i, &l)) = payload.iter().enumerate().find(|(_, l)| **l >= classes) {
        return Err(data_err(
            path,
            format!("label {l} at index {i} is not in 0..{classes}"),
        ));
    }
    Ok(payload.to_vec())
}

fn load_mnist_split(dir: &Path, images: &str, labels: &str, expected: usize) -> Result<Table> {
    let ip = dir.join(images);
    let lp = dir.join(labels);
    let (n, pixels, data) = parse_idx_images(&read_gz(&ip)?, &ip)?;
    let y = parse_idx_labels(&read_gz(&lp)?, 10, &lp)?;
    if n != expected {
        return Err(data_err(&ip, format!("{n} images, expected {expected}")));
    }
    if y.len() != n {
        return Err(data_err(&lp, format!("{} labels for {n} images", y.len())));
    }
    if pixels != 784 {
        return Err(data_err(
            &ip,
            format!("{pixels} pixels per image, expected 784"),
        ));
    }
    let x = data.iter().map(|&p| f32::from(p) / 255.0).collect();
    Table::new(784, x, y.iter().map(|&l| f64::from(l)).collect())
}

/// Loads MNIST from `dir/mnist/` (the four original gzip'd IDX files): 60,000 training and
/// 10,000 test images, pixels scaled to `[0, 1]`, labels 0–9; model softmax(784, 10).
pub fn load_mnist(data_dir: &Path) -> Result<Dataset> {
    let dir = data_dir.join("mnist");
    let train = load_mnist_split(
        &dir,
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        60_000,
    )?;
    let test = load_mnist_split(
        &dir,
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
        10_000,
    )?;
    Ok(Dataset {
        kind: DatasetKind::Mnist,
        glm: Glm::softmax(784, 10)?,
        train,
        test,
        true_weights: None,
    })
}

/// Column indices of Adult's numeric fields used, and whether each is log-transformed first.
const ADULT_NUMERIC: [(usize, bool); 5] =
    [(0, false), (4, false), (10, true), (11, true), (12, false)];
/// Column indices of Adult's categorical fields.
const ADULT_CATEGORICAL: [usize; 8] = [1, 3, 5, 6, 7, 8, 9, 13];
/// Number of fields per Adult row.
const ADULT_FIELDS: usize = 15;

/// One parsed Adult row: its fields (trimmed) and label.
struct AdultRow {
    fields: Vec<String>,
    label: f64,
}

fn parse_adult_file(path: &Path, expected: usize) -> Result<Vec<AdultRow>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| data_err(path, format!("cannot read: {e}")))?;
    let mut rows = Vec::with_capacity(expected);
    for (lineno, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('|') {
            continue;
        }
        let fields: Vec<String> = line.split(',').map(|f| f.trim().to_string()).collect();
        if fields.len() != ADULT_FIELDS {
            return Err(data_err(
                path,
                format!(
                    "line {}: {} fields, expected {ADULT_FIELDS}",
                    lineno + 1,
                    fields.len()
                ),
            ));
        }
        let label = match fields[14].trim_end_matches('.') {
            "<=50K" => 0.0,
            ">50K" => 1.0,
            other => {
                return Err(data_err(
                    path,
                    format!("line {}: label {other:?} is not <=50K or >50K", lineno + 1),
                ));
            }
        };
        for &(c, _) in &ADULT_NUMERIC {
            if fields[c].parse::<f64>().map(|v| v.is_finite()) != Ok(true) {
                return Err(data_err(
                    path,
                    format!(
                        "line {}: field {} = {:?} is not a number",
                        lineno + 1,
                        c + 1,
                        fields[c]
                    ),
                ));
            }
        }
        rows.push(AdultRow { fields, label });
    }
    if rows.len() != expected {
        return Err(data_err(
            path,
            format!("{} rows, expected {expected}", rows.len()),
        ));
    }
    Ok(rows)
}

fn adult_numeric(row: &AdultRow, c: usize, log: bool) -> f64 {
    // Validated in parse_adult_file.
    let v: f64 = row.fields[c].parse().unwrap_or(0.0);
    if log { v.max(0.0).ln_1p() } else { v }
}

/// Loads UCI Adult from `dir/adult/adult.data` (32,561 rows) and `dir/adult/adult.test`
/// (16,281 rows) with the encoding of the [module documentation](self); model logistic.
pub fn load_adult(data_dir: &Path) -> Result<Dataset> {
    let dir = data_dir.join("adult");
    let train_rows = parse_adult_file(&dir.join("adult.data"), 32_561)?;
    let test_rows = parse_adult_file(&dir.join("adult.test"), 16_281)?;
    // Numeric ranges from the training file.
    let ranges: Vec<(f64, f64)> = ADULT_NUMERIC
        .iter()
        .map(|&(c, log)| {
            train_rows
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                    let v = adult_numeric(r, c, log);
                    (lo.min(v), hi.max(v))
                })
        })
        .collect();
    // Categorical levels seen in training, sorted; `?` is missing.
    let levels: Vec<BTreeMap<String, usize>> = ADULT_CATEGORICAL
        .iter()
        .map(|&c| {
            let mut set: Vec<&str> = train_rows
                .iter()
                .map(|r| r.fields[c].as_str())
                .filter(|v| *v != "?")
                .collect();
            set.sort_unstable();
            set.dedup();
            set.into_iter()
                .enumerate()
                .map(|(i, v)| (v.to_string(), i))
                .collect()
        })
        .collect();
    let features = 1 + ADULT_NUMERIC.len() + levels.iter().map(|l| l.len()).sum::<usize>();
    let encode = |rows: &[AdultRow]| -> Result<Table> {
        let mut x = Vec::with_capacity(rows.len() * features);
        let mut y = Vec::with_capacity(rows.len());
        for r in rows {
            x.push(1.0f32);
            for (&(c, log), &(lo, hi)) in ADULT_NUMERIC.iter().zip(&ranges) {
                let v = adult_numeric(r, c, log);
                let s = if hi > lo {
                    ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                x.push(s as f32);
            }
            for (&c, lv) in ADULT_CATEGORICAL.iter().zip(&levels) {
                let start = x.len();
                x.resize(start + lv.len(), 0.0);
                if let Some(&i) = lv.get(r.fields[c].as_str()) {
                    x[start + i] = 1.0;
                }
            }
            y.push(r.label);
        }
        Table::new(features, x, y)
    };
    Ok(Dataset {
        kind: DatasetKind::Adult,
        glm: Glm::logistic(features)?,
        train: encode(&train_rows)?,
        test: encode(&test_rows)?,
        true_weights: None,
    })
}

/// Names of the 33 features of the synthetic production model, in weight order (paper 003 §V-C).
pub const SYNTHETIC_FEATURE_NAMES: [&str; 33] = [
    "1", "B", "E11", "E12", "E21", "E22", "E23", "D", "I", "B:E11", "B:E12", "B:E21", "B:E22",
    "B:E23", "B:D", "B:I", "E11:E21", "E11:E22", "E11:E23", "E12:E21", "E12:E22", "E12:E23",
    "D:E11", "D:E12", "I:E11", "I:E12", "D:E21", "D:E22", "D:E23", "I:E21", "I:E22", "I:E23",
    "D:I",
];

/// The true weights of paper 003 §V-C, in the order of [`SYNTHETIC_FEATURE_NAMES`].
pub const SYNTHETIC_TRUE_WEIGHTS: [f64; 33] = [
    0.34, -1.18, 1.05, 1.6, -1.51, 0.72, 1.36, -1.41, -1.67, -1.14, 1.3, 1.72, 0.18, -1.52, 1.72,
    -1.17, -0.12, -0.53, 1.00, -0.42, -1.64, -1.53, 0.64, 0.48, -0.17, 0.44, -0.51, -0.68, 1.65,
    0.51, -1.64, 0.57, -0.80,
];

/// The 33 features for predictors `b ∈ {0,1}`, `e1 ∈ 0..3` (0 = A, 1 = B, 2 = C = reference),
/// `e2 ∈ 0..4` (3 = d = reference), `d` and `i`, in the order of [`SYNTHETIC_FEATURE_NAMES`].
pub fn synthetic_features(b: bool, e1: usize, e2: usize, d: f64, i: f64) -> [f64; 33] {
    let b = f64::from(u8::from(b));
    let e11 = f64::from(u8::from(e1 == 0));
    let e12 = f64::from(u8::from(e1 == 1));
    let e21 = f64::from(u8::from(e2 == 0));
    let e22 = f64::from(u8::from(e2 == 1));
    let e23 = f64::from(u8::from(e2 == 2));
    [
        1.0,
        b,
        e11,
        e12,
        e21,
        e22,
        e23,
        d,
        i,
        b * e11,
        b * e12,
        b * e21,
        b * e22,
        b * e23,
        b * d,
        b * i,
        e11 * e21,
        e11 * e22,
        e11 * e23,
        e12 * e21,
        e12 * e22,
        e12 * e23,
        d * e11,
        d * e12,
        i * e11,
        i * e12,
        d * e21,
        d * e22,
        d * e23,
        i * e21,
        i * e22,
        i * e23,
        d * i,
    ]
}

fn synthetic_table<R: Rng + ?Sized>(n: usize, rng: &mut R) -> Result<Table> {
    let mut x = Vec::with_capacity(n * 33);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let b = rng.random_bool(0.5);
        let e1 = rng.random_range(0..3usize);
        let e2 = rng.random_range(0..4usize);
        // D rounded to f32 first, so the stored feature is exactly the one the label used.
        let d = f64::from(rng.random::<f64>() as f32);
        let i =
            f64::from(u8::from(rng.random_bool(1.0 / 6.0)) + u8::from(rng.random_bool(1.0 / 6.0)));
        let f = synthetic_features(b, e1, e2, d, i);
        let z: f64 = f
            .iter()
            .zip(&SYNTHETIC_TRUE_WEIGHTS)
            .map(|(a, w)| a * w)
            .sum();
        let p = 1.0 / (1.0 + (-z).exp());
        y.push(f64::from(u8::from(rng.random::<f64>() < p)));
        x.extend(f.iter().map(|&v| v as f32));
    }
    Table::new(33, x, y)
}

/// Generates the synthetic production dataset (paper 003 §V-C, distributions in the
/// [module documentation](self)): `train` and `test` rows, labels drawn from the true model.
/// Errors if either count is 0.
pub fn synthetic_production<R: Rng + ?Sized>(
    train: usize,
    test: usize,
    rng: &mut R,
) -> Result<Dataset> {
    if train == 0 || test == 0 {
        return Err(LearnError::Empty("synthetic dataset").into());
    }
    Ok(Dataset {
        kind: DatasetKind::SyntheticProduction,
        glm: Glm::logistic(33)?,
        train: synthetic_table(train, rng)?,
        test: synthetic_table(test, rng)?,
        true_weights: Some(SYNTHETIC_TRUE_WEIGHTS.to_vec()),
    })
}

/// The default data directory: `$PRIVFED_DATA_DIR` if set, else `../shared/data` relative to the
/// current directory (where the project's tests and CI find the shared copies).
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("PRIVFED_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/data"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;
    use privfed_testkit::shared_data;
    use std::io::Write;

    /// A fresh temporary directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("privfed-data-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult) not found beside the repository"
    )]
    fn mnist_counts_and_class_counts() {
        let dir = shared_data();
        let d = load_mnist(&dir).unwrap();
        assert_eq!((d.train.len(), d.test.len()), (60_000, 10_000));
        assert_eq!(d.train.features(), 784);
        assert_eq!(d.glm.num_weights(), 7840);
        let mut counts = [0usize; 10];
        for &l in d.train.labels() {
            counts[l as usize] += 1;
        }
        assert_eq!(
            counts,
            [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
        );
        // Pixels in [0, 1] with both ends attained.
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for i in 0..d.test.len() {
            for &v in d.test.row(i) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        assert_eq!((lo, hi), (0.0, 1.0));
    }

    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult) not found beside the repository"
    )]
    fn adult_counts_and_encoding() {
        let dir = shared_data();
        let d = load_adult(&dir).unwrap();
        assert_eq!((d.train.len(), d.test.len()), (32_561, 16_281));
        let high = d.train.labels().iter().filter(|&&y| y == 1.0).count();
        assert_eq!((32_561 - high, high), (24_720, 7_841));
        // Test file: 12,435 `<=50K.` and 3,846 `>50K.` rows (counted with grep on the file).
        let high_t = d.test.labels().iter().filter(|&&y| y == 1.0).count();
        assert_eq!(high_t, 3_846);
        // 1 + 5 numerics + 99 one-hot levels (8 workclass, 16 education, 7 marital status,
        // 14 occupation, 6 relationship, 5 race, 2 sex, 41 native country: counted in the file
        // without `?`); every feature in [0, 1].
        assert_eq!(d.train.features(), 105);
        assert_eq!(d.train.features(), d.glm.num_weights());
        for t in [&d.train, &d.test] {
            for i in 0..t.len() {
                assert!(t.row(i).iter().all(|&v| (0.0..=1.0).contains(&v)));
                assert_eq!(t.row(i)[0], 1.0);
            }
        }
    }

    #[test]
    fn corrupt_and_missing_files_are_typed_errors() {
        let dir = temp_dir("corrupt");
        // Missing directory.
        let e = load_mnist(&dir).unwrap_err();
        assert!(
            matches!(&e, DataError::File { path, reason } if path.ends_with("train-images-idx3-ubyte.gz") && reason.contains("cannot open")),
            "{e}"
        );
        let m = dir.join("mnist");
        std::fs::create_dir_all(&m).unwrap();
        // A truncated gzip stream.
        let mut labels = vec![0, 0, 8, 1, 0, 0, 0, 3];
        labels.extend([1u8, 2, 3]);
        let full = gz(&labels);
        std::fs::write(
            m.join("train-images-idx3-ubyte.gz"),
            &full[..full.len() / 2],
        )
        .unwrap();
        let e = load_mnist(&dir).unwrap_err();
        assert!(e.to_string().contains("not a complete gzip stream"), "{e}");
        // Valid gzip, wrong magic (a label file where images are expected).
        std::fs::write(m.join("train-images-idx3-ubyte.gz"), &full).unwrap();
        let e = load_mnist(&dir).unwrap_err();
        assert!(e.to_string().contains("expected 0x00000803"), "{e}");
        // Parsers: short payload, count mismatch, label out of range, short header.
        let p = Path::new("x");
        assert!(parse_idx_labels(&labels, 10, p).is_ok());
        assert!(parse_idx_labels(&labels[..10], 10, p).is_err());
        assert!(
            parse_idx_labels(&labels, 3, p)
                .unwrap_err()
                .to_string()
                .contains("label 3")
        );
        assert!(
            parse_idx_labels(&labels[..5], 10, p)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        let mut img = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2];
        img.extend([0u8; 8]);
        assert_eq!(parse_idx_images(&img, p).unwrap().0, 2);
        assert!(
            parse_idx_images(&img[..20], p)
                .unwrap_err()
                .to_string()
                .contains("expected 2·2·2 = 8")
        );
        // Adult: missing, wrong field count, bad label, bad number, wrong row count.
        let e = load_adult(&dir).unwrap_err();
        assert!(matches!(e, DataError::File { .. }), "{e}");
        let a = dir.join("adult");
        std::fs::create_dir_all(&a).unwrap();
        let good = "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K";
        for (content, needle) in [
            ("1, 2, 3\n".to_string(), "3 fields, expected 15"),
            (good.replace("<=50K", "maybe"), "is not <=50K or >50K"),
            (good.replace("39,", "old,"), "is not a number"),
            (format!("{good}\n{good}\n"), "2 rows, expected 32561"),
        ] {
            std::fs::write(a.join("adult.data"), content).unwrap();
            let e = load_adult(&dir).unwrap_err();
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The generator's empirical base rate matches the exact base rate of the chosen
    /// distributions. The exact value is an average of σ(w·x) over the 2·3·4·3 discrete cells and
    /// D (Gauss–Legendre would do; here a 2000-point midpoint rule, error < 1e-6). n = 200,000
    /// labels: 5-sigma binomial z-test (FPR ≈ 6e-7).
    #[test]
    fn synthetic_base_rate_matches_the_model() {
        let mut rng = seeded_rng_for_experiments(21);
        let d = synthetic_production(200_000, 10, &mut rng).unwrap();
        let mut exact = 0.0;
        let pi = [25.0 / 36.0, 10.0 / 36.0, 1.0 / 36.0];
        let m = 2000;
        for b in [false, true] {
            for e1 in 0..3 {
                for e2 in 0..4 {
                    for (iv, &pw) in pi.iter().enumerate() {
                        for s in 0..m {
                            let dd = (s as f64 + 0.5) / m as f64;
                            let f = synthetic_features(b, e1, e2, dd, iv as f64);
                            let z: f64 = f
                                .iter()
                                .zip(&SYNTHETIC_TRUE_WEIGHTS)
                                .map(|(a, w)| a * w)
                                .sum();
                            exact += pw / (2.0 * 3.0 * 4.0 * m as f64) / (1.0 + (-z).exp());
                        }
                    }
                }
            }
        }
        assert!((exact - 0.469).abs() < 0.002, "exact base rate {exact}");
        let n = d.train.len() as f64;
        let rate = d.train.labels().iter().sum::<f64>() / n;
        assert!(
            (rate - exact).abs() < 5.0 * (exact * (1.0 - exact) / n).sqrt(),
            "empirical {rate} vs exact {exact}"
        );
        // The labels come from the true weights: the true model's log loss is below the
        // intercept-only model's (entropy of the base rate).
        let ex = d.train.examples(&(0..20_000).collect::<Vec<_>>());
        let l_true = d.glm.loss(&SYNTHETIC_TRUE_WEIGHTS, &ex).unwrap();
        let h = -(exact * exact.ln() + (1.0 - exact) * (1.0 - exact).ln());
        assert!(l_true < h - 0.1, "true-model loss {l_true} vs entropy {h}");
        assert!(synthetic_production(0, 1, &mut rng).is_err());
    }

    #[test]
    fn table_validates() {
        assert!(Table::new(2, vec![0.0; 3], vec![0.0]).is_err());
        assert!(Table::new(0, vec![], vec![]).is_err());
        let t = Table::new(2, vec![1.0, 2.0, 3.0, 4.0], vec![0.0, 1.0]).unwrap();
        assert_eq!(t.example(1), Example::new(vec![3.0, 4.0], 1.0));
    }
}
