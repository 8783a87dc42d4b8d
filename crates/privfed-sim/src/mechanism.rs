//! Mechanism construction from options: a [`MechanismSpec`] (the mechanism options of
//! `privfed describe` / `privfed dme`, as plain data) becomes a validated [`AnyRandomizer`].
//!
//! This lives here rather than in `privfed-mechanisms` because the MVU mechanism is designed by
//! `privfed-compression` (a layer above the mechanisms) or loaded from a design file (I/O); every
//! parameter is still validated by the mechanism's own constructor. Error messages name the
//! command-line options the spec's fields mirror (`--dim`, `--epsilon0`, …).

use privfed_compression::designer::{DesignOptions, DesignReport, design_mvu};
use privfed_mechanisms::bitwise_rr::BitwiseRr;
use privfed_mechanisms::gaussian::Gaussian;
use privfed_mechanisms::grid_rr::GridRr;
use privfed_mechanisms::laplace::Laplace;
use privfed_mechanisms::mvu::{DpConstraint, Mvu, MvuDesign, MvuVector};
use privfed_mechanisms::privunit_inf::PrivUnitInf;
use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::separated::Separated;
use privfed_mechanisms::{AnyRandomizer, Domain, MechanismError};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Why a mechanism could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A missing, conflicting or out-of-range option (the message names it).
    #[error("{0}")]
    Options(String),
    /// The mechanism's constructor rejected its parameters.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// The MVU designer failed.
    #[error("designing the MVU mechanism")]
    Design(#[source] MechanismError),
    /// A design file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A design file is not a valid MVU design.
    #[error("invalid MVU design in {}", path.display())]
    InvalidDesign {
        /// The file.
        path: PathBuf,
        /// The parse or validation error.
        #[source]
        source: serde_json::Error,
    },
}

fn options<T>(msg: impl Into<String>) -> Result<T, BuildError> {
    Err(BuildError::Options(msg.into()))
}

/// The mechanisms that can be built from options (the CLI's stable names: [`Self::name`]).
///
/// With the `clap` feature these enums are the command line's value enums (the doc comments
/// are its help text, hence written in plain text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum MechanismKind {
    /// PrivUnit2: spherical caps, unit vectors (papers 000, 002).
    Privunit2,
    /// PrivUnitG: Gaussian PrivUnit, unit vectors (paper 002).
    Privunitg,
    /// PrivUnitInf: hypercube caps, vectors in [-1,1]^d (paper 000).
    PrivunitInf,
    /// ScalarDP: randomized response on a uniform grid over [0, r_max] (paper 000).
    ScalarDp,
    /// ScalarRelDP: randomized response on a geometric grid over [0, r_max] (paper 000).
    ScalarRelDp,
    /// Unbiased generalized randomized response on 2^bits points over [lo, hi] (paper 004).
    Grr,
    /// Separated direction (PrivUnit2) × magnitude (ScalarDP), vectors in the l2 ball (paper 000).
    Separated,
    /// Laplace noise calibrated to the l1 diameter of the domain.
    Laplace,
    /// Gaussian noise, analytic calibration to (ε, δ) on the l2 diameter of the domain.
    Gaussian,
    /// Unbiased bitwise randomized response on --bits bits over [lo, hi] (paper 004).
    BitwiseRr,
    /// The MVU mechanism over [lo, hi] (paper 004): designed for --input-bits/--output-bits
    /// (default --bits) and --epsilon, or loaded from --design FILE.
    Mvu,
    /// The vector MVU mechanism of paper 004 Lemma 6 on the lp ball of radius --radius in --dim
    /// dimensions: conditional dithering, then a metric-DP design per coordinate; --epsilon is
    /// the vector's epsilon-LDP (audit only: privfed audit mvu-vector).
    MvuVector,
    /// Distributed DP with Skellam noise (paper 001): clients quantize to --bits with --clip and
    /// add Skellam shares; secure aggregation sums mod 2^bits (describe: the planner; dme: the
    /// whole pipeline).
    Skellam,
    /// The distributed discrete Gaussian (DDG), paper 001's baseline: the Skellam pipeline with
    /// discrete-Gaussian shares, accounted by Kairouz et al. 2021's bound.
    Ddg,
}

