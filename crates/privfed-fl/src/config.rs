//! The training configuration (`privfed fl train --config FILE`), as serde types with every
//! default stated and every field checked before a round runs.
//!
//! ```toml
//! rounds = 50
//! seed = 7                      # or 64 hex digits; omitted: drawn from the OS and recorded
//!
//! [model]
//! kind = "softmax"              # privfed_learn::nn::ModelSpec
//! features = 784
//! classes = 10
//!
//! [sampling]
//! kind = "poisson"              # or kind = "fixed", cohort = 50
//! rate = 0.05
//!
//! [local]                       # each sampled client's training
//! epochs = 1
//! batch_size = 10
//! learning_rate = 0.05
//!
//! [privacy]
//! mechanism = "central_gaussian"   # none | central_gaussian | separated | privunitg | mvu | distributed
//! clip = 1.0
//! noise_multiplier = 1.0           # or epsilon = 8.0: the noise is calibrated for the run
//!
//! [server]
//! kind = "sgd"                  # or "adam"
//! learning_rate = 1.0
//! momentum = 0.9
//!
//! [accounting]
//! delta = 1e-5
//! accountant = "rdp"            # or "pld"
//! budget = 8.0                  # optional: stop before ε(δ) would exceed it
//! # fixed_cohort = "without_replacement"   # fixed cohorts: replace-one amplification (RDP)
//!
//! [eval]
//! every = 5                     # evaluate on the test set every 5 rounds and at the end
//!
//! [audit]                       # optional: canary clients and the empirical ε (docs/FEDERATED_LEARNING.md)
//! canaries = 100
//! ```

use privfed_accounting::NeighbouringRelation;
use privfed_accounting::calibrate::AccountantKind;
use privfed_distributed::{NoiseShare, NoiseTarget};
use privfed_learn::nn::ModelSpec;
use serde::{Deserialize, Serialize};

use super::FlError;

/// A 256-bit run seed: from the config (an integer, expanded as the experiments' `u64` seeds
/// are, or 64 hex digits), or drawn from the OS when absent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Seed(pub [u8; 32]);

impl std::fmt::Debug for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seed(..)")
    }
}

impl Seed {
    /// The seed of a `u64` (experiments): its 8 little-endian bytes then zeros.
    pub fn from_u64(v: u64) -> Self {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&v.to_le_bytes());
        Seed(b)
    }
    /// A fresh seed from the operating system's generator.
    pub fn from_os() -> Self {
        // rand's thread generator: ChaCha seeded from the OS, a CSPRNG.
        let mut b = [0u8; 32];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut b);
        Seed(b)
    }
    /// The 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// Parses 64 hex digits.
    ///
    /// # Errors
    /// Anything but 64 hex digits.
    pub fn from_hex(s: &str) -> Result<Self, FlError> {
        let s = s.trim_start_matches("0x");
        if s.len() != 64 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(FlError::Config(format!(
                "seed: expected an integer or 64 hex digits, got {s:?}"
            )));
        }
        let mut b = [0u8; 32];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
                .map_err(|_| FlError::Config(format!("seed: {s:?} is not hexadecimal")))?;
        }
        Ok(Seed(b))
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SeedRepr {
    Int(u64),
    Hex(String),
}

impl<'de> Deserialize<'de> for Seed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match SeedRepr::deserialize(d)? {
            SeedRepr::Int(v) => Ok(Seed::from_u64(v)),
            SeedRepr::Hex(s) => Seed::from_hex(&s).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Seed {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

/// How the clients of a round are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Sampling {
    /// Each client independently with probability `rate` (the sampling the accountants amplify).
    Poisson {
        /// q ∈ (0, 1].
        rate: f64,
    },
    /// `cohort` clients uniformly without replacement. Accounted **without** amplification by
    /// sampling (rate 1, add/remove-one neighbours) unless `accounting.fixed_cohort =
    /// "without_replacement"` ([`FixedCohortAccounting`]).
    Fixed {
        /// Clients per round (≤ the number of clients).
        cohort: usize,
    },
}

/// A sampled client's local training.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalTraining {
    /// Passes over the client's examples (≥ 1).
    pub epochs: u32,
    /// Minibatch size (≥ 1; the last batch of an epoch may be smaller).
    pub batch_size: usize,
    /// SGD step size η (> 0).
    pub learning_rate: f64,
    /// Proximal weight μ ≥ 0: each step follows `∇L + μ(θ − θ_global)`, the approximate
    /// proximal update of paper 000 eq. 11 (0: plain SGD).
    pub proximal: f64,
    /// Stop after this many steps (none: all epochs).
    pub max_steps: Option<usize>,
}

