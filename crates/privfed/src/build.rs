//! Mechanism options shared by `describe` and `dme`; construction is
//! [`privfed_sim::mechanism::MechanismSpec::build`].

use anyhow::Result;
use clap::Args;
use privfed_mechanisms::AnyRandomizer;
use privfed_sim::mechanism::{MechanismKind, MechanismSpec, NormBall, Parameterization};

/// Options that select and parameterize a mechanism.
#[derive(Debug, Clone, Args)]
pub struct MechanismArgs {
    /// The mechanism.
    #[arg(value_enum)]
    pub mechanism: MechanismKind,
    /// Privacy parameter ε (natural log); for `separated`, the total. Required except for
    /// `skellam`, where it is an optional target (with --delta) instead of --noise-stddev.
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
    /// Dimension (vector mechanisms; scalar mechanisms have dimension 1).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Parameter choice for privunit2 / privunitg.
    #[arg(long, value_enum, default_value = "optimized")]
    pub parameterization: Parameterization,
    /// Budget split ε₀ for the cap probability (privunit2 with --parameterization paper000).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon0: Option<f64>,
    /// δ for the Gaussian mechanism.
    #[arg(long, allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// Domain of the Laplace / Gaussian baselines.
    #[arg(long, value_enum, default_value = "l2")]
    pub norm: NormBall,
    /// Radius of the Laplace / Gaussian domain.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub radius: f64,
    /// Upper end of the magnitude range (scalar-dp, scalar-rel-dp, separated).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub r_max: f64,
    /// Grid size k (scalar-dp: k+1 points); default: the k minimizing worst-case variance.
    /// For skellam: the aggregate standard deviations the modular range holds (default 4).
    #[arg(long)]
    pub k: Option<usize>,
    /// First positive grid point a (scalar-rel-dp).
    #[arg(long, allow_negative_numbers = true)]
    pub a: Option<f64>,
    /// Geometric growth κ of the grid (scalar-rel-dp).
    #[arg(long, allow_negative_numbers = true)]
    pub kappa: Option<f64>,
    /// Output bits (grr: 2^bits grid points; skellam: the modulus 2^bits of secure aggregation).
    #[arg(long, default_value_t = 3)]
    pub bits: u32,
    /// Lower end of the grr input range.
    #[arg(long, default_value_t = -1.0, allow_negative_numbers = true)]
    pub lo: f64,
    /// Upper end of the grr input range.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub hi: f64,
    /// MVU: input bits b_in (default: --bits).
    #[arg(long)]
    pub input_bits: Option<u32>,
    /// MVU: output bits b_out (default: --bits).
    #[arg(long)]
    pub output_bits: Option<u32>,
    /// MVU: load the design from this JSON file (written by `privfed mvu design --out`)
    /// instead of designing; its exact ε must not exceed --epsilon.
    #[arg(long)]
    pub design: Option<std::path::PathBuf>,
    /// Magnitude budget ε₂ of `separated` (the direction gets ε − ε₂); default ε/10 capped at 1.
    #[arg(long, allow_negative_numbers = true)]
    pub magnitude_epsilon: Option<f64>,
}

/// The options of the distributed mechanisms (`skellam`; `gaussian` with --clip is paper 001's
/// continuous-Gaussian baseline).
#[derive(Debug, Clone, Args)]
pub struct DistributedArgs {
    /// ℓ2 clip norm c of each client's vector (distributed mechanisms).
    #[arg(long, allow_negative_numbers = true)]
    pub clip: Option<f64>,
    /// Local (per-client) noise standard deviation σ in unscaled units (skellam, instead of an
    /// --epsilon target); the central standard deviation is σ·√clients.
    #[arg(long, allow_negative_numbers = true)]
    pub noise_stddev: Option<f64>,
    /// Conditional-rounding parameter β ∈ [0, 1) (skellam; 0: plain stochastic rounding).
    #[arg(long, default_value_t = (-0.5f64).exp(), allow_negative_numbers = true)]
    pub beta: f64,
    /// Poisson sampling rate of the clients per round (skellam accounting).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub sampling_rate: f64,
    /// Rounds composed in the ε report (skellam accounting).
    #[arg(long, default_value_t = 1)]
    pub rounds: u64,
    /// Fraction γ ∈ [0, 1) of the clients that may collude with the server (skellam, ddg): the
    /// noise and ε count only the honest lower bound, clients − ⌈γ·clients⌉. Default 0. With
    /// `dme --secagg` in the active threat model the round's thresholds are sized for the same
    /// γ (default there 0.1); a γ the cohort cannot be sized for is refused.
    #[arg(long, allow_negative_numbers = true)]
    pub colluding_fraction: Option<f64>,
}

