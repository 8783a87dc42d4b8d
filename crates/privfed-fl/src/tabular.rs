//! MNIST and UCI Adult as federated datasets: the loaders of [`crate::datasets`] (same files, same
//! features) with the training rows spread over clients by a [`Partition`].
//!
//! * **MNIST**: 784 dense features (pixels `/255`, in `[0, 1]`), 10 classes; the clients share the
//!   60,000 training images (e.g. 1,000 clients × 60 with an iid split, or McMahan et al.'s
//!   `label_shards` with 2 shards per client); the test shard is the 10,000-image test set.
//! * **UCI Adult**: the 105-feature encoding of [`crate::datasets`] (intercept, scaled numerics,
//!   one-hot categoricals), 2 classes (1 = `>50K`); the clients share the 32,561 rows of
//!   `adult.data` (iid, or Dirichlet over the label for skewed income mixes); the test shard is
//!   `adult.test` (16,281 rows).
//!
//! Any [`Dataset`] of [`crate::datasets`] can be federated the same way with [`federate_dataset`]
//! (the synthetic production model of paper 003 included).

use std::path::Path;

use crate::datasets::Result;
use privfed_learn::LearnError;
use privfed_mechanisms::Rng;

use super::data::{FederatedData, Shard};
use super::partition::Partition;
use crate::datasets::{Dataset, DatasetKind, Table, load_adult, load_mnist};

/// Number of classes of a dataset of [`crate::datasets`] (10 for MNIST, 2 otherwise).
pub fn classes_of(kind: DatasetKind) -> usize {
    match kind {
        DatasetKind::Mnist => 10,
        DatasetKind::Adult | DatasetKind::SyntheticProduction => 2,
    }
}

/// The labels of a table as class indices.
///
/// # Errors
/// A label that is not an integer in `0..classes`.
pub fn class_labels(table: &Table, classes: usize) -> Result<Vec<u32>, LearnError> {
    table
        .labels()
        .iter()
        .map(|&y| {
            if y.fract() == 0.0 && y >= 0.0 && (y as usize) < classes {
                Ok(y as u32)
            } else {
                Err(LearnError::InvalidLabel {
                    label: y,
                    reason: format!("must be a class index in 0..{classes}"),
                })
            }
        })
        .collect()
}

/// The rows of `table` at `indices` as a dense shard.
///
/// # Errors
/// As [`Shard::dense`]; `labels` must be the table's class labels.
pub fn table_shard(
    table: &Table,
    labels: &[u32],
    classes: usize,
    indices: &[usize],
) -> Result<Shard> {
    let f = table.features();
    let mut x = Vec::with_capacity(indices.len() * f);
    let mut y = Vec::with_capacity(indices.len());
    for &i in indices {
        x.extend_from_slice(table.row(i));
        y.push(labels[i]);
    }
    Ok(Shard::dense(f, classes, x, y)?)
}

/// Spreads a loaded dataset's training rows over `clients` clients by `partition`; the test shard
/// is the dataset's test table. Named `{dataset}/{partition}/{clients}` (e.g.
/// `mnist/dirichlet(0.3)/1000`).
///
/// # Errors
/// As [`Partition::assign`] (e.g. more clients than rows) and [`Shard::dense`].
pub fn federate_dataset<R: Rng + ?Sized>(
    dataset: &Dataset,
    partition: &Partition,
    clients: usize,
    rng: &mut R,
) -> Result<FederatedData> {
    let classes = classes_of(dataset.kind);
    let labels = class_labels(&dataset.train, classes)?;
    let parts = partition.assign(&labels, classes, clients, rng)?;
    let shards = parts
        .iter()
        .map(|p| table_shard(&dataset.train, &labels, classes, p))
        .collect::<Result<Vec<_>>>()?;
    let test_labels = class_labels(&dataset.test, classes)?;
    let all: Vec<usize> = (0..dataset.test.len()).collect();
    let test = table_shard(&dataset.test, &test_labels, classes, &all)?;
    Ok(FederatedData::new(
        format!("{}/{}/{clients}", dataset.kind.name(), partition.name()),
        shards,
        test,
    )?)
}

/// Federated MNIST from `data_dir/mnist/` ([`load_mnist`]): 784 features, 10 classes, the 60,000
/// training images over `clients` clients by `partition`, the 10,000 test images as the test
/// shard.
///
/// # Errors
/// The loader's [`DataError::File`](crate::datasets::DataError::File) naming the file; as [`federate_dataset`].
pub fn mnist<R: Rng + ?Sized>(
    data_dir: &Path,
    partition: &Partition,
    clients: usize,
    rng: &mut R,
) -> Result<FederatedData> {
    partition.validate()?;
    federate_dataset(&load_mnist(data_dir)?, partition, clients, rng)
}