impl Default for LocalTraining {
    fn default() -> Self {
        Self {
            epochs: 1,
            batch_size: 10,
            learning_rate: 0.05,
            proximal: 0.0,
            max_steps: None,
        }
    }
}

/// Noise given directly or calibrated to a target ε for the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CentralLayer {
    /// ℓ2 clip (projection radius) of each contribution.
    pub clip: f64,
    /// z: noise standard deviation over the sensitivity.
    pub noise_multiplier: Option<f64>,
    /// Target ε at the run's δ after all rounds (z is calibrated).
    pub epsilon: Option<f64>,
}

/// How updates are privatized and aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "mechanism", rename_all = "snake_case", deny_unknown_fields)]
pub enum Privacy {
    /// FedAvg without privacy: the mean of the updates.
    #[default]
    None,
    /// DP-FedAvg: clip each update to `clip`, sum, add `N(0, (z·clip)²)` per coordinate, divide
    /// by the expected cohort (`privfed_mechanisms::central::CentralGaussian`).
    CentralGaussian {
        /// ℓ2 clip of each update.
        clip: f64,
        /// z.
        noise_multiplier: Option<f64>,
        /// Target ε (z calibrated).
        epsilon: Option<f64>,
    },
    /// Paper 000: each client sends its update through the separated mechanism (PrivUnit2
    /// direction at ε − ε₂, ScalarDP magnitude on `[0, clip]` at ε₂), and the server optionally
    /// adds the central projection + Gaussian layer.
    Separated {
        /// Local ε per report (direction + magnitude).
        epsilon: f64,
        /// ε₂ of the magnitude (default ε/10 capped at 1, as the CLI).
        magnitude_epsilon: Option<f64>,
        /// Paper 000's parameterization of the direction (its Table 1): cap probability
        /// `p = e^{ε₀}/(1+e^{ε₀})` with ε₀ given here, the rest of the direction's budget for the
        /// cap threshold. Absent: the optimized PrivUnit2 of paper 002.
        #[serde(default)]
        epsilon0: Option<f64>,
        /// ℓ2 clip of the update before privatization (ScalarDP's range).
        clip: f64,
        /// The central layer (paper 000 eq. 13).
        central: Option<CentralLayer>,
    },
    /// PrivUnitG (paper 002) on the update's direction; the report has norm `clip` (the
    /// magnitude is not sent). Optional central layer as for `separated`.
    Privunitg {
        /// Local ε per report.
        epsilon: f64,
        /// The norm reports are scaled to.
        clip: f64,
        /// The central layer.
        central: Option<CentralLayer>,
    },
    /// Paper 004's vector MVU mechanism (Lemma 6): the update clipped to the ℓ`power` ball of
    /// radius `clip`, conditionally dithered to `input_bits` levels per coordinate with ℓ`power`
    /// norm at most `dither_bound`, each coordinate sent as one of `2^output_bits` letters of a
    /// metric-DP design at `metric_epsilon` (designed at start-up). Each report is
    /// `metric_epsilon·(dither_bound/clip)^power`-LDP. Optional central layer as for `separated`.
    Mvu {
        /// ε of the scalar metric design.
        metric_epsilon: f64,
        /// Input bits `b_in` (grid of `2^b_in` levels per coordinate).
        input_bits: u32,
        /// Output bits `b_out`.
        output_bits: u32,
        /// `p` of the ℓp ball and the metric (1 or 2).
        power: u32,
        /// Radius of the ℓp ball the update is projected onto.
        clip: f64,
        /// Bound on the dithered vector's ℓp norm (≥ clip; default 1.25·clip).
        dither_bound: Option<f64>,
        /// The central layer.
        central: Option<CentralLayer>,
    },
    /// Paper 001: clip, scale, rotate, round, add a Skellam (or discrete-Gaussian) share, sum
    /// modulo `2^bits` (in process, or through the real secure-aggregation protocol), decode.
    Distributed {
        /// The noise share.
        #[serde(default)]
        share: NoiseShare,
        /// ℓ2 clip c.
        clip: f64,
        /// Bit width b.
        bits: u32,
        /// Conditional rounding β (default e^{−1/2}, paper 001).
        beta: Option<f64>,
        /// Aggregate standard deviations the modular range holds (default 4).
        k: Option<f64>,
        /// Local noise standard deviation σ (unscaled).
        noise_stddev: Option<f64>,
        /// Target ε for the run (σ calibrated by the planner).
        epsilon: Option<f64>,
        /// The fewest contributors the noise is planned for (default: the expected cohort
        /// after dropouts, rounded down).
        min_clients: Option<usize>,
        /// Sum through the real secure-aggregation protocol (`privfed-secagg`).
        #[serde(default)]
        secure_aggregation: bool,
        /// The rounds the clients of the secure sum agree to join (`[privacy.secagg_policy]`,
        /// the fields of [`privfed_secagg::ClientPolicy`]; absent: its defaults). A round it
        /// refuses stops the run with the rule's name. Needs `secure_aggregation`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secagg_policy: Option<privfed_secagg::ClientPolicy>,
        /// Probability that a sampled client drops out before sending.
        #[serde(default)]
        dropout: f64,
    },
}

