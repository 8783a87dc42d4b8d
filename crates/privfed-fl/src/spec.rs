//! Which federated dataset a run uses, as it appears in a TOML run config ([`DataSpec`]), and the
//! subsampling that keeps tests and quick runs small ([`Subsample`]).
//!
//! The accepted forms (each may be written as an inline table or a `[data]` section):
//! ```toml
//! # MNIST: 60,000 training images over `clients` clients; test = the 10,000 test images.
//! data = { dataset = "mnist", clients = 1000 }                                  # iid
//! data = { dataset = "mnist", clients = 100, partition = { kind = "label_shards", shards_per_client = 2 } }
//! data = { dataset = "mnist", clients = 1000, partition = { kind = "dirichlet", alpha = 0.3 } }
//!
//! # UCI Adult: 32,561 rows over `clients` clients (any partition; iid by default).
//! data = { dataset = "adult", clients = 500, partition = { kind = "dirichlet", alpha = 1.0 } }
//!
//! # Tiny Shakespeare, one client per speaking role (defaults shown).
//! data = { dataset = "shakespeare", seq_len = 80, min_sequences = 2, test_fraction = 0.2 }
//!
//! # Any of them may add a subsample: keep the first K clients and/or a fraction of the test rows.
//! data = { dataset = "mnist", clients = 1000, subsample = { clients = 50, test_fraction = 0.1 } }
//! ```
//! and, as a section, paper 000 §5.1's synthetic logistic problem (the last two fields optional,
//! defaults shown):
//! ```toml
//! [data]
//! dataset = "synthetic_logistic"
//! dim = 500
//! examples = 100000
//! signal = 1.0
//! clients = 100000
//! test_examples = 10000
//! population_samples = 1000000
//! ```
//! Unknown fields are refused by the deserializer (it names them); values out of range are
//! refused by [`DataSpec::validate`] (called by the loaders) with a [`LearnError`] that names the
//! field.

use std::path::Path;

use crate::datasets::Result;
use privfed_learn::LearnError;
use privfed_mechanisms::Rng;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use serde::{Deserialize, Serialize};

use super::data::FederatedData;
use super::partition::Partition;
use super::shakespeare::{ShakespeareConfig, Vocab, shakespeare};
use super::synthetic::{LogisticProblem, SyntheticLogisticConfig, synthetic_logistic};
use super::tabular::{adult, mnist};

/// Keep only part of a federated dataset: the first `clients` clients and/or `test_fraction` of
/// the test rows.
///
/// The test rows kept are `⌈n · test_fraction⌉` rows evenly spaced over the test shard (rows
/// `⌊j·n/m⌋`, `j = 0, …, m − 1`), not a prefix, so a test shard ordered by role or class keeps
/// its mix. No randomness is used.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Subsample {
    /// Keep the first this many clients (≥ 1; all if fewer).
    pub clients: Option<usize>,
    /// Keep this fraction of the test rows, in `(0, 1]`.
    pub test_fraction: Option<f64>,
}

impl Subsample {
    /// Checks the parameters.
    ///
    /// # Errors
    /// `clients = 0` (named `subsample.clients`), `test_fraction` outside `(0, 1]`.
    pub fn validate(&self) -> Result<()> {
        if self.clients == Some(0) {
            return Err(LearnError::invalid("subsample.clients", 0.0, "must be ≥ 1").into());
        }
        if let Some(f) = self.test_fraction
            && !(f > 0.0 && f <= 1.0)
        {
            return Err(
                LearnError::invalid("subsample.test_fraction", f, "must be in (0, 1]").into(),
            );
        }
        Ok(())
    }
}

impl FederatedData {
    /// The first `subsample.clients` clients and the evenly spaced `subsample.test_fraction` of
    /// the test rows ([`Subsample`]); the name gets `/first{K}` and `/test{m}` appended for what
    /// was cut.
    ///
    /// # Errors
    /// As [`Subsample::validate`].
    pub fn subsample(mut self, subsample: &Subsample) -> Result<Self> {
        subsample.validate()?;
        if let Some(k) = subsample.clients
            && k < self.clients.len()
        {
            self.clients.truncate(k);
            self.name.push_str(&format!("/first{k}"));
        }
        if let Some(f) = subsample.test_fraction {
            let n = self.test.rows();
            let m = ((n as f64 * f).ceil() as usize).clamp(usize::from(n > 0), n);
            if m < n {
                let idx: Vec<usize> = (0..m).map(|j| j * n / m).collect();
                self.test = self.test.select(&idx);
                self.name.push_str(&format!("/test{m}"));
            }
        }
        Ok(self)
    }
}

