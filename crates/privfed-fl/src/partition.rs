//! Seeded partitions of a dataset's rows over federated clients.
//!
//! A partition takes the rows' labels (class indices below `classes`) and returns, for each client,
//! the indices of its rows. Every partition here assigns **every row to exactly one client** and
//! leaves **no client empty**; each draws its randomness from the caller's generator
//! (`rng: &mut R`, as everywhere in this crate; a seeded
//! `privfed_mechanisms::rng::seeded_rng_for_experiments(seed)` makes it reproducible).
//!
//! | partition | [`Partition`] | what a client gets |
//! |---|---|---|
//! | [`iid`] | `{ kind = "iid" }` | a uniformly random subset; sizes differ by at most 1 |
//! | [`label_shards`] | `{ kind = "label_shards", shards_per_client = 2 }` | `shards_per_client` single-label shards (McMahan et al. 2017) |
//! | [`dirichlet`] | `{ kind = "dirichlet", alpha = 0.3 }` | per class, a Dirichlet(α) share of its rows (Hsu et al. 2019) |
//!
//! ## Label shards
//! McMahan et al. (2017, "Communication-efficient learning of deep networks from decentralized
//! data", the pathological non-IID MNIST split) sort the rows by label, cut the sorted list into
//! `clients × shards_per_client` equal shards and deal each client `shards_per_client` of them at
//! random. Cut that way a shard can straddle two labels, so a client can end up with more labels
//! than shards. Here the shards are cut **within classes** instead: class `c` gets a number of
//! shards proportional to its size (largest remainder, at least one for every class present) and
//! its rows (in a random order) are cut into that many near-equal pieces. Every shard then has
//! exactly one label, so **a client has at most `shards_per_client` labels**; shard sizes differ
//! slightly between classes (MNIST with 2,000 shards: 29 to 31 rows; with 200: 292 to 308).
//!
//! ## Dirichlet
//! For every class `c`, proportions `p ~ Dirichlet(α, …, α)` over the clients are drawn and the
//! class's rows (in a random order) are cut at `round(n_c · (p_1 + … + p_k))`, `k = 1, …, K`, so
//! client `k` gets `≈ n_c p_k` of them. Large α gives every client about the global label mix
//! (α → ∞ is an iid split); small α concentrates each class on a few clients. The Gamma variates
//! are drawn in log space (`ln G_α = ln G_{α+1} + ln U / α`), so α as small as `10⁻³` does not
//! underflow to an all-zero vector.
//!
//! **Empty clients.** With many clients or small α some clients receive no rows. They are filled
//! one row at a time: each empty client (in index order) takes one row, chosen uniformly at random,
//! from the client that currently has the most rows (ties: the lowest index). This changes at most
//! one row per empty client and keeps every row assigned exactly once; it needs at least as many
//! rows as clients. [`dirichlet`] reports how many rows were moved.

use privfed_learn::{LearnError, Result};
use privfed_mechanisms::Rng;
use rand::RngExt;
use rand::seq::SliceRandom;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

/// How rows are spread over clients, as it appears in a data config.
///
/// ```toml
/// partition = { kind = "iid" }
/// partition = { kind = "label_shards", shards_per_client = 2 }
/// partition = { kind = "dirichlet", alpha = 0.3 }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Partition {
    /// Shuffle and split evenly ([`iid`]).
    #[default]
    Iid,
    /// Single-label shards dealt at random ([`label_shards`]).
    LabelShards {
        /// Shards (hence at most labels) per client.
        shards_per_client: usize,
    },
    /// Per-class Dirichlet(α) proportions over clients ([`dirichlet`]).
    Dirichlet {
        /// The concentration α (> 0; small = skewed, large = close to iid).
        alpha: f64,
    },
}

impl Partition {
    /// A short name for output: `iid`, `shards(2)`, `dirichlet(0.3)`.
    pub fn name(&self) -> String {
        match *self {
            Partition::Iid => "iid".into(),
            Partition::LabelShards { shards_per_client } => format!("shards({shards_per_client})"),
            Partition::Dirichlet { alpha } => format!("dirichlet({alpha})"),
        }
    }