/// The server's optimizer, applied to the aggregate as a pseudo-gradient `g = −Δ̄`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServerOptimizer {
    /// `v ← μv + g`, `θ ← θ − η v` (η = 1, μ = 0 is FedAvg).
    Sgd {
        /// η.
        #[serde(default = "one")]
        learning_rate: f64,
        /// μ ∈ [0, 1).
        #[serde(default)]
        momentum: f64,
    },
    /// Adam (Kingma & Ba) with bias correction.
    Adam {
        /// η.
        learning_rate: f64,
        /// β₁.
        #[serde(default = "beta1")]
        beta1: f64,
        /// β₂.
        #[serde(default = "beta2")]
        beta2: f64,
        /// ε of the denominator.
        #[serde(default = "adam_eps")]
        epsilon: f64,
    },
}

fn one() -> f64 {
    1.0
}
fn beta1() -> f64 {
    0.9
}
fn beta2() -> f64 {
    0.999
}
fn adam_eps() -> f64 {
    1e-8
}

impl Default for ServerOptimizer {
    fn default() -> Self {
        ServerOptimizer::Sgd {
            learning_rate: 1.0,
            momentum: 0.0,
        }
    }
}

/// How a fixed-size cohort ([`Sampling::Fixed`]) is accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FixedCohortAccounting {
    /// No amplification by sampling (every round at rate 1) under add/remove-one neighbours:
    /// valid for every mechanism and accountant, and loose when the cohort is a small part of
    /// the clients.
    #[default]
    NoAmplification,
    /// Amplification by sampling without replacement (`cohort` of the `N` clients, `N` the
    /// data's clients or `hypothetical_population`) under **replace-one** neighbours (`N` is
    /// public): each round is `SampledWithoutReplacement { N, cohort, Gaussian { z/2 } }` (a
    /// replaced client moves the clipped sum by up to `2·clip`), accounted by the RDP accountant
    /// (Wang, Balle, Kasiviswanathan 2019, as dp_accounting). For `central_gaussian` with the
    /// RDP accountant only. The reported ε is then a replace-one guarantee (the run summary's
    /// `neighbouring_relation`), not comparable one-to-one with an add/remove-one ε.
    WithoutReplacement,
}

/// What ε is reported against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccountingConfig {
    /// δ of every ε report.
    pub delta: f64,
    /// The accountant.
    pub accountant: AccountantKind,
    /// Stop before ε(δ) would exceed this.
    pub budget: Option<f64>,
    /// Account as if the expected cohort were sampled from a population of this many clients
    /// (Poisson rate `cohort / N`) instead of the data's clients: the "hypothetical population"
    /// of paper 001 §6 and of DP-FedAvg's Shakespeare/StackOverflow experiments. The ε then
    /// describes that larger deployment, **not** the simulated one; every output says so. Must
    /// be at least the number of clients.
    pub hypothetical_population: Option<u64>,
    /// How a fixed-size cohort is accounted (default: no amplification).
    pub fixed_cohort: FixedCohortAccounting,
}

impl Default for AccountingConfig {
    fn default() -> Self {
        Self {
            delta: 1e-5,
            accountant: AccountantKind::Rdp,
            budget: None,
            hypothetical_population: None,
            fixed_cohort: FixedCohortAccounting::NoAmplification,
        }
    }
}