impl MechanismKind {
    /// The stable name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Self::Privunit2 => "privunit2",
            Self::Privunitg => "privunitg",
            Self::PrivunitInf => "privunit-inf",
            Self::ScalarDp => "scalar-dp",
            Self::ScalarRelDp => "scalar-rel-dp",
            Self::Grr => "grr",
            Self::Separated => "separated",
            Self::Laplace => "laplace",
            Self::Gaussian => "gaussian",
            Self::BitwiseRr => "bitwise-rr",
            Self::Mvu => "mvu",
            Self::MvuVector => "mvu-vector",
            Self::Skellam => "skellam",
            Self::Ddg => "ddg",
        }
    }
}

/// How PrivUnit2 / PrivUnitG parameters are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Parameterization {
    /// Exact ε, variance-optimal parameters (default).
    #[default]
    Optimized,
    /// Paper 000's sufficient conditions (16a/16b) with the split --epsilon0 (privunit2).
    Paper000,
    /// The dimension-free threshold of paper 002 (privunitg).
    DimensionFree,
}

/// Input domain for the Laplace and Gaussian baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum NormBall {
    /// Unit sphere.
    Sphere,
    /// l1 ball of radius --radius.
    L1,
    /// l2 ball of radius --radius.
    #[default]
    L2,
    /// l∞ ball (cube) of half-width --radius.
    Linf,
}

/// The options that select and parameterize a mechanism (defaults as on the command line).
#[derive(Debug, Clone, PartialEq)]
pub struct MechanismSpec {
    /// The mechanism.
    pub kind: MechanismKind,
    /// Privacy parameter ε (natural log); for `separated`, the total.
    pub epsilon: f64,
    /// Dimension (vector mechanisms; scalar mechanisms have dimension 1).
    pub dim: Option<usize>,
    /// Parameter choice for PrivUnit2 / PrivUnitG.
    pub parameterization: Parameterization,
    /// Budget split ε₀ for the cap probability (PrivUnit2, [`Parameterization::Paper000`]).
    pub epsilon0: Option<f64>,
    /// δ of the Gaussian mechanism.
    pub delta: Option<f64>,
    /// Domain of the Laplace / Gaussian baselines.
    pub norm: NormBall,
    /// Radius of the Laplace / Gaussian domain.
    pub radius: f64,
    /// Upper end of the magnitude range (scalar-dp, scalar-rel-dp, separated).
    pub r_max: f64,
    /// Grid size k (scalar-dp: k+1 points); `None`: the k minimizing worst-case variance.
    pub k: Option<usize>,
    /// First positive grid point a (scalar-rel-dp).
    pub a: Option<f64>,
    /// Geometric growth κ of the grid (scalar-rel-dp).
    pub kappa: Option<f64>,
    /// Output bits (grr: `2^bits` grid points; bitwise-rr; MVU default).
    pub bits: u32,
    /// Lower end of the scalar input range (grr, bitwise-rr, mvu).
    pub lo: f64,
    /// Upper end of the scalar input range.
    pub hi: f64,
    /// MVU: input bits `b_in` (default: `bits`).
    pub input_bits: Option<u32>,
    /// MVU: output bits `b_out` (default: `bits`).
    pub output_bits: Option<u32>,
    /// MVU: load the design from this JSON file instead of designing; its exact ε must not
    /// exceed `epsilon`.
    pub design: Option<PathBuf>,
    /// Magnitude budget ε₂ of `separated` (the direction gets ε − ε₂); default ε/10 capped at 1.
    pub magnitude_epsilon: Option<f64>,
}

impl MechanismSpec {
    /// The spec of `kind` at `epsilon` with every other option at its command-line default.
    pub fn new(kind: MechanismKind, epsilon: f64) -> Self {
        Self {
            kind,
            epsilon,
            dim: None,
            parameterization: Parameterization::Optimized,
            epsilon0: None,
            delta: None,
            norm: NormBall::L2,
            radius: 1.0,
            r_max: 1.0,
            k: None,
            a: None,
            kappa: None,
            bits: 3,
            lo: -1.0,
            hi: 1.0,
            input_bits: None,
            output_bits: None,
            design: None,
            magnitude_epsilon: None,
        }
    }

    fn vector_dim(&self) -> Result<usize, BuildError> {
        match self.dim {
            Some(d) => Ok(d),
            None => options(format!("--dim is required for {}", self.kind.name())),
        }
    }