    /// Checks the parameters (without data).
    ///
    /// # Errors
    /// `shards_per_client = 0`; α not finite and > 0.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Partition::Iid => Ok(()),
            Partition::LabelShards { shards_per_client } => {
                if shards_per_client == 0 {
                    Err(LearnError::invalid("shards_per_client", 0.0, "must be ≥ 1"))
                } else {
                    Ok(())
                }
            }
            Partition::Dirichlet { alpha } => {
                privfed_learn::error::check_positive("alpha", alpha).map(|_| ())
            }
        }
    }

    /// Spreads rows with `labels` (each `< classes`) over `clients` clients: the row indices of
    /// each client.
    ///
    /// # Errors
    /// As [`iid`], [`label_shards`] and [`dirichlet`].
    pub fn assign<R: Rng + ?Sized>(
        &self,
        labels: &[u32],
        classes: usize,
        clients: usize,
        rng: &mut R,
    ) -> Result<Vec<Vec<usize>>> {
        match *self {
            Partition::Iid => iid(labels.len(), clients, rng),
            Partition::LabelShards { shards_per_client } => {
                label_shards(labels, classes, clients, shards_per_client, rng)
            }
            Partition::Dirichlet { alpha } => {
                dirichlet(labels, classes, clients, alpha, rng).map(|(p, _)| p)
            }
        }
    }
}

fn check_clients(rows: usize, clients: usize) -> Result<()> {
    if clients == 0 {
        return Err(LearnError::invalid("clients", 0.0, "must be ≥ 1"));
    }
    if rows < clients {
        return Err(LearnError::invalid(
            "clients",
            clients as f64,
            format!("more clients than rows ({rows}): some client would be empty"),
        ));
    }
    Ok(())
}

fn check_labels(labels: &[u32], classes: usize) -> Result<()> {
    if let Some(&bad) = labels.iter().find(|&&l| l as usize >= classes) {
        return Err(LearnError::InvalidLabel {
            label: f64::from(bad),
            reason: format!("must be < {classes}"),
        });
    }
    Ok(())
}

/// Cuts `items` into `parts` contiguous pieces whose sizes differ by at most 1 (the first
/// `len % parts` pieces are one longer).
fn split_even<T: Clone>(items: &[T], parts: usize) -> Vec<Vec<T>> {
    let (q, r) = (items.len() / parts, items.len() % parts);
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    for k in 0..parts {
        let end = start + q + usize::from(k < r);
        out.push(items[start..end].to_vec());
        start = end;
    }
    out
}

/// IID partition: shuffles the `rows` row indices and cuts them into `clients` contiguous pieces
/// (sizes `⌊rows/clients⌋` or one more).
///
/// # Errors
/// `clients = 0` or `clients > rows`.
pub fn iid<R: Rng + ?Sized>(rows: usize, clients: usize, rng: &mut R) -> Result<Vec<Vec<usize>>> {
    check_clients(rows, clients)?;
    let mut idx: Vec<usize> = (0..rows).collect();
    idx.shuffle(rng);
    Ok(split_even(&idx, clients))
}

/// Row indices of each class, in row order.
fn by_class(labels: &[u32], classes: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); classes];
    for (i, &l) in labels.iter().enumerate() {
        out[l as usize].push(i);
    }
    out
}

