//! The one grid runner of the experiments: every grid of [`ddml`](super::ddml),
//! [`mvu`](super::mvu), [`paper001`](super::paper001) and [`fl`](super::fl) is a list of
//! [`Point`]s — labelled configurations, often the cartesian product of named axes
//! ([`axis`], [`product`]) — run by [`Grid::run`]: every point in order, each `repeats` times
//! with its derived seed, an [`Observer`] for progress ([`Trial::announce`] is the standard
//! line), results collected per point and handed to a callback after each point (so a caller can write partial results: an interrupted grid keeps
//! what it finished). The CSV files are written with [`privfed_plot::csv::CsvWriter`].
//!
//! ```
//! use privfed_sim::experiments::Silent;
//! use privfed_sim::experiments::grid::{Grid, axis, product};
//!
//! // k ∈ {1, 2} × ε ∈ {0.5, 1}: four points, the last axis fastest.
//! let points = product(axis("k", [1u32, 2]), "epsilon", [0.5, 1.0], |k, e| (*k, *e));
//! assert_eq!(points[1].describe(), "k=1, epsilon=1");
//! let results = Grid::new(&points)
//!     .repeats(2)
//!     .run(&mut Silent, |t, _| {
//!         let (k, e) = t.point.config;
//!         Ok::<_, std::convert::Infallible>(f64::from(k) * e)
//!     })
//!     .unwrap();
//! assert_eq!(results[3], vec![2.0, 2.0]);
//! ```

use super::Observer;
use std::fmt::Display;

/// One point of a grid: its labels and the configuration a run of it is given.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<C> {
    /// `(axis, value)` pairs in axis order (the leading columns of the point's CSV rows).
    pub labels: Vec<(String, String)>,
    /// What a run of the point is given.
    pub config: C,
}

impl<C> Point<C> {
    /// A point with `labels` and `config`.
    pub fn new(labels: &[(&str, String)], config: C) -> Self {
        Point {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
            config,
        }
    }

    /// The labels as `axis=value` joined by `, ` (`epsilon=1000, p=0.622`).
    pub fn describe(&self) -> String {
        self.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The value of label `axis` (empty if the point has none).
    pub fn label(&self, axis: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| k == axis)
            .map_or("", |(_, v)| v.as_str())
    }
}

/// The points of one axis `name`, one per value (the value is the point's configuration).
pub fn axis<V: Display>(name: &str, values: impl IntoIterator<Item = V>) -> Vec<Point<V>> {
    values
        .into_iter()
        .map(|v| Point::new(&[(name, v.to_string())], v))
        .collect()
}

/// The cartesian product of `points` with the axis `name`: every point once per value, in that
/// order (the new axis varies fastest), with the label `name=value` appended and its
/// configuration `set(config, value)`.
pub fn product<C, D, V: Display>(
    points: Vec<Point<C>>,
    name: &str,
    values: impl IntoIterator<Item = V>,
    set: impl Fn(&C, &V) -> D,
) -> Vec<Point<D>> {
    let values: Vec<V> = values.into_iter().collect();
    points
        .iter()
        .flat_map(|p| {
            values.iter().map(|v| {
                let mut labels = p.labels.clone();
                labels.push((name.to_string(), v.to_string()));
                Point {
                    labels,
                    config: set(&p.config, v),
                }
            })
        })
        .collect()
}

/// One run of a grid: which point, which repeat, which seed.
#[derive(Debug)]
pub struct Trial<'g, C> {
    /// The point's index (0-based).
    pub index: usize,
    /// How many points the grid has.
    pub points: usize,
    /// The point.
    pub point: &'g Point<C>,
    /// The repeat (0-based).
    pub repeat: usize,
    /// Repeats per point.
    pub repeats: usize,
    /// The run's seed ([`Grid::seeds`]; `None` when the grid derives none).
    pub seed: Option<u64>,
}

