//! Paper 003's experiments (`docs/ALGORITHMS.md` §4.4): the CSV files behind `EXPERIMENTS.md`.
//!
//! * `variance`: the intra-model variance of pure-noise Draw-and-Discard against Thm. 1's
//!   `(k/2)σ²`;
//! * the MNIST grids `k`, `epsilon`, `batching`, `strategies` (§V-A/B): per configuration the
//!   mean and standard error over `repeats` runs, every run, and the learning curves;
//! * `synthetic`: the known-weights production model (§V-C).
//!
//! Seeds are derived from one base seed ([`run_seed`]), so the same configuration writes the same
//! files.

use super::grid::{Grid, Point, axis};
use super::{ExperimentError, Observer, write_file};
use crate::simulate::{
    MeanStdError, SimConfig, SimDataset, SimReport, simulate_in_process, summarize_repeats,
    variance_stabilization_trace,
};
use privfed_ddml::client::ClientNoise;
use privfed_ddml::engine::{Strategy, predicted_intra_model_variance};
use privfed_fl::datasets::{
    Dataset, SYNTHETIC_FEATURE_NAMES, SYNTHETIC_TRUE_WEIGHTS, default_data_dir, load_mnist,
    synthetic_production,
};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_plot::csv::{CsvWriter, opt};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The experiments by name, in the order they run.
pub const EXPERIMENTS: [&str; 6] = [
    "variance",
    "k",
    "epsilon",
    "batching",
    "strategies",
    "synthetic",
];

/// What to run and where to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentsConfig {
    /// Directory holding `mnist/` (`None`: [`default_data_dir`]).
    pub data_dir: Option<PathBuf>,
    /// Output directory for the CSV files (created if missing).
    pub out: PathBuf,
    /// Passes over MNIST per run (the paper: 20).
    pub passes: usize,
    /// The experiments to run ([`EXPERIMENTS`]); empty: all.
    pub only: Vec<String>,
    /// Independent runs per k in the variance-stabilization experiment.
    pub variance_runs: usize,
    /// Runs per configuration (MNIST grids and known weights), at least 1.
    pub repeats: usize,
    /// Base seed.
    pub seed: u64,
}

/// The paper's MNIST configuration ([`SimConfig::paper_defaults`]) with `k`, the strategy, the
/// client noise and the number of passes set.
fn mnist_config(k: usize, strategy: Strategy, noise: ClientNoise, passes: usize) -> SimConfig {
    SimConfig {
        k,
        strategy,
        noise,
        passes,
        ..SimConfig::paper_defaults(k)
    }
}

/// The MNIST grid runs of the selected experiments, in order, labelled `experiment` and
/// `config`.
fn grid_runs(want: impl Fn(&str) -> bool, p: usize) -> Vec<Point<SimConfig>> {
    let mut runs = Vec::new();
    let mut push = |experiment: &str, label: String, config: SimConfig| {
        runs.push(Point::new(
            &[("experiment", experiment.to_string()), ("config", label)],
            config,
        ));
    };
    let dd = |k: usize, noise: ClientNoise| mnist_config(k, Strategy::DrawAndDiscard, noise, p);
    if want("k") {
        for k in [1usize, 2, 5, 10, 20, 50, 100] {
            push("k", format!("k={k}"), dd(k, ClientNoise::None));
        }
    }
    if want("epsilon") {
        for (name, e) in [
            ("ln3", 3f64),
            ("ln4", 4.0),
            ("ln8", 8.0),
            ("ln16", 16.0),
            ("ln32", 32.0),
        ] {
            let noise = ClientNoise::Laplace { epsilon: e.ln() };
            push("epsilon", format!("epsilon={name}"), dd(10, noise));
        }
        push("epsilon", "no noise".into(), dd(10, ClientNoise::None));
    }
    if want("batching") {
        for ns in [10usize, 100, 1000, 10_000] {
            let batch = Strategy::ServerBatch { batch: ns };
            push(
                "batching",
                format!("Ns={ns}"),
                mnist_config(1, batch, ClientNoise::None, p),
            );
        }
        for k in [10usize, 20] {
            push("batching", format!("k={k}"), dd(k, ClientNoise::None));
        }
    }
    if want("strategies") {
        for (label, k, s) in [
            ("draw-and-discard", 20usize, Strategy::DrawAndDiscard),
            ("accept-one-in-20", 1, Strategy::AcceptOneIn { k: 20 }),
            ("replace-drawn", 20, Strategy::ReplaceDrawn),
            (
                "average-before-overwrite",
                20,
                Strategy::AverageBeforeOverwrite,
            ),
        ] {
            push(
                "strategies",
                label.into(),
                mnist_config(k, s, ClientNoise::None, p),
            );
        }
    }
    runs
}