/// Test-set evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// Evaluate every this many rounds (and after the last).
    pub every: u64,
    /// Evaluate on at most this many test rows (the first ones).
    pub max_rows: Option<usize>,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            every: 1,
            max_rows: None,
        }
    }
}

/// Canary clients inserted into training to audit it empirically (`[audit]`; see
/// [`crate::audit`]): canary `i` has a seeded random unit direction `c_i` and is included with
/// probability ½ (seeded); an included canary contributes `norm·c_i` in every round, through
/// the same privacy mechanism as the real clients. Canaries are extra clients: they are not
/// sampled real clients and the accounted ε is for the real clients.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// K, the number of canaries (2..=[`MAX_CANARIES`]).
    pub canaries: usize,
    /// Confidence `1 − α` of the one-run lower bound (in (0, 1); default 0.95).
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// The one-run audit's guesses `r` (even, 2..=K): the `r/2` highest cosines guess
    /// "included", the `r/2` lowest "excluded", the rest abstain (default `2·max(1, ⌊K/4⌋)`:
    /// about half the canaries). Fixed before the run, as the audit's confidence requires.
    pub guesses: Option<usize>,
    /// ℓ2 norm of a canary's update before the mechanism clips it (> 0). Default: the largest
    /// contribution a client can make — the clip norm under central DP; without privacy, the
    /// largest real update norm of each round ([`crate::audit`]).
    pub norm: Option<f64>,
}

fn default_confidence() -> f64 {
    0.95
}

/// The most canaries a run may insert.
pub const MAX_CANARIES: usize = 1 << 16;

impl AuditConfig {
    /// The guesses `r` of the one-run audit (the default `2·max(1, ⌊K/4⌋)` when not given).
    pub fn guesses(&self) -> usize {
        self.guesses.unwrap_or(2 * (self.canaries / 4).max(1))
    }

    /// Checks the fields: `2 ≤ canaries ≤` [`MAX_CANARIES`], confidence in (0, 1), guesses even
    /// and in `2..=canaries`, a positive finite norm.
    ///
    /// # Errors
    /// [`FlError::Config`] naming the field and its value.
    pub fn validate(&self) -> Result<(), FlError> {
        if !(2..=MAX_CANARIES).contains(&self.canaries) {
            return bad(format!(
                "audit.canaries must be in 2..={MAX_CANARIES} (got {})",
                self.canaries
            ));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return bad(format!(
                "audit.confidence must lie in (0, 1) (got {})",
                self.confidence
            ));
        }
        let r = self.guesses();
        if r < 2 || r > self.canaries || !r.is_multiple_of(2) {
            return bad(format!(
                "audit.guesses must be even and in 2..={} (audit.canaries), got {r}",
                self.canaries
            ));
        }
        if let Some(n) = self.norm {
            positive("audit.norm", n)?;
        }
        Ok(())
    }
}

/// Everything about a training run except the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Rounds T.
    pub rounds: u64,
    /// The run seed (absent: drawn from the OS; the output and checkpoints record it).
    pub seed: Option<Seed>,
    /// The model.
    pub model: ModelSpec,
    /// Client sampling.
    pub sampling: Sampling,
    /// Local training.
    #[serde(default)]
    pub local: LocalTraining,
    /// Privacy.
    #[serde(default)]
    pub privacy: Privacy,
    /// Server optimizer.
    #[serde(default)]
    pub server: ServerOptimizer,
    /// Accounting.
    #[serde(default)]
    pub accounting: AccountingConfig,
    /// Evaluation.
    #[serde(default)]
    pub eval: EvalConfig,
    /// Canary audit (absent: none). Not serialized when absent, so checkpoints written before
    /// this section existed still match their config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditConfig>,
}

/// The largest round count (round indices feed 32 bits of the generator stream id).
pub const MAX_ROUNDS: u64 = u32::MAX as u64;
/// The largest number of clients (client indices feed 24 bits of the stream id).
pub const MAX_CLIENTS: usize = 1 << 24;

fn bad<T>(msg: impl Into<String>) -> Result<T, FlError> {
    Err(FlError::Config(msg.into()))
}

fn positive(name: &str, v: f64) -> Result<(), FlError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        bad(format!("{name} must be finite and > 0 (got {v})"))
    }
}