fn default_seq_len() -> usize {
    ShakespeareConfig::default().seq_len
}
fn default_min_sequences() -> usize {
    ShakespeareConfig::default().min_sequences
}
fn default_test_fraction() -> f64 {
    ShakespeareConfig::default().test_fraction
}
fn default_test_examples() -> usize {
    SyntheticLogisticConfig::new(1, 1, 0.0, 1).test_examples
}
fn default_population_samples() -> usize {
    SyntheticLogisticConfig::new(1, 1, 0.0, 1).population_samples
}

/// A federated dataset as configured in a run's TOML (forms in the
/// [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dataset", rename_all = "snake_case", deny_unknown_fields)]
pub enum DataSpec {
    /// MNIST ([`super::tabular::mnist`]).
    Mnist {
        /// Clients the 60,000 training images are spread over.
        clients: usize,
        /// How (default iid).
        #[serde(default)]
        partition: Partition,
        /// Optional cut for small runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subsample: Option<Subsample>,
    },
    /// UCI Adult ([`super::tabular::adult`]).
    Adult {
        /// Clients the 32,561 training rows are spread over.
        clients: usize,
        /// How (default iid).
        #[serde(default)]
        partition: Partition,
        /// Optional cut for small runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subsample: Option<Subsample>,
    },
    /// Tiny Shakespeare by speaking role ([`super::shakespeare`]).
    Shakespeare {
        /// Input characters per sequence (default 80).
        #[serde(default = "default_seq_len")]
        seq_len: usize,
        /// Minimum training sequences of a kept role (default 2).
        #[serde(default = "default_min_sequences")]
        min_sequences: usize,
        /// Held-out fraction of each role's sequences (default 0.2).
        #[serde(default = "default_test_fraction")]
        test_fraction: f64,
        /// Optional cut for small runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subsample: Option<Subsample>,
    },
    /// Paper 000 §5.1's synthetic logistic problem ([`super::synthetic`]).
    SyntheticLogistic {
        /// Dimension.
        dim: usize,
        /// Training examples.
        examples: usize,
        /// `‖θ*‖`.
        signal: f64,
        /// Clients the examples are spread over.
        clients: usize,
        /// Test examples (default 10,000).
        #[serde(default = "default_test_examples")]
        test_examples: usize,
        /// Monte Carlo points of the population loss (default 10⁶).
        #[serde(default = "default_population_samples")]
        population_samples: usize,
        /// Optional cut for small runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subsample: Option<Subsample>,
    },
}

/// What a dataset carries besides its shards.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Extras {
    /// Nothing (MNIST, Adult).
    None,
    /// Shakespeare: the vocabulary and the role of each (kept) client.
    Shakespeare {
        /// The character vocabulary.
        vocab: Vocab,
        /// The speaking role of each client, in client order.
        roles: Vec<String>,
    },
    /// The synthetic problem's `θ*` and population loss.
    SyntheticLogistic(LogisticProblem),
}

/// A loaded dataset with its [`Extras`].
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The shards.
    pub data: FederatedData,
    /// Vocabulary, roles or the true parameter, by dataset.
    pub extras: Extras,
}

impl DataSpec {
    fn subsample_opt(&self) -> Option<&Subsample> {
        match self {
            DataSpec::Mnist { subsample, .. }
            | DataSpec::Adult { subsample, .. }
            | DataSpec::Shakespeare { subsample, .. }
            | DataSpec::SyntheticLogistic { subsample, .. } => subsample.as_ref(),
        }
    }