/// Runs the selected experiments and writes their CSV files into `config.out` (each grid's files
/// after every configuration, so an interrupted grid keeps what it finished).
pub fn run_experiments(
    config: &ExperimentsConfig,
    observer: &mut dyn Observer,
) -> Result<(), ExperimentError> {
    let a = config;
    std::fs::create_dir_all(&a.out).map_err(|source| ExperimentError::Write {
        action: "creating",
        path: a.out.clone(),
        source,
    })?;
    let want = |name: &str| a.only.is_empty() || a.only.iter().any(|o| o == name);
    if a.repeats == 0 {
        return Err(ExperimentError::Options(
            "--repeats must be at least 1".into(),
        ));
    }
    if let Some(o) = a.only.iter().find(|o| !EXPERIMENTS.contains(&o.as_str())) {
        return Err(ExperimentError::Options(format!(
            "unknown experiment {o:?}"
        )));
    }
    if want("variance") {
        // Thm. 1: pure-noise D&D, Laplace b = 1 (σ² = 2), p = 20, `variance_runs` runs per k,
        // 100·k updates each, recorded every 10·k.
        let mut rng = seeded_rng_for_experiments(a.seed);
        let mut csv = CsvWriter::with_header("k,step,measured_mean,std_error,predicted");
        let ks = axis("k", [2usize, 5, 10, 20, 50]);
        Grid::new(&ks).run(observer, |trial, _| {
            let k = trial.point.config;
            let steps = 100 * k;
            let tr = variance_stabilization_trace(
                k,
                20,
                1.0,
                steps,
                steps / 10,
                a.variance_runs,
                Strategy::DrawAndDiscard,
                &mut rng,
            )?;
            let pred = predicted_intra_model_variance(k, 2.0);
            for p in tr {
                csv.row(&[&k, &p.step, &p.mean, &p.std_error, &pred]);
            }
            Ok::<_, ExperimentError>(())
        })?;
        write_file(
            &a.out,
            "ddml_variance_stabilization.csv",
            csv.as_str(),
            observer,
        )?;
    }
    let runs = grid_runs(want, a.passes);
    if !runs.is_empty() {
        let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
        let mnist = load_mnist(&dir).map_err(|source| ExperimentError::Load {
            what: "MNIST",
            path: dir.clone(),
            source,
        })?;
        // Identical configurations (e.g. k = 10 without noise appears in three experiments) are
        // run once (R times) and reported under every label; each grid's files are rewritten
        // after every configuration.
        let mut csvs: BTreeMap<&str, GridCsv> = BTreeMap::new();
        Grid::new(&runs)
            .repeats(a.repeats)
            .seeds(|i, rep| run_seed(a.seed, i as u64 + 1, rep as u64))
            .reuse_identical()
            .run_then(
                observer,
                |trial, observer| {
                    observer.message(&trial.announce());
                    let seed = trial.seed.unwrap_or_default();
                    let mut rng = seeded_rng_for_experiments(seed);
                    let (r, secs) =
                        simulate_observed(&mnist, &trial.point.config, &mut rng, observer)?;
                    observer.message(&format!(
                        "    accuracy {:.4} loss {:.4} ({secs:.0} s)",
                        r.accuracy, r.loss
                    ));
                    Ok::<_, ExperimentError>((seed, r))
                },
                |point, all, observer| {
                    let experiment = point.label("experiment");
                    let csv = csvs.entry(experiment).or_insert_with(GridCsv::new);
                    csv.add(
                        point.label("config"),
                        all.last().map_or(&[][..], Vec::as_slice),
                    )?;
                    csv.write(&a.out, experiment, observer)
                },
            )?;
    }
    if want("synthetic") {
        run_synthetic(a, observer)?;
    }
    Ok(())
}

