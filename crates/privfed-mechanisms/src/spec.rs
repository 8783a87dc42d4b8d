//! The table of local randomizers: each one's name as the command line spells it, its Python
//! class, its parameters and the [`AnyRandomizer`] variant it builds.
//!
//! It is the one list the front ends are checked against: the simulator's mechanism choice and
//! the CLI's options (`privfed-sim`'s and `privfed`'s tests parse every row through the real
//! command-line parser, build it and compare the variant), and the Python classes (the bindings
//! export the table; a Python test compares every row with its class's signature and
//! `privfed.__all__`). A randomizer added to one front end and not to this table, or the other
//! way round, fails those tests.

use crate::AnyRandomizer;

/// One constructor parameter of a randomizer (ε included, the RNG seed not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The name as Python spells it; the command-line option is `--` followed by the name with
    /// `_` replaced by `-` ([`Param::cli_flag`]).
    pub name: &'static str,
    /// A valid value for the row's example (command-line text), or `None` when the example
    /// leaves the parameter at its default (e.g. a file path).
    pub example: Option<&'static str>,
}

impl Param {
    /// The command-line option of the parameter (`r_max` → `--r-max`).
    pub fn cli_flag(&self) -> String {
        format!("--{}", self.name.replace('_', "-"))
    }
}

/// One row of [`RANDOMIZERS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomizerSpec {
    /// The name on the command line (`privfed describe NAME`).
    pub name: &'static str,
    /// The Python class (`privfed.NAME`).
    pub python_class: &'static str,
    /// The [`AnyRandomizer`] variant it builds ([`AnyRandomizer::variant_name`]).
    pub variant: &'static str,
    /// The Python constructor's parameters, in order (without `seed`).
    pub params: &'static [Param],
}

impl RandomizerSpec {
    /// The row's example as command-line arguments after the name: every parameter that has
    /// an example value, as `--flag value`.
    pub fn example_args(&self) -> Vec<String> {
        self.params
            .iter()
            .filter_map(|p| p.example.map(|v| [p.cli_flag(), v.to_string()]))
            .flatten()
            .collect()
    }
}

const fn p(name: &'static str, example: &'static str) -> Param {
    Param {
        name,
        example: Some(example),
    }
}

const fn default(name: &'static str) -> Param {
    Param {
        name,
        example: None,
    }
}

/// Every local randomizer, in the order of `privfed describe --help`.
pub const RANDOMIZERS: &[RandomizerSpec] = &[
    RandomizerSpec {
        name: "privunit2",
        python_class: "PrivUnit2",
        variant: "PrivUnit2",
        params: &[
            p("epsilon", "4"),
            p("dim", "16"),
            p("parameterization", "paper000"),
            p("epsilon0", "1"),
        ],
    },
    RandomizerSpec {
        name: "privunitg",
        python_class: "PrivUnitG",
        variant: "PrivUnitG",
        params: &[
            p("epsilon", "4"),
            p("dim", "16"),
            p("parameterization", "optimized"),
        ],
    },
    RandomizerSpec {
        name: "privunit-inf",
        python_class: "PrivUnitInf",
        variant: "PrivUnitInf",
        params: &[p("epsilon", "4"), p("dim", "16")],
    },
    RandomizerSpec {
        name: "scalar-dp",
        python_class: "ScalarDP",
        variant: "GridRr",
        params: &[p("epsilon", "2"), p("r_max", "2"), p("k", "5")],
    },
    RandomizerSpec {
        name: "scalar-rel-dp",
        python_class: "ScalarRelDP",
        variant: "GridRr",
        params: &[
            p("epsilon", "2"),
            p("r_max", "4"),
            p("a", "0.1"),
            p("kappa", "2"),
        ],
    },
    RandomizerSpec {
        name: "grr",
        python_class: "GRR",
        variant: "GridRr",
        params: &[
            p("epsilon", "2"),
            p("bits", "3"),
            p("lo", "-2"),
            p("hi", "2"),
        ],
    },
    RandomizerSpec {
        name: "bitwise-rr",
        python_class: "BitwiseRR",
        variant: "BitwiseRr",
        params: &[
            p("epsilon", "2"),
            p("bits", "3"),
            p("lo", "-2"),
            p("hi", "2"),
        ],
    },
    RandomizerSpec {
        name: "separated",
        python_class: "Separated",
        variant: "Separated",
        params: &[
            p("epsilon", "4"),
            p("dim", "16"),
            p("r_max", "2"),
            p("magnitude_epsilon", "0.5"),
        ],
    },
    RandomizerSpec {
        name: "laplace",
        python_class: "Laplace",
        variant: "Laplace",
        params: &[
            p("epsilon", "1"),
            p("dim", "4"),
            p("norm", "l1"),
            p("radius", "2"),
        ],
    },
    RandomizerSpec {
        name: "gaussian",
        python_class: "Gaussian",
        variant: "Gaussian",
        params: &[
            p("epsilon", "1"),
            p("delta", "1e-5"),
            p("dim", "4"),
            p("norm", "l2"),
            p("radius", "2"),
        ],
    },
    RandomizerSpec {
        name: "mvu",
        python_class: "MVU",
        variant: "Mvu",
        params: &[
            p("epsilon", "2"),
            p("bits", "2"),
            p("lo", "-1"),
            p("hi", "1"),
            p("input_bits", "2"),
            p("output_bits", "2"),
            default("design"),
        ],
    },
];