impl MechanismArgs {
    /// The distributed-DP plan request these options describe (`clients`: the cohort).
    pub fn plan_request(
        &self,
        d: &DistributedArgs,
        clients: usize,
    ) -> Result<privfed_distributed::PlanRequest> {
        use anyhow::bail;
        use privfed_distributed::{NoiseTarget, PlanRequest};
        let Some(clip) = d.clip else {
            bail!("--clip is required for the distributed mechanisms");
        };
        let Some(dim) = self.dim else {
            bail!("--dim is required for the distributed mechanisms");
        };
        let noise = match (self.epsilon, d.noise_stddev) {
            (Some(e), None) => {
                if self.delta.is_none() {
                    bail!("--epsilon as a target needs --delta");
                }
                NoiseTarget::Epsilon(e)
            }
            (None, Some(s)) => NoiseTarget::LocalStddev(s),
            (Some(_), Some(_)) => {
                bail!("give either --epsilon (a target) or --noise-stddev, not both")
            }
            (None, None) => bail!("give --epsilon with --delta (a target) or --noise-stddev"),
        };
        Ok(PlanRequest {
            dim,
            clip,
            bits: self.bits,
            clients,
            max_contributors: None,
            k: self.k.map_or(4.0, |k| k as f64),
            beta: d.beta,
            noise,
            delta: self.delta,
            sampling_rate: d.sampling_rate,
            rounds: d.rounds,
            share: Default::default(),
            colluding_fraction: d.colluding_fraction.unwrap_or(0.0),
        })
    }

    /// The options as a library spec.
    pub fn spec(&self) -> Result<MechanismSpec> {
        let Some(epsilon) = self.epsilon else {
            anyhow::bail!("--epsilon is required for {}", self.mechanism.name());
        };
        Ok(MechanismSpec {
            kind: self.mechanism,
            epsilon,
            dim: self.dim,
            parameterization: self.parameterization,
            epsilon0: self.epsilon0,
            delta: self.delta,
            norm: self.norm,
            radius: self.radius,
            r_max: self.r_max,
            k: self.k,
            a: self.a,
            kappa: self.kappa,
            bits: self.bits,
            lo: self.lo,
            hi: self.hi,
            input_bits: self.input_bits,
            output_bits: self.output_bits,
            design: self.design.clone(),
            magnitude_epsilon: self.magnitude_epsilon,
        })
    }
}

/// Builds the mechanism the options describe, with every parameter validated by the library.
pub fn build(args: &MechanismArgs) -> Result<AnyRandomizer> {
    Ok(args.spec()?.build()?)
}