/// One simulation with its progress to `observer`; the report and its seconds.
fn simulate_observed(
    data: &Dataset,
    config: &SimConfig,
    rng: &mut ExperimentRng,
    observer: &mut dyn Observer,
) -> Result<(SimReport, f64), ExperimentError> {
    observer.run_started();
    let start = Instant::now();
    let r = simulate_in_process(data, config, rng, |p| observer.run_progress(p));
    observer.run_finished();
    Ok((r?, start.elapsed().as_secs_f64()))
}

/// Known weights (§V-C): the paper's k = 30, γ = 0.005 with the update budget we can afford,
/// k = 30, γ = 0.05, and k = 10, γ = 0.2. The data are generated once; the repeats differ in the
/// training randomness only.
fn run_synthetic(
    a: &ExperimentsConfig,
    observer: &mut dyn Observer,
) -> Result<(), ExperimentError> {
    let mut data_rng = seeded_rng_for_experiments(a.seed ^ 0x5EED_DA7A);
    let data = synthetic_production(
        SimDataset::SYNTHETIC_TRAIN,
        SimDataset::SYNTHETIC_TEST,
        &mut data_rng,
    )?;
    let mut weight_runs = CsvWriter::with_header("config,repeat,feature,true,estimate");
    let mut summary = CsvWriter::with_header(
        "config,k,learning_rate,runs,updates,accuracy_mean,accuracy_se,loss_mean,loss_se,\
         weights_max_abs_error_mean,weights_max_abs_error_se,weights_mean_abs_error_mean,\
         weights_mean_abs_error_se",
    );
    let mut per_run = CsvWriter::with_header(
        "config,repeat,seed,k,learning_rate,updates,accuracy,loss,weights_max_abs_error,\
         weights_mean_abs_error",
    );
    let mut header = vec!["feature".to_string(), "true".to_string()];
    let mut cols = Vec::new();
    let configs: Vec<Point<SimConfig>> = [
        ("k=30 gamma=0.005", 30usize, 0.005f64, 100usize),
        ("k=30 gamma=0.05", 30, 0.05, 100),
        ("k=10 gamma=0.2", 10, 0.2, 10),
    ]
    .into_iter()
    .map(|(label, k, g, passes)| {
        let mut cfg = SimConfig::paper_defaults(k);
        cfg.learning_rate = g;
        cfg.passes = passes;
        cfg.evaluate_every_pass = false;
        Point::new(&[("config", label.to_string())], cfg)
    })
    .collect();
    Grid::new(&configs)
        .repeats(a.repeats)
        .seeds(|_, rep| run_seed(a.seed, 1000, rep as u64))
        .run_then(
            observer,
            |trial, observer| {
                let (label, cfg, rep) = (
                    trial.point.label("config"),
                    &trial.point.config,
                    trial.repeat,
                );
                let (k, g) = (cfg.k, cfg.learning_rate);
                let seed = trial.seed.unwrap_or_default();
                let mut rng = seeded_rng_for_experiments(seed);
                let (r, secs) = simulate_observed(&data, cfg, &mut rng, observer)?;
                let mae = weights_mean_abs_error(&r.mean_weights);
                let max = r.weights_max_abs_error.unwrap_or(f64::NAN);
                observer.message(&format!(
                    "synthetic {label} (run {}/{}, seed {seed}): max error {max:.3}, mean error \
                     {mae:.3}, accuracy {:.4} ({secs:.0} s)",
                    rep + 1,
                    a.repeats,
                    r.accuracy,
                ));
                per_run.row(&[
                    &label,
                    &rep,
                    &seed,
                    &k,
                    &g,
                    &r.updates,
                    &r.accuracy,
                    &r.loss,
                    &max,
                    &mae,
                ]);
                for (j, name) in SYNTHETIC_FEATURE_NAMES.iter().enumerate() {
                    weight_runs.row(&[
                        &label,
                        &rep,
                        name,
                        &SYNTHETIC_TRUE_WEIGHTS[j],
                        &r.mean_weights[j],
                    ]);
                }
                Ok::<_, ExperimentError>((r, mae))
            },
            |point, all, _| {
                let runs = all.last().map_or(&[][..], Vec::as_slice);
                let reports: Vec<SimReport> = runs.iter().map(|(r, _)| r.clone()).collect();
                let maes: Vec<f64> = runs.iter().map(|(_, m)| *m).collect();
                let s = summarize_repeats(&reports)?;
                let max = s.weights_max_abs_error.ok_or_else(|| {
                    ExperimentError::Internal("the synthetic data set has known weights".into())
                })?;
                let mae = MeanStdError::of(&maes)?;
                let (label, cfg) = (point.label("config"), &point.config);
                summary.record(cells(
                    &[&label, &cfg.k, &cfg.learning_rate, &s.runs, &s.updates],
                    &[&s.accuracy, &s.loss, &max, &mae],
                    &[],
                ));
                header.extend([label.to_string(), format!("{label} se")]);
                cols.push(s.mean_weights);
                Ok(())
            },
        )?;
    let mut weights = CsvWriter::new();
    weights.record(&header);
    for (j, name) in SYNTHETIC_FEATURE_NAMES.iter().enumerate() {
        let stats: Vec<&MeanStdError> = cols.iter().map(|c| &c[j]).collect();
        weights.record(cells(&[name, &SYNTHETIC_TRUE_WEIGHTS[j]], &stats, &[]));
    }
    write_file(
        &a.out,
        "ddml_synthetic_weights.csv",
        weights.as_str(),
        observer,
    )?;
    write_file(
        &a.out,
        "ddml_synthetic_weights_runs.csv",
        weight_runs.as_str(),
        observer,
    )?;
    write_file(&a.out, "ddml_synthetic.csv", summary.as_str(), observer)?;
    write_file(
        &a.out,
        "ddml_synthetic_runs.csv",
        per_run.as_str(),
        observer,
    )
}