/// Label-shard partition (McMahan et al. 2017, with shards cut within classes; see the
/// [module documentation](self)): `clients × shards_per_client` single-label shards dealt at
/// random, `shards_per_client` to each client, so each client has at most `shards_per_client`
/// labels.
///
/// # Errors
/// `clients` or `shards_per_client` zero, a label `≥ classes`, fewer rows than shards, or more
/// classes present than shards.
pub fn label_shards<R: Rng + ?Sized>(
    labels: &[u32],
    classes: usize,
    clients: usize,
    shards_per_client: usize,
    rng: &mut R,
) -> Result<Vec<Vec<usize>>> {
    check_clients(labels.len(), clients)?;
    Partition::LabelShards { shards_per_client }.validate()?;
    check_labels(labels, classes)?;
    let shards = clients
        .checked_mul(shards_per_client)
        .filter(|&s| s <= labels.len())
        .ok_or_else(|| {
            LearnError::invalid(
                "shards_per_client",
                shards_per_client as f64,
                format!(
                    "{clients} clients × {shards_per_client} shards exceed the {} rows",
                    labels.len()
                ),
            )
        })?;
    let mut classes_rows = by_class(labels, classes);
    let present: Vec<usize> = (0..classes)
        .filter(|&c| !classes_rows[c].is_empty())
        .collect();
    if present.len() > shards {
        return Err(LearnError::invalid(
            "shards_per_client",
            shards_per_client as f64,
            format!(
                "{shards} shards cannot keep {} classes apart",
                present.len()
            ),
        ));
    }
    // Shards per class: largest remainder of shards · n_c / n, at least 1 per present class.
    let n = labels.len();
    let mut count = vec![0usize; classes];
    let mut rem: Vec<(usize, usize)> = Vec::new(); // (remainder numerator, class)
    for &c in &present {
        let num = shards * classes_rows[c].len();
        count[c] = num / n;
        rem.push((num % n, c));
    }
    // Larger remainder first; ties by class index.
    rem.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // Fewer than `present.len()` shards are left (the remainders are fractions).
    let left = shards - count.iter().sum::<usize>();
    for &(_, c) in rem.iter().take(left) {
        count[c] += 1;
    }
    // At least one shard per present class, taken from the class with the most shards (a class
    // with ≥ 2 shards exists because shards ≥ present classes). A class never gets more shards
    // than rows: count_c ≤ ⌈shards·n_c/n⌉ ≤ n_c since shards ≤ n.
    for &c in &present {
        if count[c] == 0 {
            let donor = (0..classes)
                .max_by_key(|&d| (count[d], std::cmp::Reverse(d)))
                .unwrap_or(c);
            count[donor] -= 1;
            count[c] = 1;
        }
    }
    let mut pieces: Vec<Vec<usize>> = Vec::with_capacity(shards);
    for &c in &present {
        classes_rows[c].shuffle(rng);
        pieces.extend(split_even(&classes_rows[c], count[c]));
    }
    pieces.shuffle(rng);
    let mut out = vec![Vec::new(); clients];
    for (s, piece) in pieces.into_iter().enumerate() {
        out[s % clients].extend(piece);
    }
    Ok(out)
}

/// `ln G` for `G ~ Gamma(α, 1)`, accurate for tiny α: `ln G_{α+1} + ln U / α`.
fn ln_gamma_variate<R: Rng + ?Sized>(big: &Gamma<f64>, alpha: f64, rng: &mut R) -> f64 {
    let g: f64 = big.sample(rng);
    // U in (0, 1]: never ln 0.
    let u = 1.0 - rng.random::<f64>();
    g.ln() + u.ln() / alpha
}

/// Dirichlet partition (Hsu et al. 2019; see the [module documentation](self)): for every class,
/// its rows are split over the clients by proportions drawn from Dirichlet(α, …, α); empty
/// clients are then given one row each from the largest client. Returns the partition and the
/// number of rows so moved.
///
/// # Errors
/// `clients = 0`, `clients > rows`, α not finite and > 0, a label `≥ classes`.
pub fn dirichlet<R: Rng + ?Sized>(
    labels: &[u32],
    classes: usize,
    clients: usize,
    alpha: f64,
    rng: &mut R,
) -> Result<(Vec<Vec<usize>>, usize)> {
    check_clients(labels.len(), clients)?;
    Partition::Dirichlet { alpha }.validate()?;
    check_labels(labels, classes)?;
    let big = Gamma::new(alpha + 1.0, 1.0)
        .map_err(|e| LearnError::invalid("alpha", alpha, e.to_string()))?;
    let mut out = vec![Vec::new(); clients];
    let mut logs = vec![0.0f64; clients];
    for mut rows in by_class(labels, classes) {
        if rows.is_empty() {
            continue;
        }
        rows.shuffle(rng);
        for l in logs.iter_mut() {
            *l = ln_gamma_variate(&big, alpha, rng);
        }
        // Normalize in log space: p_k = exp(l_k − max) / Σ exp(l_j − max).
        let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = logs.iter().map(|l| (l - max).exp()).sum();
        let n = rows.len() as f64;
        let mut cum = 0.0;
        let mut start = 0;
        for (k, l) in logs.iter().enumerate() {
            cum += (l - max).exp() / total;
            let end = if k + 1 == clients {
                rows.len()
            } else {
                ((n * cum).round() as usize).clamp(start, rows.len())
            };
            out[k].extend_from_slice(&rows[start..end]);
            start = end;
        }
    }
    let mut moved = 0;
    for k in 0..clients {
        if out[k].is_empty() {
            let donor = (0..clients)
                .max_by_key(|&d| (out[d].len(), std::cmp::Reverse(d)))
                .unwrap_or(k);
            let j = rng.random_range(0..out[donor].len());
            let row = out[donor].swap_remove(j);
            out[k].push(row);
            moved += 1;
        }
    }
    Ok((out, moved))
}