fn noise_choice(what: &str, z: Option<f64>, eps: Option<f64>) -> Result<CentralNoise, FlError> {
    match (z, eps) {
        (Some(z), None) => {
            positive(&format!("{what}.noise_multiplier"), z)?;
            Ok(CentralNoise::Multiplier(z))
        }
        (None, Some(e)) => {
            positive(&format!("{what}.epsilon"), e)?;
            Ok(CentralNoise::Epsilon(e))
        }
        _ => bad(format!(
            "{what}: give exactly one of noise_multiplier and epsilon"
        )),
    }
}

/// Default conditional-rounding β of paper 001 (`e^{−1/2}`).
pub const DEFAULT_BETA: f64 = 0.606_530_659_712_633_4;
/// Default number of aggregate standard deviations the modular range holds.
pub const DEFAULT_K: f64 = 4.0;

/// The noise of a central layer: the multiplier z, or a target ε for the whole run at the run's
/// δ (z is then calibrated when the plan is resolved, [`crate::privacy::PrivacyPlan::new`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CentralNoise {
    /// z > 0.
    Multiplier(f64),
    /// Target ε > 0.
    Epsilon(f64),
}

/// A checked central layer (`privacy` of `central_gaussian`, or `privacy.central`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CheckedCentral {
    /// ℓ2 clip of each contribution (> 0, finite).
    pub clip: f64,
    /// The noise.
    pub noise: CentralNoise,
}

impl CheckedCentral {
    /// Checks `{what}.clip`, then exactly one of `{what}.noise_multiplier` and `{what}.epsilon`.
    fn new(what: &str, clip: f64, z: Option<f64>, eps: Option<f64>) -> Result<Self, FlError> {
        positive(&format!("{what}.clip"), clip)?;
        Ok(Self {
            clip,
            noise: noise_choice(what, z, eps)?,
        })
    }

    fn of_layer(c: Option<CentralLayer>) -> Result<Option<Self>, FlError> {
        c.map(|c| Self::new("privacy.central", c.clip, c.noise_multiplier, c.epsilon))
            .transpose()
    }
}

/// A checked local randomizer with its defaults filled in; the model's dimension, which its
/// construction also needs, comes when the plan is resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CheckedLocal {
    /// Paper 000's separated mechanism: direction at `epsilon − magnitude_epsilon`.
    #[non_exhaustive]
    Separated {
        /// Local ε per report (> 0).
        epsilon: f64,
        /// ε₂ of the magnitude, in (0, ε) (default `min(ε/10, 1)`).
        magnitude_epsilon: f64,
        /// Paper 000's cap parameter ε₀ (> 0) of the direction, or the optimized PrivUnit2.
        epsilon0: Option<f64>,
    },
    /// PrivUnitG on the direction.
    #[non_exhaustive]
    PrivUnitG {
        /// Local ε per report (> 0).
        epsilon: f64,
    },
    /// Paper 004's vector MVU mechanism.
    #[non_exhaustive]
    Mvu {
        /// ε of the scalar metric design (> 0).
        metric_epsilon: f64,
        /// `b_in` in 1..=10.
        input_bits: u32,
        /// `b_out` in 1..=10.
        output_bits: u32,
        /// `p` ∈ {1, 2}.
        power: u32,
        /// Bound on the dithered vector's ℓp norm (≥ clip; default 1.25·clip).
        dither_bound: f64,
    },
}

/// The checked distributed pipeline with its defaults filled in (the planned contributors,
/// which depend on the data's clients, come when the plan is resolved).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CheckedDistributed {
    /// The noise share.
    pub share: NoiseShare,
    /// ℓ2 clip c (> 0).
    pub clip: f64,
    /// Bit width b in 1..=62.
    pub bits: u32,
    /// Conditional rounding β ∈ [0, 1) (default [`DEFAULT_BETA`]).
    pub beta: f64,
    /// Aggregate standard deviations the modular range holds (> 0; default [`DEFAULT_K`]).
    pub k: f64,
    /// A local σ ≥ 0, or a target ε > 0 for the run.
    pub noise: NoiseTarget,
    /// The fewest contributors the noise is planned for (≥ 1), if given.
    pub min_clients: Option<usize>,
    /// Sum through the real secure-aggregation protocol.
    pub secure_aggregation: bool,
    /// The policy the secure sum's clients join under (checked; default when absent).
    pub secagg_policy: privfed_secagg::ClientPolicy,
    /// Dropout probability in [0, 1).
    pub dropout: f64,
}