/// The mean absolute error of the known-weights model's mean weights, `Σ_j |b̄_j − w_j| / 33`.
pub(crate) fn weights_mean_abs_error(mean_weights: &[f64]) -> f64 {
    let errors = mean_weights.iter().zip(SYNTHETIC_TRUE_WEIGHTS);
    errors.map(|(a, b)| (a - b).abs()).sum::<f64>() / SYNTHETIC_TRUE_WEIGHTS.len() as f64
}

/// The seed of repeat `repeat` of run stream `stream` (a grid run's 1-based index, or 1000 for
/// the known-weights runs). Repeat 0 keeps the single-run seed `base + stream` of earlier
/// versions, so CSV files written with one repeat are unchanged; later repeats mix
/// `(base, stream, repeat)` with SplitMix64. Deterministic, so the same command writes the same
/// files.
pub fn run_seed(base: u64, stream: u64, repeat: u64) -> u64 {
    if repeat == 0 {
        return base.wrapping_add(stream);
    }
    splitmix64(splitmix64(splitmix64(base) ^ stream) ^ repeat)
}

/// The SplitMix64 finalizer (Steele, Lea and Flood's mixing function).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The cells of a row: `fixed`, then the mean and standard error of each of `stats` (the
/// standard error empty for a single run), then `last`.
fn cells(fixed: &[&dyn Display], stats: &[&MeanStdError], last: &[&dyn Display]) -> Vec<String> {
    let text = |c: &[&dyn Display]| c.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    let mut row = text(fixed);
    row.extend(
        stats
            .iter()
            .flat_map(|m| [m.mean.to_string(), opt(m.std_error)]),
    );
    row.extend(text(last));
    row
}

/// The four CSV files of one MNIST grid: per configuration (mean and standard error over the
/// repeats), per run, and the learning curves summarized and per run.
struct GridCsv {
    summary: CsvWriter,
    runs: CsvWriter,
    curves: CsvWriter,
    curve_runs: CsvWriter,
}