/// The `clients × classes` table of label counts of a partition (for checks and reports).
pub fn label_counts(parts: &[Vec<usize>], labels: &[u32], classes: usize) -> Vec<Vec<usize>> {
    parts
        .iter()
        .map(|p| {
            let mut c = vec![0usize; classes];
            for &i in p {
                if let Some(slot) = labels.get(i).and_then(|&l| c.get_mut(l as usize)) {
                    *slot += 1;
                }
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;

    /// 10,000 labels over 10 classes with unequal sizes (class c has about (c+5)/95 of the rows).
    fn labels() -> Vec<u32> {
        let mut rng = seeded_rng_for_experiments(100);
        (0..10_000)
            .map(|_| {
                let mut u = rng.random_range(0..95u32);
                let mut c = 0;
                while u >= c + 5 {
                    u -= c + 5;
                    c += 1;
                }
                c
            })
            .collect()
    }

    fn assert_exact_cover(parts: &[Vec<usize>], rows: usize) {
        let mut seen = vec![0u8; rows];
        for p in parts {
            assert!(!p.is_empty(), "an empty client");
            for &i in p {
                seen[i] += 1;
            }
        }
        assert!(
            seen.iter().all(|&s| s == 1),
            "a row not assigned exactly once"
        );
    }

    /// Pearson's chi-square statistic of independence of client and label in the count table.
    fn chi_square(table: &[Vec<usize>]) -> f64 {
        let n: usize = table.iter().flatten().sum();
        let cols = table[0].len();
        let col: Vec<usize> = (0..cols)
            .map(|j| table.iter().map(|r| r[j]).sum())
            .collect();
        let mut s = 0.0;
        for r in table {
            let rt: usize = r.iter().sum();
            for j in 0..cols {
                let e = (rt * col[j]) as f64 / n as f64;
                if e > 0.0 {
                    s += (r[j] as f64 - e).powi(2) / e;
                }
            }
        }
        s
    }

    /// The 1 − 10⁻⁶ quantile of χ²(171) ((20 − 1)(10 − 1) degrees of freedom): 273.70
    /// (`scipy.stats.chi2.ppf(1 - 1e-6, 171)`; Wilson–Hilferty with z = 4.7534 gives 273.92).
    const CHI2_171_Q: f64 = 273.7;

    #[test]
    fn every_partition_covers_every_row_once_and_is_deterministic() {
        let y = labels();
        for p in [
            Partition::Iid,
            Partition::LabelShards {
                shards_per_client: 2,
            },
            Partition::Dirichlet { alpha: 0.3 },
        ] {
            let run = |seed| {
                let mut rng = seeded_rng_for_experiments(seed);
                p.assign(&y, 10, 37, &mut rng).unwrap()
            };
            let a = run(1);
            assert_eq!(a.len(), 37);
            assert_exact_cover(&a, y.len());
            assert_eq!(a, run(1), "{p:?} not deterministic");
            assert_ne!(a, run(2), "{p:?} ignores the seed");
        }
    }

    #[test]
    fn iid_sizes_are_even_and_labels_independent_of_client() {
        let y = labels();
        let mut rng = seeded_rng_for_experiments(3);
        let parts = iid(y.len(), 20, &mut rng).unwrap();
        assert!(parts.iter().all(|p| p.len() == 500));
        // Under an iid split the statistic is (nearly) χ²(171): FPR 10⁻⁶.
        let s = chi_square(&label_counts(&parts, &y, 10));
        assert!(s < CHI2_171_Q, "chi-square {s}");
        let uneven = iid(7, 3, &mut rng).unwrap();
        let sizes: Vec<usize> = uneven.iter().map(Vec::len).collect();
        assert_eq!(sizes, [3, 2, 2]);
    }

    #[test]
    fn label_shards_give_at_most_shards_per_client_labels() {
        let y = labels();
        for spc in [1, 2, 3] {
            let mut rng = seeded_rng_for_experiments(4);
            let parts = label_shards(&y, 10, 50, spc, &mut rng).unwrap();
            assert_exact_cover(&parts, y.len());
            for c in label_counts(&parts, &y, 10) {
                let labels = c.iter().filter(|&&k| k > 0).count();
                assert!(
                    labels <= spc,
                    "{labels} labels with {spc} shards per client"
                );
            }
        }
        // With one shard per client, a client is a shard: class c's k_c shards have
        // ⌊n_c/k_c⌋ or ⌈n_c/k_c⌉ rows.
        let mut rng = seeded_rng_for_experiments(4);
        let parts = label_shards(&y, 10, 50, 1, &mut rng).unwrap();
        let table = label_counts(&parts, &y, 10);
        let n_c = |c: usize| y.iter().filter(|&&l| l as usize == c).count();
        for row in &table {
            let c = row.iter().position(|&k| k > 0).unwrap();
            let k_c = table.iter().filter(|r| r[c] > 0).count();
            assert!((n_c(c) / k_c..=n_c(c).div_ceil(k_c)).contains(&row[c]));
        }
        // Every class present is kept apart even when shards barely outnumber classes.
        let mut rng = seeded_rng_for_experiments(5);
        let parts = label_shards(&y, 10, 10, 1, &mut rng).unwrap();
        for c in label_counts(&parts, &y, 10) {
            assert_eq!(c.iter().filter(|&&k| k > 0).count(), 1);
        }
        assert!(label_shards(&y, 10, 3, 3, &mut rng).is_err()); // 9 shards, 10 classes
        assert!(label_shards(&y, 10, 10, 0, &mut rng).is_err());
        assert!(label_shards(&[0, 1], 10, 3, 1, &mut rng).is_err());
        assert!(label_shards(&[0, 11], 10, 1, 1, &mut rng).is_err());
    }

    /// α = 10⁴: each client's share of a class is 1/20 with standard deviation
    /// √(0.05·0.95/(20·10⁴)) ≈ 4.9·10⁻⁴, so the count table is far less dispersed than an iid
    /// split's; its chi-square statistic is compared with the iid 1 − 10⁻⁶ quantile (FPR ≤ 10⁻⁶).
    /// α = 0.05: the classes concentrate on a few clients and the statistic must exceed that same
    /// quantile (under Dirichlet(0.05) it is of order n·(classes − 1) = 9·10⁴; falling below 273.7
    /// would need near-uniform proportions for all 10 classes, probability far below 10⁻⁶). A
    /// readable check as well: on average a client's most common label is more than half of its
    /// rows (iid: about 15%).
    #[test]
    fn dirichlet_large_alpha_is_near_iid_and_small_alpha_is_skewed() {
        let y = labels();
        let mut rng = seeded_rng_for_experiments(6);
        let (near, moved) = dirichlet(&y, 10, 20, 1e4, &mut rng).unwrap();
        assert_eq!(moved, 0);
        let s = chi_square(&label_counts(&near, &y, 10));
        assert!(s < CHI2_171_Q, "α = 1e4: chi-square {s}");
        for p in &near {
            assert!((p.len() as f64 - 500.0).abs() < 50.0, "{}", p.len());
        }
        let (skew, _) = dirichlet(&y, 10, 20, 0.05, &mut rng).unwrap();
        assert_exact_cover(&skew, y.len());
        let table = label_counts(&skew, &y, 10);
        let s = chi_square(&table);
        assert!(s > CHI2_171_Q, "α = 0.05: chi-square {s}");
        let mean_top: f64 = table
            .iter()
            .map(|r| *r.iter().max().unwrap() as f64 / r.iter().sum::<usize>() as f64)
            .sum::<f64>()
            / 20.0;
        assert!(mean_top > 0.5, "mean top-label share {mean_top}");
    }

    #[test]
    fn dirichlet_fills_empty_clients_and_validates() {
        let y = labels();
        let mut rng = seeded_rng_for_experiments(7);
        // 1,000 clients of 10 rows on average at α = 0.01: many would be empty.
        let (parts, moved) = dirichlet(&y, 10, 1000, 0.01, &mut rng).unwrap();
        assert!(moved > 100, "moved {moved}");
        assert_exact_cover(&parts, y.len());
        // Tiny α does not underflow.
        let (parts, _) = dirichlet(&y, 10, 5, 1e-3, &mut rng).unwrap();
        assert_exact_cover(&parts, y.len());
        assert!(dirichlet(&y, 10, 5, 0.0, &mut rng).is_err());
        assert!(dirichlet(&y, 10, 5, f64::NAN, &mut rng).is_err());
        assert!(dirichlet(&y, 10, 0, 1.0, &mut rng).is_err());
        assert!(dirichlet(&y, 10, 10_001, 1.0, &mut rng).is_err());
        assert!(dirichlet(&[3], 2, 1, 1.0, &mut rng).is_err());
        let e = Partition::Dirichlet { alpha: -1.0 }.validate().unwrap_err();
        assert!(e.to_string().contains("alpha"), "{e}");
    }
}