impl<C> Trial<'_, C> {
    /// The standard progress line: `[3/23] k k=10 (run 1/2, seed 2029)` — the position, the
    /// label values, the repeat and the seed.
    pub fn announce(&self) -> String {
        let values: Vec<&str> = self.point.labels.iter().map(|(_, v)| v.as_str()).collect();
        let seed = self.seed.map(|s| format!(", seed {s}")).unwrap_or_default();
        format!(
            "[{}/{}] {} (run {}/{}{seed})",
            self.index + 1,
            self.points,
            values.join(" "),
            self.repeat + 1,
            self.repeats
        )
    }

    /// `3/11 (epsilon=1000, p=0.622)`: the position and labels by which an error names the run.
    pub fn name(&self) -> String {
        format!(
            "{}/{} ({})",
            self.index + 1,
            self.points,
            self.point.describe()
        )
    }
}

/// How a list of points is run ([`Grid::run`]).
pub struct Grid<'g, C> {
    points: &'g [Point<C>],
    repeats: usize,
    reuse_identical: bool,
    seed: Option<Box<dyn Fn(usize, usize) -> u64 + 'g>>,
}

impl<'g, C: PartialEq> Grid<'g, C> {
    /// Every point once, no seeds.
    pub fn new(points: &'g [Point<C>]) -> Self {
        Grid {
            points,
            repeats: 1,
            reuse_identical: false,
            seed: None,
        }
    }

    /// Runs every point `repeats` times (at least once).
    pub fn repeats(mut self, repeats: usize) -> Self {
        self.repeats = repeats.max(1);
        self
    }

    /// The seed of each run from `(point index, repeat)`.
    pub fn seeds(mut self, seed: impl Fn(usize, usize) -> u64 + 'g) -> Self {
        self.seed = Some(Box::new(seed));
        self
    }

    /// A point whose configuration equals an earlier point's is not run again: it gets that
    /// point's results (e.g. k = 10 without noise in three of paper 003's grids).
    pub fn reuse_identical(mut self) -> Self {
        self.reuse_identical = true;
        self
    }