/// Federated UCI Adult from `data_dir/adult/` ([`load_adult`]): 105 features, 2 classes, the
/// 32,561 rows of `adult.data` over `clients` clients by `partition`, `adult.test` as the test
/// shard.
///
/// # Errors
/// The loader's [`DataError::File`](crate::datasets::DataError::File) naming the file; as [`federate_dataset`].
pub fn adult<R: Rng + ?Sized>(
    data_dir: &Path,
    partition: &Partition,
    clients: usize,
    rng: &mut R,
) -> Result<FederatedData> {
    partition.validate()?;
    federate_dataset(&load_adult(data_dir)?, partition, clients, rng)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::data::RowKind;
    use crate::datasets::DataError;
    use crate::partition::label_counts;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;
    use privfed_testkit::shared_data;
    use std::sync::OnceLock;

    /// MNIST loaded once for all the tests of this crate that need it.
    pub(crate) fn mnist_once() -> &'static Dataset {
        static D: OnceLock<Dataset> = OnceLock::new();
        D.get_or_init(|| load_mnist(&shared_data()).unwrap())
    }

    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult) not found beside the repository"
    )]
    fn mnist_1000_clients_of_60_and_label_shards() {
        let d = mnist_once();
        let mut rng = seeded_rng_for_experiments(40);
        let fd = federate_dataset(d, &Partition::Iid, 1000, &mut rng).unwrap();
        assert_eq!(fd.name, "mnist/iid/1000");
        assert_eq!(
            fd.kind,
            RowKind::Dense {
                features: 784,
                classes: 10
            }
        );
        assert_eq!(fd.clients.len(), 1000);
        assert!(fd.clients.iter().all(|c| c.rows() == 60));
        assert_eq!(fd.test.rows(), 10_000);
        // Labels and pixels survive: class totals over the clients are MNIST's.
        let mut counts = [0usize; 10];
        for c in &fd.clients {
            for &t in c.targets() {
                counts[t as usize] += 1;
            }
        }
        assert_eq!(
            counts,
            [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
        );
        // A client's rows are the dataset's rows (the first row of client 0 is some training
        // image with the same label).
        let b = fd.clients[0].range(0, 1);
        let row = match b.inputs {
            privfed_learn::nn::Inputs::Dense { x, .. } => x.to_vec(),
            _ => unreachable!(),
        };
        let found = (0..d.train.len()).any(|i| {
            d.train.row(i) == row.as_slice() && d.train.label(i) == f64::from(b.targets[0])
        });
        assert!(found);

        let spc = Partition::LabelShards {
            shards_per_client: 2,
        };
        let fd = federate_dataset(d, &spc, 100, &mut rng).unwrap();
        assert_eq!(fd.train_rows(), 60_000);
        for c in &fd.clients {
            // Two shards of 292 to 308 rows (see the partition's documentation).
            assert!((584..=616).contains(&c.rows()), "{}", c.rows());
            let mut seen = [false; 10];
            c.targets().iter().for_each(|&t| seen[t as usize] = true);
            assert!(seen.iter().filter(|&&s| s).count() <= 2);
        }
    }

    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult) not found beside the repository"
    )]
    fn adult_iid_and_dirichlet_over_the_label() {
        let mut rng = seeded_rng_for_experiments(41);
        let dir = shared_data();
        let d = load_adult(&dir).unwrap();
        let iid = federate_dataset(&d, &Partition::Iid, 100, &mut rng).unwrap();
        assert_eq!(iid.name, "adult/iid/100");
        assert_eq!(
            iid.kind,
            RowKind::Dense {
                features: 105,
                classes: 2
            }
        );
        assert_eq!(iid.train_rows(), 32_561);
        assert_eq!(iid.test.rows(), 16_281);
        assert_eq!(
            iid.test.targets().iter().filter(|&&t| t == 1).count(),
            3_846
        );
        // Dirichlet(0.1) over 100 clients: most clients are dominated by one label (iid: every
        // client is about 24% `>50K`).
        let labels = class_labels(&d.train, 2).unwrap();
        let parts = Partition::Dirichlet { alpha: 0.1 }
            .assign(&labels, 2, 100, &mut rng)
            .unwrap();
        let table = label_counts(&parts, &labels, 2);
        let skewed = table
            .iter()
            .filter(|r| r[1] * 10 < r[0] + r[1] || r[0] * 10 < r[0] + r[1])
            .count();
        assert!(skewed > 50, "{skewed} clients with a 90% label");
        let e = mnist(&dir.join("nowhere"), &Partition::Iid, 10, &mut rng).unwrap_err();
        assert!(matches!(e, DataError::File { .. }), "{e}");
    }
}