    fn scalar_dim(&self) -> Result<(), BuildError> {
        match self.dim {
            None | Some(1) => Ok(()),
            Some(d) => options(format!(
                "this mechanism is scalar: --dim must be 1 (got {d})"
            )),
        }
    }

    /// The input domain of the Laplace / Gaussian baselines.
    fn baseline_domain(&self) -> Result<Domain, BuildError> {
        let dim = self.dim.unwrap_or(1);
        if dim == 0 {
            return options("--dim must be at least 1");
        }
        let radius = self.radius;
        if !(radius.is_finite() && radius > 0.0) {
            return options(format!("--radius must be finite and > 0 (got {radius})"));
        }
        Ok(match self.norm {
            NormBall::Sphere => Domain::UnitSphere { dim },
            NormBall::L1 => Domain::L1Ball { dim, radius },
            NormBall::L2 => Domain::L2Ball { dim, radius },
            NormBall::Linf => Domain::LInfBall { dim, radius },
        })
    }

    /// Builds the mechanism, with every parameter validated by its constructor.
    pub fn build(&self) -> Result<AnyRandomizer, BuildError> {
        use MechanismKind as K;
        let eps = self.epsilon;
        Ok(match self.kind {
            K::Privunit2 => {
                let d = self.vector_dim()?;
                match self.parameterization {
                    Parameterization::Optimized => PrivUnit2::optimized(eps, d)?.into(),
                    Parameterization::Paper000 => {
                        let Some(e0) = self.epsilon0 else {
                            return options(
                                "--parameterization paper000 needs --epsilon0 (the budget for the cap probability)",
                            );
                        };
                        PrivUnit2::paper000(eps, e0, d)?.into()
                    }
                    Parameterization::DimensionFree => {
                        return options(
                            "--parameterization dimension-free applies to privunitg only",
                        );
                    }
                }
            }
            K::Privunitg => {
                let d = self.vector_dim()?;
                match self.parameterization {
                    Parameterization::Optimized => PrivUnitG::optimized(eps, d)?.into(),
                    Parameterization::DimensionFree => PrivUnitG::dimension_free(eps, d)?.into(),
                    Parameterization::Paper000 => {
                        return options("--parameterization paper000 applies to privunit2 only");
                    }
                }
            }
            K::PrivunitInf => PrivUnitInf::optimized(eps, self.vector_dim()?)?.into(),
            K::ScalarDp => {
                self.scalar_dim()?;
                match self.k {
                    Some(k) => GridRr::scalar_dp_with_k(eps, self.r_max, k)?.into(),
                    None => GridRr::scalar_dp(eps, self.r_max)?.into(),
                }
            }
            K::ScalarRelDp => {
                self.scalar_dim()?;
                let (Some(a), Some(kappa)) = (self.a, self.kappa) else {
                    return options(
                        "scalar-rel-dp needs --a (first positive grid point) and --kappa (geometric growth)",
                    );
                };
                GridRr::scalar_rel_dp(eps, self.r_max, a, kappa)?.into()
            }
            K::Grr => {
                self.scalar_dim()?;
                GridRr::unbiased_grr(eps, self.bits, self.lo, self.hi)?.into()
            }
            K::Separated => {
                let d = self.vector_dim()?;
                let e2 = self.magnitude_epsilon.unwrap_or((eps / 10.0).min(1.0));
                if !(e2 > 0.0 && e2 < eps) {
                    return options(format!(
                        "--magnitude-epsilon must lie in (0, --epsilon) = (0, {eps}); got {e2}"
                    ));
                }
                Separated::new(eps - e2, e2, d, self.r_max)?.into()
            }
            K::BitwiseRr => {
                self.scalar_dim()?;
                BitwiseRr::new(eps, self.bits, self.lo, self.hi)?.into()
            }
            K::Mvu => {
                self.scalar_dim()?;
                self.build_mvu()?.into()
            }
            K::MvuVector => {
                return options(
                    "mvu-vector is the vector MVU mechanism, not a local randomizer of the table: \
                     `privfed audit mvu-vector` audits it (MechanismSpec::build_mvu_vector); \
                     describe and dme take the scalar mvu",
                );
            }
            K::Skellam | K::Ddg => {
                return options(
                    "skellam is a distributed mechanism, not a local randomizer: it is planned and run by privfed_distributed",
                );
            }
            K::Laplace => Laplace::new(eps, self.baseline_domain()?)?.into(),
            K::Gaussian => {
                let Some(delta) = self.delta else {
                    return options("gaussian needs --delta");
                };
                Gaussian::new(eps, delta, self.baseline_domain()?)?.into()
            }
        })
    }