    fn shakespeare_config(&self) -> Option<ShakespeareConfig> {
        match *self {
            DataSpec::Shakespeare {
                seq_len,
                min_sequences,
                test_fraction,
                ..
            } => Some(ShakespeareConfig {
                seq_len,
                min_sequences,
                test_fraction,
            }),
            _ => None,
        }
    }

    fn synthetic_config(&self) -> Option<SyntheticLogisticConfig> {
        match *self {
            DataSpec::SyntheticLogistic {
                dim,
                examples,
                signal,
                clients,
                test_examples,
                population_samples,
                ..
            } => Some(SyntheticLogisticConfig {
                dim,
                examples,
                signal,
                clients,
                test_examples,
                population_samples,
            }),
            _ => None,
        }
    }

    /// Checks every field without reading data.
    ///
    /// # Errors
    /// The first field out of range, by name ([`LearnError::InvalidParameter`]).
    pub fn validate(&self) -> Result<()> {
        match self {
            DataSpec::Mnist {
                clients, partition, ..
            }
            | DataSpec::Adult {
                clients, partition, ..
            } => {
                if *clients == 0 {
                    return Err(LearnError::invalid("clients", 0.0, "must be ≥ 1").into());
                }
                partition.validate()?;
            }
            DataSpec::Shakespeare { .. } => {
                if let Some(c) = self.shakespeare_config() {
                    c.validate()?;
                }
            }
            DataSpec::SyntheticLogistic { .. } => {
                if let Some(c) = self.synthetic_config() {
                    c.validate()?;
                }
            }
        }
        self.subsample_opt().map_or(Ok(()), Subsample::validate)
    }

    /// Loads (or draws) the dataset with its extras; partitions and synthetic draws take their
    /// randomness from `rng`. Files are read from `data_dir` (`mnist/`, `adult/`,
    /// `tinyshakespeare/input.txt`); the synthetic problem reads nothing.
    ///
    /// # Errors
    /// As [`DataSpec::validate`]; [`DataError::File`](crate::datasets::DataError::File) naming a missing or malformed file; as the
    /// partition (e.g. more clients than rows).
    pub fn load_with_rng<R: Rng + ?Sized>(&self, data_dir: &Path, rng: &mut R) -> Result<Loaded> {
        self.validate()?;
        let loaded = match self {
            DataSpec::Mnist {
                clients, partition, ..
            } => Loaded {
                data: mnist(data_dir, partition, *clients, rng)?,
                extras: Extras::None,
            },
            DataSpec::Adult {
                clients, partition, ..
            } => Loaded {
                data: adult(data_dir, partition, *clients, rng)?,
                extras: Extras::None,
            },
            DataSpec::Shakespeare { .. } => {
                let config = self.shakespeare_config().unwrap_or_default();
                let s = shakespeare(data_dir, &config)?;
                Loaded {
                    data: s.data,
                    extras: Extras::Shakespeare {
                        vocab: s.vocab,
                        roles: s.roles,
                    },
                }
            }
            DataSpec::SyntheticLogistic { .. } => {
                let config = self
                    .synthetic_config()
                    .ok_or_else(|| LearnError::Unsupported("not a synthetic spec".into()))?;
                let s = synthetic_logistic(&config, rng)?;
                Loaded {
                    data: s.data,
                    extras: Extras::SyntheticLogistic(s.problem),
                }
            }
        };
        let Some(sub) = self.subsample_opt() else {
            return Ok(loaded);
        };
        let data = loaded.data.subsample(sub)?;
        let extras = match loaded.extras {
            Extras::Shakespeare { vocab, mut roles } => {
                roles.truncate(data.clients.len());
                Extras::Shakespeare { vocab, roles }
            }
            other => other,
        };
        Ok(Loaded { data, extras })
    }