/// The privacy section with every parameter checked and every default that needs neither the
/// model nor the data filled in: the one reading of [`Privacy`]. [`TrainConfig::validate`]
/// checks a config through it and [`crate::privacy::PrivacyPlan::new`] resolves the mechanisms
/// from it, so the two cannot disagree on what a field means or allows. Its shape is the plan's
/// (none, central, local with an optional central layer, distributed). Other crates can read one
/// and get one only through [`TryFrom`] (its structs and variants with fields are
/// `#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CheckedPrivacy {
    /// No privacy.
    None,
    /// DP-FedAvg's central layer.
    Central(CheckedCentral),
    /// A local randomizer on updates clipped to `clip`, with an optional central layer.
    #[non_exhaustive]
    Local {
        /// The randomizer.
        mechanism: CheckedLocal,
        /// ℓ2 (MVU: ℓp) clip of each update before privatization (> 0).
        clip: f64,
        /// Paper 000's central layer.
        central: Option<CheckedCentral>,
    },
    /// Paper 001's pipeline.
    Distributed(CheckedDistributed),
}

impl TryFrom<&Privacy> for CheckedPrivacy {
    type Error = FlError;

    /// Checks every field of the section and fills in the defaults.
    ///
    /// # Errors
    /// The first bad field, as [`FlError::Config`] naming it as in the TOML file.
    fn try_from(privacy: &Privacy) -> Result<Self, FlError> {
        Ok(match *privacy {
            Privacy::None => CheckedPrivacy::None,
            Privacy::CentralGaussian {
                clip,
                noise_multiplier,
                epsilon,
            } => CheckedPrivacy::Central(CheckedCentral::new(
                "privacy",
                clip,
                noise_multiplier,
                epsilon,
            )?),
            Privacy::Separated {
                epsilon,
                magnitude_epsilon,
                epsilon0,
                clip,
                central,
            } => {
                positive("privacy.epsilon", epsilon)?;
                if let Some(e0) = epsilon0 {
                    positive("privacy.epsilon0", e0)?;
                }
                positive("privacy.clip", clip)?;
                if let Some(e2) = magnitude_epsilon {
                    positive("privacy.magnitude_epsilon", e2)?;
                    if e2 >= epsilon {
                        return bad("privacy.magnitude_epsilon must be < privacy.epsilon");
                    }
                }
                CheckedPrivacy::Local {
                    mechanism: CheckedLocal::Separated {
                        epsilon,
                        magnitude_epsilon: magnitude_epsilon.unwrap_or((epsilon / 10.0).min(1.0)),
                        epsilon0,
                    },
                    clip,
                    central: CheckedCentral::of_layer(central)?,
                }
            }
            Privacy::Privunitg {
                epsilon,
                clip,
                central,
            } => {
                positive("privacy.epsilon", epsilon)?;
                positive("privacy.clip", clip)?;
                CheckedPrivacy::Local {
                    mechanism: CheckedLocal::PrivUnitG { epsilon },
                    clip,
                    central: CheckedCentral::of_layer(central)?,
                }
            }
            Privacy::Mvu {
                metric_epsilon,
                input_bits,
                output_bits,
                power,
                clip,
                dither_bound,
                central,
            } => {
                positive("privacy.metric_epsilon", metric_epsilon)?;
                positive("privacy.clip", clip)?;
                if !(1..=10).contains(&input_bits) || !(1..=10).contains(&output_bits) {
                    return bad("privacy.input_bits and privacy.output_bits must be in 1..=10");
                }
                if power != 1 && power != 2 {
                    return bad(format!("privacy.power must be 1 or 2 (got {power})"));
                }
                if let Some(b) = dither_bound
                    && !(b.is_finite() && b >= clip)
                {
                    return bad(format!(
                        "privacy.dither_bound must be ≥ privacy.clip (got {b})"
                    ));
                }
                CheckedPrivacy::Local {
                    mechanism: CheckedLocal::Mvu {
                        metric_epsilon,
                        input_bits,
                        output_bits,
                        power,
                        dither_bound: dither_bound.unwrap_or(1.25 * clip),
                    },
                    clip,
                    central: CheckedCentral::of_layer(central)?,
                }
            }
            Privacy::Distributed {
                share,
                clip,
                bits,
                beta,
                k,
                noise_stddev,
                epsilon,
                min_clients,
                secure_aggregation,
                secagg_policy,
                dropout,
            } => {
                positive("privacy.clip", clip)?;
                if let Some(p) = secagg_policy {
                    if !secure_aggregation {
                        return bad(
                            "privacy.secagg_policy applies to secure_aggregation = true only",
                        );
                    }
                    p.validate()
                        .map_err(|e| FlError::Config(format!("privacy.secagg_policy: {e}")))?;
                }
                if !(1..=62).contains(&bits) {
                    return bad(format!("privacy.bits must be in 1..=62 (got {bits})"));
                }
                if let Some(b) = beta
                    && !(0.0..1.0).contains(&b)
                {
                    return bad(format!("privacy.beta must lie in [0, 1) (got {b})"));
                }
                if let Some(k) = k {
                    positive("privacy.k", k)?;
                }
                let noise = match (noise_stddev, epsilon) {
                    (Some(s), None) if s.is_finite() && s >= 0.0 => NoiseTarget::LocalStddev(s),
                    (None, Some(e)) => {
                        positive("privacy.epsilon", e)?;
                        NoiseTarget::Epsilon(e)
                    }
                    _ => {
                        return bad("privacy: give exactly one of noise_stddev (≥ 0) and epsilon");
                    }
                };
                if min_clients == Some(0) {
                    return bad("privacy.min_clients must be ≥ 1");
                }
                if !(0.0..1.0).contains(&dropout) {
                    return bad(format!(
                        "privacy.dropout must lie in [0, 1) (got {dropout})"
                    ));
                }
                CheckedPrivacy::Distributed(CheckedDistributed {
                    share,
                    clip,
                    bits,
                    beta: beta.unwrap_or(DEFAULT_BETA),
                    k: k.unwrap_or(DEFAULT_K),
                    noise,
                    min_clients,
                    secure_aggregation,
                    secagg_policy: secagg_policy.unwrap_or_default(),
                    dropout,
                })
            }
        })
    }
}