/// The row named `name` (as on the command line).
pub fn find(name: &str) -> Option<&'static RandomizerSpec> {
    RANDOMIZERS.iter().find(|r| r.name == name)
}

impl AnyRandomizer {
    /// Every variant's name ([`AnyRandomizer::variant_name`]'s range).
    pub const VARIANTS: &'static [&'static str] = &[
        "PrivUnit2",
        "PrivUnitG",
        "PrivUnitInf",
        "GridRr",
        "Separated",
        "Laplace",
        "Gaussian",
        "BitwiseRr",
        "Mvu",
    ];

    /// The variant's name. The match is exhaustive on purpose: a new variant does not compile
    /// until it is named here (and in [`AnyRandomizer::VARIANTS`]), and the tests then fail
    /// until a row of [`RANDOMIZERS`] builds it.
    pub fn variant_name(&self) -> &'static str {
        match self {
            AnyRandomizer::PrivUnit2(_) => "PrivUnit2",
            AnyRandomizer::PrivUnitG(_) => "PrivUnitG",
            AnyRandomizer::PrivUnitInf(_) => "PrivUnitInf",
            AnyRandomizer::GridRr(_) => "GridRr",
            AnyRandomizer::Separated(_) => "Separated",
            AnyRandomizer::Laplace(_) => "Laplace",
            AnyRandomizer::Gaussian(_) => "Gaussian",
            AnyRandomizer::BitwiseRr(_) => "BitwiseRr",
            AnyRandomizer::Mvu(_) => "Mvu",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_classes_and_params_are_unique_and_every_variant_has_a_row() {
        let names: BTreeSet<_> = RANDOMIZERS.iter().map(|r| r.name).collect();
        let classes: BTreeSet<_> = RANDOMIZERS.iter().map(|r| r.python_class).collect();
        assert_eq!(names.len(), RANDOMIZERS.len());
        assert_eq!(classes.len(), RANDOMIZERS.len());
        for r in RANDOMIZERS {
            assert_eq!(
                r.params.first().map(|p| p.name),
                Some("epsilon"),
                "{}",
                r.name
            );
            let params: BTreeSet<_> = r.params.iter().map(|p| p.name).collect();
            assert_eq!(params.len(), r.params.len(), "{}", r.name);
            assert!(
                AnyRandomizer::VARIANTS.contains(&r.variant),
                "{}",
                r.variant
            );
        }
        let built: BTreeSet<_> = RANDOMIZERS.iter().map(|r| r.variant).collect();
        let all: BTreeSet<_> = AnyRandomizer::VARIANTS.iter().copied().collect();
        assert_eq!(built, all, "variants without a row");
        assert_eq!(find("grr").map(|r| r.python_class), Some("GRR"));
        assert_eq!(find("nope"), None);
    }

    #[test]
    fn example_args_spell_the_cli_flags() {
        let r = find("scalar-rel-dp").unwrap();
        assert_eq!(
            r.example_args(),
            [
                "--epsilon",
                "2",
                "--r-max",
                "4",
                "--a",
                "0.1",
                "--kappa",
                "2"
            ]
        );
        assert!(
            !find("mvu")
                .unwrap()
                .example_args()
                .contains(&"--design".into())
        );
    }
}