    /// [`DataSpec::load_with_rng`] with the generator
    /// `privfed_mechanisms::rng::seeded_rng_for_experiments(seed)` (partitions and synthetic
    /// draws are reproducible; they are not privacy noise), keeping only the shards.
    ///
    /// # Errors
    /// As [`DataSpec::load_with_rng`].
    pub fn load(&self, data_dir: &Path, seed: u64) -> Result<FederatedData> {
        let mut rng = seeded_rng_for_experiments(seed);
        self.load_with_rng(data_dir, &mut rng).map(|l| l.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{RowKind, Shard};
    use crate::datasets::DataError;
    use privfed_testkit::shared_data;

    #[derive(Debug, Deserialize)]
    struct Config {
        data: DataSpec,
    }

    fn parse(s: &str) -> std::result::Result<DataSpec, String> {
        toml::from_str::<Config>(s)
            .map(|c| c.data)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn toml_forms_parse_and_bad_fields_are_named() {
        let forms = [
            (
                r#"data = { dataset = "mnist", clients = 1000 }"#,
                DataSpec::Mnist {
                    clients: 1000,
                    partition: Partition::Iid,
                    subsample: None,
                },
            ),
            (
                r#"data = { dataset = "mnist", clients = 1000, partition = { kind = "dirichlet", alpha = 0.3 } }"#,
                DataSpec::Mnist {
                    clients: 1000,
                    partition: Partition::Dirichlet { alpha: 0.3 },
                    subsample: None,
                },
            ),
            (
                "[data]\ndataset = \"adult\"\nclients = 500\npartition = { kind = \"label_shards\", shards_per_client = 1 }\nsubsample = { clients = 5 }\n",
                DataSpec::Adult {
                    clients: 500,
                    partition: Partition::LabelShards {
                        shards_per_client: 1,
                    },
                    subsample: Some(Subsample {
                        clients: Some(5),
                        test_fraction: None,
                    }),
                },
            ),
            (
                r#"data = { dataset = "shakespeare" }"#,
                DataSpec::Shakespeare {
                    seq_len: 80,
                    min_sequences: 2,
                    test_fraction: 0.2,
                    subsample: None,
                },
            ),
            (
                r#"data = { dataset = "shakespeare", seq_len = 40, min_sequences = 5, subsample = { test_fraction = 0.5 } }"#,
                DataSpec::Shakespeare {
                    seq_len: 40,
                    min_sequences: 5,
                    test_fraction: 0.2,
                    subsample: Some(Subsample {
                        clients: None,
                        test_fraction: Some(0.5),
                    }),
                },
            ),
            (
                r#"data = { dataset = "synthetic_logistic", dim = 500, examples = 100000, signal = 1.0, clients = 100000 }"#,
                DataSpec::SyntheticLogistic {
                    dim: 500,
                    examples: 100_000,
                    signal: 1.0,
                    clients: 100_000,
                    test_examples: 10_000,
                    population_samples: 1_000_000,
                    subsample: None,
                },
            ),
        ];
        for (text, want) in forms {
            let got = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(got, want);
            got.validate().unwrap();
            // Round trip through TOML.
            let back = toml::to_string(&Config2 { data: got.clone() }).unwrap();
            assert_eq!(parse(&back).unwrap(), got, "{back}");
        }
        for (text, needle) in [
            (
                r#"data = { dataset = "mnist", clients = 10, alpah = 1 }"#,
                "alpah",
            ),
            (
                r#"data = { dataset = "mnist", clients = 10, partition = { kind = "dirichlet", alpah = 1.0 } }"#,
                "alpah",
            ),
            (r#"data = { dataset = "cifar", clients = 10 }"#, "cifar"),
            (r#"data = { dataset = "mnist" }"#, "clients"),
            (
                r#"data = { dataset = "mnist", clients = 10, subsample = { client = 1 } }"#,
                "client",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
        for (text, field) in [
            (r#"data = { dataset = "mnist", clients = 0 }"#, "clients"),
            (
                r#"data = { dataset = "adult", clients = 5, partition = { kind = "dirichlet", alpha = 0.0 } }"#,
                "alpha",
            ),
            (
                r#"data = { dataset = "adult", clients = 5, partition = { kind = "label_shards", shards_per_client = 0 } }"#,
                "shards_per_client",
            ),
            (
                r#"data = { dataset = "shakespeare", seq_len = 0 }"#,
                "seq_len",
            ),
            (
                r#"data = { dataset = "shakespeare", test_fraction = 1.5 }"#,
                "test_fraction",
            ),
            (
                r#"data = { dataset = "synthetic_logistic", dim = 5, examples = 10, signal = 1.0, clients = 11 }"#,
                "clients",
            ),
            (
                r#"data = { dataset = "synthetic_logistic", dim = 5, examples = 10, signal = inf, clients = 1 }"#,
                "signal",
            ),
            (
                r#"data = { dataset = "mnist", clients = 5, subsample = { clients = 0 } }"#,
                "subsample.clients",
            ),
            (
                r#"data = { dataset = "mnist", clients = 5, subsample = { test_fraction = 0.0 } }"#,
                "subsample.test_fraction",
            ),
        ] {
            let spec = parse(text).unwrap();
            let e = spec.validate().unwrap_err();
            assert!(
                matches!(&e, DataError::Learn(LearnError::InvalidParameter { name, .. }) if *name == field),
                "{text}: {e}"
            );
            // The loaders validate first: no file is read.
            let e = spec.load(Path::new("/nonexistent"), 1).unwrap_err();
            assert!(
                matches!(e, DataError::Learn(LearnError::InvalidParameter { .. })),
                "{e}"
            );
        }
    }

    #[derive(Debug, Serialize)]
    struct Config2 {
        data: DataSpec,
    }

    #[test]
    fn subsample_keeps_first_clients_and_spread_test_rows() {
        let shard = |rows: u32| {
            Shard::dense(
                1,
                10,
                (0..rows).map(|r| r as f32).collect(),
                (0..rows).map(|r| r % 10).collect(),
            )
            .unwrap()
        };
        let fd = FederatedData::new("toy".into(), vec![shard(1), shard(2), shard(3)], shard(10))
            .unwrap();
        let sub = fd
            .clone()
            .subsample(&Subsample {
                clients: Some(2),
                test_fraction: Some(0.3),
            })
            .unwrap();
        assert_eq!(sub.name, "toy/first2/test3");
        assert_eq!(sub.clients, fd.clients[..2]);
        assert_eq!(sub.test.targets(), &[0, 3, 6]);
        let same = fd.clone().subsample(&Subsample::default()).unwrap();
        assert_eq!(same, fd);
        let all = fd
            .clone()
            .subsample(&Subsample {
                clients: Some(9),
                test_fraction: Some(1.0),
            })
            .unwrap();
        assert_eq!(all, fd);
        assert!(
            fd.subsample(&Subsample {
                clients: Some(0),
                test_fraction: None
            })
            .is_err()
        );
    }

    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult, tinyshakespeare) not found beside the repository"
    )]
    fn specs_load_the_real_files() {
        let dir = shared_data();
        let spec = parse(
            r#"data = { dataset = "adult", clients = 300, partition = { kind = "dirichlet", alpha = 0.5 }, subsample = { clients = 20, test_fraction = 0.1 } }"#,
        )
        .unwrap();
        let a = spec.load(&dir, 7).unwrap();
        assert_eq!(a.clients.len(), 20);
        assert_eq!(a.test.rows(), 1_629);
        assert_eq!(a.name, "adult/dirichlet(0.5)/300/first20/test1629");

        let spec =
            parse(r#"data = { dataset = "shakespeare", subsample = { clients = 10 } }"#).unwrap();
        let l = spec
            .load_with_rng(&dir, &mut seeded_rng_for_experiments(1))
            .unwrap();
        assert_eq!(l.data.kind, RowKind::Tokens { len: 80, vocab: 65 });
        match &l.extras {
            Extras::Shakespeare { vocab, roles } => {
                assert_eq!(vocab.len(), 65);
                assert_eq!(roles.len(), 10);
            }
            other => panic!("{other:?}"),
        }

        let spec = parse(
            r#"data = { dataset = "synthetic_logistic", dim = 20, examples = 100, signal = 2.0, clients = 50, test_examples = 10, population_samples = 100 }"#,
        )
        .unwrap();
        let l = spec
            .load_with_rng(&dir, &mut seeded_rng_for_experiments(1))
            .unwrap();
        assert_eq!(l.data.clients.len(), 50);
        match &l.extras {
            Extras::SyntheticLogistic(p) => {
                assert!((p.distance(&[0.0; 20]).unwrap() - 2.0).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
    }
}