    /// The scalar MVU mechanism on `[lo, hi]`: from the design file `design` (its exact ε must
    /// not exceed `epsilon`) or designed for `input_bits`/`output_bits` (default `bits`) at
    /// `epsilon` (ε-LDP, default designer options).
    pub fn build_mvu(&self) -> Result<Mvu, BuildError> {
        let design = match &self.design {
            Some(path) => {
                let d = load_design(path)?;
                let e = d.ldp_epsilon();
                if e.is_nan() || e > self.epsilon {
                    return options(format!(
                        "the design in {} is {e}-LDP, more than --epsilon {}",
                        path.display(),
                        self.epsilon
                    ));
                }
                d
            }
            None => {
                let bi = self.input_bits.unwrap_or(self.bits);
                let bo = self.output_bits.unwrap_or(self.bits);
                design_mvu_timed(
                    bi,
                    bo,
                    self.epsilon,
                    DpConstraint::Ldp,
                    &DesignOptions::default(),
                )?
                .0
                .design
            }
        };
        Ok(Mvu::new(design, self.lo, self.hi)?)
    }

    /// The vector MVU mechanism ([`MvuVector`], paper 004 §4.2 Lemma 6) on the `ℓp` ball of
    /// radius `radius` in `dim` dimensions (`p = metric_power`, 1 or 2), whose ε-LDP
    /// `ε_metric·(R/r)^p` is at most `epsilon`: the dithered vectors are bounded by
    /// `R = dither_bound` (default [`default_dither_bound`]), and every coordinate goes through a
    /// `p`-metric design from the design file `design` (its realized metric ε must keep the
    /// vector's ε at most `epsilon`) or designed for `input_bits`/`output_bits` (default `bits`)
    /// at the metric budget `epsilon·(r/R)^p`. At most [`MVU_VECTOR_MAX_DRAWS`] dithering draws
    /// per privatization.
    pub fn build_mvu_vector(
        &self,
        metric_power: u32,
        dither_bound: Option<f64>,
    ) -> Result<MvuVector, BuildError> {
        if !(metric_power == 1 || metric_power == 2) {
            return options(format!(
                "the metric power must be 1 or 2 (l1 or l2), got {metric_power}"
            ));
        }
        let dim = self.vector_dim()?;
        if dim == 0 {
            return options("--dim must be at least 1");
        }
        let r = self.radius;
        if !(r.is_finite() && r > 0.0) {
            return options(format!("--radius must be finite and > 0 (got {r})"));
        }
        let eps = self.epsilon;
        if !(eps.is_finite() && eps > 0.0) {
            return options(format!("--epsilon must be finite and > 0 (got {eps})"));
        }
        let constraint = DpConstraint::Metric {
            power: metric_power,
        };
        let design = match &self.design {
            Some(path) => {
                let d = load_design(path)?;
                if d.constraint() != constraint {
                    return options(format!(
                        "the design in {} is {:?}; mvu-vector with this metric needs {constraint:?}",
                        path.display(),
                        d.constraint()
                    ));
                }
                d
            }
            None => {
                let bi = self.input_bits.unwrap_or(self.bits);
                let bo = self.output_bits.unwrap_or(self.bits);
                let bound = match dither_bound {
                    Some(b) => b,
                    None => default_dither_bound(metric_power, dim, bi, r)?,
                };
                if !(bound.is_finite() && bound >= r) {
                    return options(format!(
                        "--dither-bound must be finite and at least --radius {r} (got {bound})"
                    ));
                }
                let budget = eps * (r / bound).powi(metric_power as i32);
                design_mvu_timed(bi, bo, budget, constraint, &DesignOptions::default())?
                    .0
                    .design
            }
        };
        let bound = match dither_bound {
            Some(b) => b,
            None => default_dither_bound(metric_power, dim, design.input_bits(), r)?,
        };
        let m = MvuVector::new(design, dim, r, bound, MVU_VECTOR_MAX_DRAWS)?;
        if m.epsilon() > eps * (1.0 + 1e-9) {
            let what = match &self.design {
                Some(path) => format!("the design in {}", path.display()),
                None => "the designed mechanism".to_string(),
            };
            return options(format!(
                "{what} gives the vector epsilon {} (Lemma 6: metric epsilon {} times (R/r)^p), \
                 more than --epsilon {eps}",
                m.epsilon(),
                m.scalar().metric_epsilon()
            ));
        }
        Ok(m)
    }
}