    /// The trial of `(index, repeat)`.
    fn trial(&self, index: usize, repeat: usize) -> Trial<'g, C> {
        Trial {
            index,
            points: self.points.len(),
            point: &self.points[index],
            repeat,
            repeats: self.repeats,
            seed: self.seed.as_ref().map(|s| s(index, repeat)),
        }
    }

    /// Calls `check` for every point (as its first repeat) before anything runs, so that a grid
    /// with an impossible point fails in seconds rather than after hours of the others.
    ///
    /// # Errors
    /// The first error of `check`.
    pub fn check<E>(&self, mut check: impl FnMut(&Trial<'g, C>) -> Result<(), E>) -> Result<(), E> {
        (0..self.points.len()).try_for_each(|i| check(&self.trial(i, 0)))
    }

    /// Runs every point ([`run_then`](Self::run_then) without a callback).
    ///
    /// # Errors
    /// The first error of `run`.
    pub fn run<R: Clone, E>(
        &self,
        observer: &mut dyn Observer,
        run: impl FnMut(&Trial<'g, C>, &mut dyn Observer) -> Result<R, E>,
    ) -> Result<Vec<Vec<R>>, E> {
        self.run_then(observer, run, |_, _, _| Ok(()))
    }

    /// Runs every point in order, each [`repeats`](Self::repeats) times, and returns the
    /// results per point (one per repeat). After each point, `done(point, results so far,
    /// observer)` (the last entry is that point's).
    ///
    /// # Errors
    /// The first error of `run` or `done`; nothing runs after it.
    pub fn run_then<R: Clone, E>(
        &self,
        observer: &mut dyn Observer,
        mut run: impl FnMut(&Trial<'g, C>, &mut dyn Observer) -> Result<R, E>,
        mut done: impl FnMut(&'g Point<C>, &[Vec<R>], &mut dyn Observer) -> Result<(), E>,
    ) -> Result<Vec<Vec<R>>, E> {
        let mut all: Vec<Vec<R>> = Vec::with_capacity(self.points.len());
        for (index, point) in self.points.iter().enumerate() {
            let earlier = self.reuse_identical.then(|| {
                self.points[..index]
                    .iter()
                    .position(|p| p.config == point.config)
            });
            let results = match earlier.flatten() {
                Some(j) => all[j].clone(),
                None => {
                    let mut results = Vec::with_capacity(self.repeats);
                    for repeat in 0..self.repeats {
                        results.push(run(&self.trial(index, repeat), observer)?);
                    }
                    results
                }
            };
            all.push(results);
            done(point, &all, observer)?;
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::Silent;
    use std::convert::Infallible;

    struct Lines(Vec<String>);
    impl Observer for Lines {
        fn message(&mut self, line: &str) {
            self.0.push(line.to_owned());
        }
    }

    #[test]
    fn products_vary_the_last_axis_fastest() {
        let points = product(axis("k", [1, 2]), "b", ["x", "y", "z"], |k, b| (*k, *b));
        let configs: Vec<(i32, &str)> = points.iter().map(|p| p.config).collect();
        assert_eq!(
            configs,
            [(1, "x"), (1, "y"), (1, "z"), (2, "x"), (2, "y"), (2, "z")]
        );
        assert_eq!(points[4].describe(), "k=2, b=y");
        assert_eq!(points[4].label("b"), "y");
        assert_eq!(points[4].label("nope"), "");
        assert!(product(Vec::<Point<()>>::new(), "a", [1], |_, _| ()).is_empty());
    }

    /// Repeats, seeds, the progress lines, reuse of identical points and the callback after
    /// each point, in order.
    #[test]
    fn runs_every_point_and_repeat_in_order() {
        let points = vec![
            Point::new(&[("e", "a".into()), ("c", "1".into())], 1),
            Point::new(&[("e", "b".into()), ("c", "2".into())], 2),
            Point::new(&[("e", "c".into()), ("c", "1 again".into())], 1),
        ];
        let mut lines = Lines(Vec::new());
        let mut runs = Vec::new();
        let mut done = Vec::new();
        let all = Grid::new(&points)
            .repeats(2)
            .seeds(|i, r| 100 * i as u64 + r as u64)
            .reuse_identical()
            .run_then(
                &mut lines,
                |t, o| {
                    o.message(&t.announce());
                    runs.push((t.index, t.repeat, t.seed));
                    Ok::<_, Infallible>(t.point.config * 10 + t.repeat)
                },
                |p, all, o| {
                    o.message(&format!("done {}", p.describe()));
                    done.push(all.len());
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(all, vec![vec![10, 11], vec![20, 21], vec![10, 11]]);
        assert_eq!(
            runs,
            [
                (0, 0, Some(0)),
                (0, 1, Some(1)),
                (1, 0, Some(100)),
                (1, 1, Some(101))
            ]
        );
        assert_eq!(done, [1, 2, 3]);
        assert_eq!(
            lines.0,
            [
                "[1/3] a 1 (run 1/2, seed 0)",
                "[1/3] a 1 (run 2/2, seed 1)",
                "done e=a, c=1",
                "[2/3] b 2 (run 1/2, seed 100)",
                "[2/3] b 2 (run 2/2, seed 101)",
                "done e=b, c=2",
                "done e=c, c=1 again",
            ]
        );
    }

    /// The first error stops the grid; `check` sees every point before anything runs.
    #[test]
    fn errors_stop_the_grid() {
        let points = axis("x", [1, 2, 3]);
        let grid = Grid::new(&points);
        let mut seen = Vec::new();
        let e = grid.check(|t| {
            seen.push(t.index);
            if t.point.config == 2 {
                Err(t.name())
            } else {
                Ok(())
            }
        });
        assert_eq!(e, Err("2/3 (x=2)".to_string()));
        assert_eq!(seen, [0, 1]);
        let mut ran = 0;
        let e = grid.run(&mut Silent, |t, _| {
            ran += 1;
            if t.point.config == 2 {
                Err("two")
            } else {
                Ok(())
            }
        });
        assert_eq!((e, ran), (Err("two"), 2));
        let e = grid.run_then(&mut Silent, |_, _| Ok(()), |_, _, _| Err("write"));
        assert_eq!(e, Err("write"));
        let t = grid.trial(0, 0);
        assert_eq!(t.announce(), "[1/3] 1 (run 1/1)");
    }
}