impl TrainConfig {
    /// Checks every field against the number of clients (the privacy section by reading it into
    /// a [`CheckedPrivacy`], as the plan is resolved from).
    ///
    /// # Errors
    /// The first bad field, named as in the TOML file.
    pub fn validate(&self, clients: usize) -> Result<(), FlError> {
        if self.rounds == 0 || self.rounds > MAX_ROUNDS {
            return bad(format!("rounds must be in 1..={MAX_ROUNDS}"));
        }
        if clients == 0 || clients > MAX_CLIENTS {
            return bad(format!(
                "the data has {clients} clients; 1..={MAX_CLIENTS} are supported"
            ));
        }
        match self.sampling {
            Sampling::Poisson { rate } => {
                if !(rate > 0.0 && rate <= 1.0) {
                    return bad(format!("sampling.rate must lie in (0, 1] (got {rate})"));
                }
            }
            Sampling::Fixed { cohort } => {
                if cohort == 0 || cohort > clients {
                    return bad(format!(
                        "sampling.cohort must be in 1..={clients} (the number of clients), got {cohort}"
                    ));
                }
            }
        }
        let l = &self.local;
        if l.epochs == 0 || l.batch_size == 0 {
            return bad("local.epochs and local.batch_size must be ≥ 1");
        }
        positive("local.learning_rate", l.learning_rate)?;
        if !(l.proximal.is_finite() && l.proximal >= 0.0) {
            return bad(format!("local.proximal must be ≥ 0 (got {})", l.proximal));
        }
        if l.max_steps == Some(0) {
            return bad("local.max_steps must be ≥ 1");
        }
        let privacy = CheckedPrivacy::try_from(&self.privacy)?;
        match self.server {
            ServerOptimizer::Sgd {
                learning_rate,
                momentum,
            } => {
                positive("server.learning_rate", learning_rate)?;
                if !(0.0..1.0).contains(&momentum) {
                    return bad(format!(
                        "server.momentum must lie in [0, 1) (got {momentum})"
                    ));
                }
            }
            ServerOptimizer::Adam {
                learning_rate,
                beta1,
                beta2,
                epsilon,
            } => {
                positive("server.learning_rate", learning_rate)?;
                positive("server.epsilon", epsilon)?;
                if !(0.0..1.0).contains(&beta1) || !(0.0..1.0).contains(&beta2) {
                    return bad("server.beta1 and server.beta2 must lie in [0, 1)");
                }
            }
        }
        let a = &self.accounting;
        if !(a.delta > 0.0 && a.delta < 1.0) {
            return bad(format!(
                "accounting.delta must lie in (0, 1) (got {})",
                a.delta
            ));
        }
        if a.hypothetical_population == Some(0) {
            return bad("accounting.hypothetical_population must be ≥ 1");
        }
        if a.hypothetical_population.is_some() && matches!(privacy, CheckedPrivacy::None) {
            return bad(
                "accounting.hypothetical_population needs a private mechanism (privacy.mechanism is none)",
            );
        }
        if a.fixed_cohort == FixedCohortAccounting::WithoutReplacement {
            if !matches!(self.sampling, Sampling::Fixed { .. }) {
                return bad(
                    "accounting.fixed_cohort = \"without_replacement\" needs sampling.kind = \"fixed\"",
                );
            }
            if !matches!(privacy, CheckedPrivacy::Central(_)) {
                return bad(
                    "accounting.fixed_cohort = \"without_replacement\" is implemented for privacy.mechanism = \"central_gaussian\" only",
                );
            }
            if a.accountant != AccountantKind::Rdp {
                return bad(
                    "accounting.fixed_cohort = \"without_replacement\" needs accounting.accountant = \"rdp\" (the PLD accountant does not support sampling without replacement)",
                );
            }
        }
        if let Some(b) = a.budget {
            positive("accounting.budget", b)?;
            if matches!(privacy, CheckedPrivacy::None) {
                return bad(
                    "accounting.budget needs a private mechanism (privacy.mechanism is none)",
                );
            }
        }
        if self.eval.every == 0 {
            return bad("eval.every must be ≥ 1");
        }
        if self.eval.max_rows == Some(0) {
            return bad("eval.max_rows must be ≥ 1");
        }
        if let Some(a) = &self.audit {
            self.validate_audit(a)?;
        }
        Ok(())
    }