/// Most dithering draws per privatization of the vector MVU mechanism built from options
/// ([`MechanismSpec::build_mvu_vector`]; the rejection sampler of conditional dithering errs
/// beyond it).
pub const MVU_VECTOR_MAX_DRAWS: usize = 100_000;

/// The default bound `R` on the dithered vector's `ℓp` norm for inputs in the ball of radius
/// `r` in `dim` dimensions, dithered to the `2^input_bits`-level grid on `[−r, r]` (spacing
/// `h = 2r/(2^input_bits − 1)`): paper 004 App. B.3's choice, which bounds the expected
/// dithered norm whatever the input — `ℓ1`: `r + dim·h/2` (the cell around 0 adds at most
/// `h/2` per coordinate); `ℓ2`: `√(r² + dim·h²/2)` (twice the expected growth of `‖·‖²`).
pub fn default_dither_bound(
    metric_power: u32,
    dim: usize,
    input_bits: u32,
    r: f64,
) -> Result<f64, BuildError> {
    if !(1..=privfed_mechanisms::mvu::MAX_DESIGN_BITS).contains(&input_bits) {
        return options(format!(
            "input bits must be in 1..={} (got {input_bits})",
            privfed_mechanisms::mvu::MAX_DESIGN_BITS
        ));
    }
    let h = 2.0 * r / f64::from((1u32 << input_bits) - 1);
    let d = dim as f64;
    Ok(if metric_power == 1 {
        r + d * h / 2.0
    } else {
        (r * r + d * h * h / 2.0).sqrt()
    })
}

/// Reads an MVU design file (JSON, as written by `privfed mvu design --out`); the design is
/// validated by its deserializer.
pub fn load_design(path: &Path) -> Result<MvuDesign, BuildError> {
    let s = std::fs::read_to_string(path).map_err(|source| BuildError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&s).map_err(|source| BuildError::InvalidDesign {
        path: path.to_owned(),
        source,
    })
}