/// The checks that keep the CLI and the simulator in step with the randomizer table
/// (`privfed_mechanisms::spec::RANDOMIZERS`): every row parses through the real command line
/// (`privfed describe NAME --param value …`, every parameter an option of that name) and builds,
/// through the simulator's `MechanismSpec`, the row's `AnyRandomizer` variant; and every local
/// mechanism the command line offers has a row.
#[cfg(test)]
fn check_table(rows: &[privfed_mechanisms::spec::RandomizerSpec]) -> Vec<String> {
    use clap::{CommandFactory, Parser, ValueEnum};
    use privfed_mechanisms::LocalRandomizer;
    use privfed_sim::mechanism::MechanismKind;
    let mut errors = Vec::new();
    let cli = crate::Cli::command();
    let describe = cli
        .find_subcommand("describe")
        .expect("describe subcommand");
    let flags: Vec<String> = describe
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    for row in rows {
        for param in row.params {
            if !flags.contains(&param.cli_flag()) {
                errors.push(format!("{}: no option {}", row.name, param.cli_flag()));
            }
        }
        let argv = ["privfed", "describe", row.name]
            .into_iter()
            .map(String::from)
            .chain(row.example_args());
        let parsed = match crate::Cli::try_parse_from(argv) {
            Ok(c) => c,
            Err(e) => {
                errors.push(format!("{}: the command line rejects it: {e}", row.name));
                continue;
            }
        };
        let crate::Command::Describe(args) = parsed.command else {
            unreachable!("parsed as describe")
        };
        match build(&args.mech) {
            Ok(m) if m.variant_name() == row.variant => {
                if m.guarantee().epsilon() > args.mech.epsilon.unwrap_or(0.0) * (1.0 + 1e-9) {
                    errors.push(format!("{}: built above its ε", row.name));
                }
            }
            Ok(m) => errors.push(format!(
                "{}: builds {} instead of {}",
                row.name,
                m.variant_name(),
                row.variant
            )),
            Err(e) => errors.push(format!("{}: does not build: {e:#}", row.name)),
        }
    }
    // The distributed mechanisms are planned by privfed-distributed, and the vector MVU is
    // built by MechanismSpec::build_mvu_vector: none is a row of the local randomizer table.
    for kind in MechanismKind::value_variants() {
        if matches!(
            kind,
            MechanismKind::Skellam | MechanismKind::Ddg | MechanismKind::MvuVector
        ) {
            continue;
        }
        if !rows.iter().any(|r| r.name == kind.name()) {
            errors.push(format!(
                "{}: offered by the command line, no row",
                kind.name()
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::check_table;
    use privfed_mechanisms::spec::{Param, RANDOMIZERS, RandomizerSpec};

    #[test]
    fn every_table_row_parses_and_builds_through_the_cli() {
        assert_eq!(check_table(RANDOMIZERS), Vec::<String>::new());
    }

    /// The check catches the two ways a randomizer is added in one place only: a row the
    /// command line cannot parse or build, and a mechanism the command line offers without a
    /// row. (The Python side is checked by python/tests/test_mechanisms.py.)
    #[test]
    fn the_table_check_fails_when_a_randomizer_is_in_one_place_only() {
        const NEW: RandomizerSpec = RandomizerSpec {
            name: "new-rr",
            python_class: "NewRR",
            variant: "GridRr",
            params: &[Param {
                name: "epsilon",
                example: Some("1"),
            }],
        };
        let mut rows = RANDOMIZERS.to_vec();
        rows.push(NEW);
        let errors = check_table(&rows);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("new-rr: the command line rejects it"));

        let without_laplace: Vec<_> = RANDOMIZERS
            .iter()
            .filter(|r| r.name != "laplace")
            .copied()
            .collect();
        assert_eq!(
            check_table(&without_laplace),
            ["laplace: offered by the command line, no row"]
        );

        let mut wrong_variant = RANDOMIZERS.to_vec();
        wrong_variant[0].variant = "Mvu";
        assert_eq!(
            check_table(&wrong_variant),
            ["privunit2: builds PrivUnit2 instead of Mvu"]
        );

        let mut unknown_option = RANDOMIZERS.to_vec();
        unknown_option[1].params = &[
            Param {
                name: "epsilon",
                example: Some("4"),
            },
            Param {
                name: "width",
                example: None,
            },
        ];
        let errors = check_table(&unknown_option);
        assert!(
            errors.contains(&"privunitg: no option --width".to_string()),
            "{errors:?}"
        );
    }
}