    fn validate_audit(&self, a: &AuditConfig) -> Result<(), FlError> {
        a.validate()
    }

    /// The sampling rate the accountants see for data of `clients` clients: `rate` for Poisson,
    /// 1 for a fixed cohort; with [`AccountingConfig::hypothetical_population`] `N`, the expected
    /// cohort over `N` (Poisson amplification at that rate, as if drawn from `N` clients).
    pub fn accounted_rate(&self, clients: usize) -> f64 {
        match self.accounting.hypothetical_population {
            Some(n) => (self.expected_cohort(clients) / n as f64).min(1.0),
            None => match self.sampling {
                Sampling::Poisson { rate } => rate,
                Sampling::Fixed { .. } => 1.0,
            },
        }
    }

    /// `(N, cohort)` when rounds are accounted as sampling without replacement
    /// ([`FixedCohortAccounting::WithoutReplacement`]): `N` the hypothetical population if set,
    /// else `clients`.
    pub fn without_replacement(&self, clients: usize) -> Option<(u64, u64)> {
        match (self.accounting.fixed_cohort, self.sampling) {
            (FixedCohortAccounting::WithoutReplacement, Sampling::Fixed { cohort }) => Some((
                self.accounting
                    .hypothetical_population
                    .unwrap_or(clients as u64),
                cohort as u64,
            )),
            _ => None,
        }
    }

    /// The neighbouring relation of the run's ε: replace-one when a fixed cohort is accounted
    /// as sampling without replacement, add/remove-one otherwise.
    pub fn neighbouring_relation(&self) -> NeighbouringRelation {
        match self.accounting.fixed_cohort {
            FixedCohortAccounting::WithoutReplacement
                if matches!(self.sampling, Sampling::Fixed { .. }) =>
            {
                NeighbouringRelation::ReplaceOne
            }
            _ => NeighbouringRelation::AddOrRemoveOne,
        }
    }

    /// The expected number of sampled clients per round.
    pub fn expected_cohort(&self, clients: usize) -> f64 {
        match self.sampling {
            Sampling::Poisson { rate } => rate * clients as f64,
            Sampling::Fixed { cohort } => cohort as f64,
        }
    }
}