/// Runs the MVU designer ([`design_mvu`], paper 004 §3.4) and returns its report with the
/// seconds it took. Zero output bits is refused up front: an unbiased mechanism needs at least
/// two letters.
pub fn design_mvu_timed(
    input_bits: u32,
    output_bits: u32,
    epsilon: f64,
    constraint: DpConstraint,
    options: &DesignOptions,
) -> Result<(DesignReport, f64), BuildError> {
    if output_bits == 0 {
        return self::options(
            "infeasible: an unbiased mechanism needs at least 1 output bit (2 letters) to \
             distinguish the inputs; got --output-bits 0",
        );
    }
    let t = Instant::now();
    let r = design_mvu(input_bits, output_bits, epsilon, constraint, options)
        .map_err(BuildError::Design)?;
    Ok((r, t.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::LocalRandomizer;

    #[test]
    fn builds_each_kind_with_its_exact_epsilon() {
        let mut s = MechanismSpec::new(MechanismKind::Privunit2, 4.0);
        s.dim = Some(16);
        let m = s.build().unwrap();
        assert_eq!(m.name(), "privunit2");
        assert!((m.guarantee().epsilon() - 4.0).abs() < 1e-9);
        let g = MechanismSpec::new(MechanismKind::Grr, 2.0).build().unwrap();
        assert_eq!((g.name(), g.dim()), ("grr", 1));
        let mut gauss = MechanismSpec::new(MechanismKind::Gaussian, 1.0);
        gauss.delta = Some(1e-5);
        gauss.dim = Some(3);
        assert_eq!(gauss.build().unwrap().guarantee().delta(), 1e-5);
    }

    #[test]
    fn missing_or_conflicting_options_are_errors() {
        let err = |s: MechanismSpec| s.build().unwrap_err().to_string();
        assert_eq!(
            err(MechanismSpec::new(MechanismKind::PrivunitInf, 1.0)),
            "--dim is required for privunit-inf"
        );
        let mut s = MechanismSpec::new(MechanismKind::Grr, 1.0);
        s.dim = Some(2);
        assert!(err(s).contains("scalar"));
        assert!(err(MechanismSpec::new(MechanismKind::Gaussian, 1.0)).contains("--delta"));
        let mut s = MechanismSpec::new(MechanismKind::Separated, 1.0);
        s.dim = Some(3);
        s.magnitude_epsilon = Some(1.0);
        assert!(err(s).contains("--magnitude-epsilon"));
        let mut s = MechanismSpec::new(MechanismKind::Laplace, 1.0);
        s.radius = f64::NAN;
        assert!(err(s).contains("--radius"));
        assert!(design_mvu_timed(2, 0, 1.0, DpConstraint::Ldp, &DesignOptions::default()).is_err());
    }

    /// The stable names are the command line's value names.
    #[cfg(feature = "clap")]
    #[test]
    fn names_are_the_clap_value_names() {
        use clap::ValueEnum;
        for k in MechanismKind::value_variants() {
            assert_eq!(k.to_possible_value().unwrap().get_name(), k.name());
        }
    }

    /// A design file round-trips; one whose exact ε exceeds the budget is refused.
    #[test]
    fn mvu_from_a_design_file() {
        let (r, _) =
            design_mvu_timed(2, 2, 1.0, DpConstraint::Ldp, &DesignOptions::default()).unwrap();
        let path =
            std::env::temp_dir().join(format!("privfed-sim-design-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::to_string(&r.design).unwrap()).unwrap();
        let mut s = MechanismSpec::new(MechanismKind::Mvu, 1.0);
        s.design = Some(path.clone());
        let m = s.build().unwrap();
        assert_eq!(m.name(), "mvu");
        assert!(m.guarantee().epsilon() <= 1.0 + 1e-12);
        s.epsilon = 0.5;
        assert!(
            s.build()
                .unwrap_err()
                .to_string()
                .contains("more than --epsilon")
        );
        std::fs::write(&path, "{}").unwrap();
        assert!(matches!(
            load_design(&path),
            Err(BuildError::InvalidDesign { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(load_design(&path), Err(BuildError::Read { .. })));
    }

    /// The vector MVU from options: its Lemma 6 ε is at most the target and is the realized
    /// metric ε times `(R/r)^p`; the default `R` is paper 004's bound (ℓ1: `r + d·h/2`, ℓ2:
    /// `√(r² + d·h²/2)`, `h = 2r/(2^b − 1)`), independently computed here; a design file of the
    /// other metric, an `R` below the radius, and the table's `build` are refused.
    #[test]
    fn mvu_vector_from_options() {
        let mut s = MechanismSpec::new(MechanismKind::MvuVector, 2.0);
        s.dim = Some(3);
        s.bits = 2;
        s.radius = 2.0;
        let h = 2.0 * 2.0 / 3.0;
        for (p, want) in [
            (1, 2.0 + 3.0 * h / 2.0),
            (2, (4.0 + 3.0 * h * h / 2.0_f64).sqrt()),
        ] {
            let m = s.build_mvu_vector(p, None).unwrap();
            assert!((m.dither_bound() - want).abs() < 1e-12, "{p}");
            assert!(m.epsilon() <= 2.0 * (1.0 + 1e-9));
            let ratio = (want / 2.0_f64).powi(p as i32);
            assert!((m.epsilon() - m.scalar().metric_epsilon() * ratio).abs() < 1e-12);
        }
        let m = s.build_mvu_vector(1, Some(2.5)).unwrap();
        assert_eq!(m.dither_bound(), 2.5);
        assert!(
            s.build_mvu_vector(1, Some(1.0))
                .unwrap_err()
                .to_string()
                .contains("--dither-bound")
        );
        assert!(s.build_mvu_vector(3, None).is_err());
        assert!(s.build().unwrap_err().to_string().contains("privfed audit"));
        let (r, _) =
            design_mvu_timed(2, 2, 1.0, DpConstraint::Ldp, &DesignOptions::default()).unwrap();
        let path = std::env::temp_dir().join(format!(
            "privfed-sim-vector-design-{}.json",
            std::process::id()
        ));
        std::fs::write(&path, serde_json::to_string(&r.design).unwrap()).unwrap();
        s.design = Some(path.clone());
        let err = s.build_mvu_vector(1, None).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("Metric"), "{err}");
    }
}