impl GridCsv {
    fn new() -> Self {
        Self {
            summary: CsvWriter::with_header(
                "config,k,runs,updates,overwrites_mean,overwrites_se,accuracy_mean,\
                 accuracy_se,loss_mean,loss_se,train_loss_mean,train_loss_se,\
                 intra_model_variance_mean,intra_model_variance_se,\
                 predicted_intra_model_variance",
            ),
            runs: CsvWriter::with_header(
                "config,repeat,seed,k,updates,overwrites,accuracy,loss,train_loss,\
                 intra_model_variance,predicted_intra_model_variance",
            ),
            curves: CsvWriter::with_header(
                "config,pass,examples_seen,runs,accuracy_mean,accuracy_se,loss_mean,loss_se,\
                 intra_model_variance_mean,intra_model_variance_se",
            ),
            curve_runs: CsvWriter::with_header(
                "config,repeat,pass,examples_seen,accuracy,loss,intra_model_variance",
            ),
        }
    }

    fn add(&mut self, label: &str, reports: &[(u64, SimReport)]) -> Result<(), ExperimentError> {
        let only: Vec<SimReport> = reports.iter().map(|(_, r)| r.clone()).collect();
        let s = summarize_repeats(&only)?;
        let k = only[0].config.k;
        self.summary.record(cells(
            &[&label, &k, &s.runs, &s.updates],
            &[
                &s.overwrites,
                &s.accuracy,
                &s.loss,
                &s.train_loss,
                &s.intra_model_variance,
            ],
            &[&s.predicted_intra_model_variance],
        ));
        for c in &s.curve {
            self.curves.record(cells(
                &[&label, &c.pass, &c.examples_seen, &s.runs],
                &[&c.accuracy, &c.loss, &c.intra_model_variance],
                &[],
            ));
        }
        for (rep, (seed, r)) in reports.iter().enumerate() {
            self.runs.row(&[
                &label,
                &rep,
                seed,
                &k,
                &r.updates,
                &r.server.overwrites,
                &r.accuracy,
                &r.loss,
                &r.train_loss,
                &r.intra_model_variance,
                &r.predicted_intra_model_variance,
            ]);
            for pt in &r.curve {
                self.curve_runs.row(&[
                    &label,
                    &rep,
                    &pt.pass,
                    &pt.examples_seen,
                    &pt.accuracy,
                    &pt.loss,
                    &pt.intra_model_variance,
                ]);
            }
        }
        Ok(())
    }

    fn write(
        &self,
        out: &Path,
        experiment: &str,
        observer: &mut dyn Observer,
    ) -> Result<(), ExperimentError> {
        let name = |suffix: &str| format!("ddml_mnist_{experiment}{suffix}.csv");
        write_file(out, &name(""), self.summary.as_str(), observer)?;
        write_file(out, &name("_runs"), self.runs.as_str(), observer)?;
        write_file(out, &name("_curves"), self.curves.as_str(), observer)?;
        write_file(
            out,
            &name("_curves_runs"),
            self.curve_runs.as_str(),
            observer,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::Silent;

    #[test]
    fn run_seeds_are_deterministic_and_distinct() {
        // Repeat 0 is the single-run seed of earlier versions.
        assert_eq!(run_seed(2026, 4, 0), 2030);
        assert_eq!(run_seed(2026, 1000, 0), 3026);
        assert_eq!(run_seed(2026, 4, 3), run_seed(2026, 4, 3));
        let mut seeds: Vec<u64> = (1..=30u64)
            .flat_map(|s| (0..10u64).map(move |r| run_seed(2026, s, r)))
            .collect();
        seeds.push(run_seed(2027, 1, 1));
        let n = seeds.len();
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), n);
    }

    /// SplitMix64 of 0 is the reference implementation's first output for state 0.
    #[test]
    fn splitmix64_reference_value() {
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    /// A single run has an empty standard error.
    #[test]
    fn mean_se_cells() {
        let one = MeanStdError::of(&[2.0]).unwrap();
        let two = MeanStdError::of(&[1.0, 3.0]).unwrap();
        let row = cells(&[&"a"], &[&one, &two], &[&7]);
        assert_eq!(row, ["a", "2", "", "2", "1", "7"]);
    }

    /// The grid: every selected experiment's labels in order; the k = 10 noise-free
    /// configuration appears in three experiments with the same config (run once).
    #[test]
    fn grid_runs_in_order() {
        let all = grid_runs(|_| true, 20);
        assert_eq!(all.len(), 7 + 6 + 6 + 4);
        assert_eq!(all[0].describe(), "experiment=k, config=k=1");
        assert!(all.iter().all(|r| r.config.passes == 20));
        let k10: Vec<&Point<SimConfig>> = all
            .iter()
            .filter(|r| {
                r.config == mnist_config(10, Strategy::DrawAndDiscard, ClientNoise::None, 20)
            })
            .collect();
        assert_eq!(k10.len(), 3);
        let only_eps = grid_runs(|e| e == "epsilon", 2);
        assert_eq!(only_eps.len(), 6);
        assert_eq!(only_eps[5].label("config"), "no noise");
    }

    #[test]
    fn bad_selections_are_refused() {
        let dir = std::env::temp_dir().join(format!("privfed-sim-ddml-{}", std::process::id()));
        let mut config = ExperimentsConfig {
            data_dir: None,
            out: dir.clone(),
            passes: 1,
            only: vec!["nope".into()],
            variance_runs: 2,
            repeats: 1,
            seed: 1,
        };
        assert!(run_experiments(&config, &mut Silent).is_err());
        config.only = vec!["variance".into()];
        config.repeats = 0;
        assert!(run_experiments(&config, &mut Silent).is_err());
        config.repeats = 1;
        run_experiments(&config, &mut Silent).unwrap();
        let csv = std::fs::read_to_string(dir.join("ddml_variance_stabilization.csv")).unwrap();
        assert!(csv.starts_with("k,step,measured_mean,std_error,predicted\n"));
        assert_eq!(csv.lines().count(), 1 + 5 * 11);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The grid CSV files of two configurations with three runs each: the summary rows hold the
    /// mean and standard error of the per-run rows, the curves one row per pass, and the per-run
    /// files every run with its seed.
    #[test]
    fn grid_csv_summarizes_the_runs() {
        let mut rng = seeded_rng_for_experiments(1);
        let d = synthetic_production(1000, 300, &mut rng).unwrap();
        let mut cfg = SimConfig::paper_defaults(3);
        cfg.learning_rate = 0.1;
        cfg.passes = 2;
        let runs: Vec<(u64, SimReport)> = (0..3)
            .map(|r| {
                let seed = run_seed(7, 1, r);
                let mut rng = seeded_rng_for_experiments(seed);
                (
                    seed,
                    simulate_in_process(&d, &cfg, &mut rng, |_| {}).unwrap(),
                )
            })
            .collect();
        let mut g = GridCsv::new();
        g.add("a", &runs).unwrap();
        g.add("b", &runs[..1]).unwrap();
        let table = |s: &str| -> Vec<Vec<String>> {
            s.lines()
                .map(|l| l.split(',').map(str::to_owned).collect())
                .collect()
        };
        let summary = table(g.summary.as_str());
        let header = &summary[0];
        assert!(summary.iter().all(|r| r.len() == header.len()));
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        assert_eq!(summary.len(), 3);
        assert_eq!(summary[1][col("runs")], "3");
        let acc: Vec<f64> = runs.iter().map(|(_, r)| r.accuracy).collect();
        let mean = acc.iter().sum::<f64>() / 3.0;
        let se = (acc.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / 6.0).sqrt();
        let got: f64 = summary[1][col("accuracy_mean")].parse().unwrap();
        let got_se: f64 = summary[1][col("accuracy_se")].parse().unwrap();
        assert!((got - mean).abs() < 1e-12 && (got_se - se).abs() < 1e-12);
        // A single run has an empty standard error.
        assert_eq!(summary[2][col("runs")], "1");
        assert_eq!(summary[2][col("accuracy_se")], "");
        let per_run = table(g.runs.as_str());
        assert_eq!(per_run.len(), 1 + 3 + 1);
        assert_eq!(per_run[2][2], run_seed(7, 1, 1).to_string());
        let curves = table(g.curves.as_str());
        assert_eq!(curves.len(), 1 + 2 + 2);
        assert!(curves.iter().all(|r| r.len() == curves[0].len()));
        assert_eq!(table(g.curve_runs.as_str()).len(), 1 + 3 * 2 + 2);
    }
}
