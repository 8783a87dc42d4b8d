//! The privacy side of a round: the mechanisms a config resolves to (from its checked privacy
//! section, [`CheckedPrivacy`]; noise calibrated once for the whole run), what each client does
//! to its update, how the server aggregates, and the privacy event each round emits.
//!
//! Every formula lives in the layer that owns it: clipping, the central projection and noise in
//! `privfed_mechanisms::central`, the local randomizers in `privfed_mechanisms`, the Skellam
//! pipeline and its round event in `privfed_distributed`, the secure sum in `privfed_secagg`
//! (through [`privfed_secagg::local::secure_sum`]), calibration in `privfed_accounting::calibrate`. This
//! module only wires them to a training round.

use privfed_accounting::calibrate::{
    AccountantKind, calibrate_noise_multiplier, calibrate_parameter_with,
};
use privfed_accounting::{
    DpEvent, NeighbouringRelation, PldAccountant, PrivacyAccountant, RdpAccountant,
};
use privfed_distributed::{
    ModularSum, NoiseShare, PlanRequest, SkellamDecoder, SkellamEncoder, SkellamParams,
    round_event_for,
};
use privfed_mechanisms::central::CentralGaussian;
use privfed_mechanisms::grid_rr::GridRr;
use privfed_mechanisms::mvu::{DpConstraint, MvuVector};
use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::separated::Separated;
use privfed_mechanisms::{CryptoRng, LocalRandomizer, Rng};
use serde::Serialize;

use super::FlError;
use super::config::{
    CentralNoise, CheckedCentral, CheckedDistributed, CheckedLocal, CheckedPrivacy, TrainConfig,
};
pub use super::config::{DEFAULT_BETA, DEFAULT_K};
/// Cap on the MVU vector mechanism's conditional-dithering redraws per report.
pub const MVU_MAX_DRAWS: usize = 1000;

/// What the headline ε of a run protects against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Guarantee {
    /// No privacy.
    None,
    /// Central DP of the subsampled Gaussian on the aggregate (trusting the server with the
    /// clients' clipped updates).
    Central,
    /// Local DP: each report is ε-DP; composed over the rounds a client may take part in.
    Local,
    /// Distributed DP: the noise of the contributors' shares in a secure sum (the server sees
    /// only the sum).
    Distributed,
}

/// A local randomizer for updates.
#[derive(Debug, Clone)]
pub enum LocalMechanism {
    /// Paper 000's separated mechanism (PrivUnit2 direction × ScalarDP magnitude).
    Separated(Box<Separated>),
    /// PrivUnitG on the direction, reports scaled to the clip norm.
    PrivUnitG(Box<PrivUnitG>),
    /// Paper 004's vector MVU mechanism on the ℓp ball.
    Mvu(Box<MvuVector>),
}

/// The resolved mechanisms of a run.
#[derive(Debug, Clone)]
pub enum PrivacyPlan {
    /// Plain FedAvg.
    None,
    /// DP-FedAvg.
    Central {
        /// Projection and noise.
        layer: CentralGaussian,
        /// `(N, cohort)` when each round is accounted as sampling without replacement
        /// (replace-one neighbours; [`super::config::FixedCohortAccounting`]).
        without_replacement: Option<(u64, u64)>,
    },
    /// Local randomizer, optional central layer.
    Local {
        /// The randomizer.
        mechanism: LocalMechanism,
        /// ℓ2 clip before privatization.
        clip: f64,
        /// ε of one report.
        epsilon: f64,
        /// Paper 000's central layer.
        central: Option<CentralGaussian>,
    },
    /// Paper 001's pipeline.
    Distributed {
        /// Validated round parameters (from the planner).
        params: SkellamParams,
        /// Skellam or discrete-Gaussian shares.
        share: NoiseShare,
        /// Through the secure-aggregation protocol.
        secure_aggregation: bool,
        /// The policy the secure sum's clients join under.
        secagg_policy: privfed_secagg::ClientPolicy,
        /// Dropout probability of a sampled client.
        dropout: f64,
        /// Contributors the noise was planned for.
        planned_clients: usize,
    },
}

/// An accountant of either kind (an enum so budget checks can clone it).
#[derive(Debug, Clone)]
pub enum Accountant {
    /// RDP.
    Rdp(RdpAccountant),
    /// PLD.
    Pld(PldAccountant),
}

impl Accountant {
    /// A fresh accountant.
    pub fn new(kind: AccountantKind) -> Self {
        match kind {
            AccountantKind::Rdp => Accountant::Rdp(RdpAccountant::new()),
            AccountantKind::Pld => Accountant::Pld(PldAccountant::new()),
        }
    }

    /// A fresh accountant of the config's kind and neighbouring relation (replace-one: an RDP
    /// accountant for sampling without replacement; the config's validation sees to the kind).
    pub fn for_config(cfg: &TrainConfig) -> Self {
        match cfg.neighbouring_relation() {
            NeighbouringRelation::AddOrRemoveOne => Self::new(cfg.accounting.accountant),
            relation => Accountant::Rdp(
                RdpAccountant::with_relation(privfed_accounting::rdp::default_orders(), relation)
                    .unwrap_or_default(),
            ),
        }
    }
    fn inner(&self) -> &dyn PrivacyAccountant {
        match self {
            Accountant::Rdp(a) => a,
            Accountant::Pld(a) => a,
        }
    }
    /// Composes an event.
    ///
    /// # Errors
    /// An event the accountant does not support.
    pub fn compose(&mut self, e: &DpEvent) -> Result<(), FlError> {
        match self {
            Accountant::Rdp(a) => a.compose(e)?,
            Accountant::Pld(a) => a.compose(e)?,
        }
        Ok(())
    }
    /// ε at δ of everything composed.
    ///
    /// # Errors
    /// From the accountant.
    pub fn epsilon(&self, delta: f64) -> Result<f64, FlError> {
        Ok(self.inner().get_epsilon(delta)?)
    }
    /// The events composed so far, one per composition (the ledger's runs expanded).
    pub fn events(&self) -> Vec<DpEvent> {
        self.inner().ledger().events()
    }
    /// ε at δ if `e` were composed next (the accountant is left untouched).
    ///
    /// # Errors
    /// From the accountant.
    pub fn epsilon_with(&self, e: &DpEvent, delta: f64) -> Result<f64, FlError> {
        let mut a = self.clone();
        a.compose(e)?;
        a.epsilon(delta)
    }
}

fn central_layer(
    cfg: &TrainConfig,
    clients: usize,
    c: CheckedCentral,
) -> Result<CentralGaussian, FlError> {
    let z = match c.noise {
        CentralNoise::Multiplier(z) => z,
        CentralNoise::Epsilon(eps) => match cfg.without_replacement(clients) {
            None => {
                calibrate_noise_multiplier(
                    cfg.accounting.accountant,
                    eps,
                    cfg.accounting.delta,
                    cfg.accounted_rate(clients),
                    cfg.rounds,
                )?
                .parameter
            }
            Some((n, m)) => {
                let Accountant::Rdp(fresh) = Accountant::for_config(cfg) else {
                    return Err(FlError::Config(
                        "sampling without replacement needs the RDP accountant".into(),
                    ));
                };
                calibrate_parameter_with(&fresh, eps, cfg.accounting.delta, |z| {
                    DpEvent::SelfComposed {
                        event: Box::new(without_replacement_event(n, m, z)),
                        count: cfg.rounds,
                    }
                })?
                .parameter
            }
        },
    };
    Ok(CentralGaussian::new(c.clip, z)?)
}

impl LocalMechanism {
    /// Builds a checked randomizer for updates of `dim` coordinates clipped to `clip`, with the
    /// ε of one report as the mechanism computes it.
    fn build(m: CheckedLocal, dim: usize, clip: f64) -> Result<(Self, f64), FlError> {
        Ok(match m {
            CheckedLocal::Separated {
                epsilon,
                magnitude_epsilon: e2,
                epsilon0,
            } => {
                let mech = match epsilon0 {
                    None => Separated::new(epsilon - e2, e2, dim, clip)?,
                    Some(e0) => Separated::from_parts(
                        PrivUnit2::paper000(epsilon - e2, e0, dim)?,
                        GridRr::scalar_dp(e2, clip)?,
                    )?,
                };
                let eps = mech.guarantee().epsilon();
                (LocalMechanism::Separated(Box::new(mech)), eps)
            }
            CheckedLocal::PrivUnitG { epsilon } => {
                let mech = PrivUnitG::optimized(epsilon, dim)?;
                let eps = mech.guarantee().epsilon();
                (LocalMechanism::PrivUnitG(Box::new(mech)), eps)
            }
            CheckedLocal::Mvu {
                metric_epsilon,
                input_bits,
                output_bits,
                power,
                dither_bound,
            } => {
                let report = privfed_compression::designer::design_mvu(
                    input_bits,
                    output_bits,
                    metric_epsilon,
                    DpConstraint::Metric { power },
                    &privfed_compression::designer::DesignOptions::default(),
                )
                .map_err(|e| {
                    FlError::Config(format!("privacy: designing the MVU mechanism: {e}"))
                })?;
                let mech = MvuVector::new(report.design, dim, clip, dither_bound, MVU_MAX_DRAWS)?;
                let eps = mech.epsilon();
                (LocalMechanism::Mvu(Box::new(mech)), eps)
            }
        })
    }
}

/// The distributed pipeline's round parameters from the planner: the noise planned for the
/// expected survivors (or `min_clients`), the modular range for the whole expected cohort.
fn distributed_plan(
    cfg: &TrainConfig,
    d: CheckedDistributed,
    dim: usize,
    clients: usize,
) -> Result<PrivacyPlan, FlError> {
    let cohort = cfg.expected_cohort(clients);
    let expected = cohort * (1.0 - d.dropout);
    let planned = d.min_clients.unwrap_or((expected.floor() as usize).max(1));
    // The noise is for the survivors, the range for the whole (expected) cohort: a round
    // without dropouts sums them all. (Under Poisson sampling a larger cohort can still occur;
    // the decoder flags a wrap if the range was too small.)
    let summed = planned.max(cohort.ceil() as usize);
    let plan = privfed_distributed::plan(&PlanRequest {
        dim,
        clip: d.clip,
        bits: d.bits,
        clients: planned,
        max_contributors: Some(summed),
        k: d.k,
        beta: d.beta,
        noise: d.noise,
        delta: Some(cfg.accounting.delta),
        sampling_rate: cfg.accounted_rate(clients),
        rounds: cfg.rounds,
        share: d.share,
        colluding_fraction: 0.0,
    })?;
    Ok(PrivacyPlan::Distributed {
        params: plan.params,
        share: d.share,
        secure_aggregation: d.secure_aggregation,
        secagg_policy: d.secagg_policy,
        dropout: d.dropout,
        planned_clients: planned,
    })
}

/// One round of the central Gaussian (noise multiplier `z` over the clip, i.e. over the
/// add/remove sensitivity) on a cohort of `m` of `n` clients drawn without replacement, under
/// replace-one neighbours: the replace-one sensitivity of the clipped sum is `2·clip`, so the
/// inner Gaussian's noise multiplier is `z/2`.
pub fn without_replacement_event(n: u64, m: u64, z: f64) -> DpEvent {
    DpEvent::SampledWithoutReplacement {
        source_dataset_size: n,
        sample_size: m,
        event: Box::new(DpEvent::Gaussian {
            noise_multiplier: z / 2.0,
        }),
    }
}

impl PrivacyPlan {
    /// Resolves the config's privacy section for a model of `dim` parameters and `clients`
    /// clients (calibrating noise to ε targets for the whole run). The section is read through
    /// [`CheckedPrivacy`], the same reading [`TrainConfig::validate`] checks it with, so a bad
    /// privacy parameter is refused here with the same message whether or not `validate` ran;
    /// the other sections (δ, rounds, sampling) are taken as validated.
    ///
    /// # Errors
    /// A bad privacy parameter or a hypothetical population smaller than `clients`
    /// ([`FlError::Config`]), parameters the mechanisms or the planner reject, or targets no
    /// noise meets.
    pub fn new(cfg: &TrainConfig, dim: usize, clients: usize) -> Result<Self, FlError> {
        let privacy = CheckedPrivacy::try_from(&cfg.privacy)?;
        if let Some(n) = cfg.accounting.hypothetical_population
            && n < clients as u64
        {
            return Err(FlError::Config(format!(
                "accounting.hypothetical_population ({n}) must be at least the number of clients \
                 ({clients}): a smaller population would understate the sampling rate"
            )));
        }
        Ok(match privacy {
            CheckedPrivacy::None => PrivacyPlan::None,
            CheckedPrivacy::Central(c) => PrivacyPlan::Central {
                layer: central_layer(cfg, clients, c)?,
                without_replacement: cfg.without_replacement(clients),
            },
            CheckedPrivacy::Local {
                mechanism,
                clip,
                central,
            } => {
                let (mechanism, epsilon) = LocalMechanism::build(mechanism, dim, clip)?;
                PrivacyPlan::Local {
                    mechanism,
                    clip,
                    epsilon,
                    central: central
                        .map(|c| central_layer(cfg, clients, c))
                        .transpose()?,
                }
            }
            CheckedPrivacy::Distributed(d) => distributed_plan(cfg, d, dim, clients)?,
        })
    }

    /// What the headline ε protects against.
    pub fn guarantee(&self) -> Guarantee {
        match self {
            PrivacyPlan::None => Guarantee::None,
            PrivacyPlan::Central { .. } => Guarantee::Central,
            PrivacyPlan::Local {
                central: Some(_), ..
            } => Guarantee::Central,
            PrivacyPlan::Local { central: None, .. } => Guarantee::Local,
            PrivacyPlan::Distributed { .. } => Guarantee::Distributed,
        }
    }

    /// ε of one local report (local mechanisms only).
    pub fn local_epsilon(&self) -> Option<f64> {
        match self {
            PrivacyPlan::Local { epsilon, .. } => Some(*epsilon),
            _ => None,
        }
    }

    /// The clip a local or distributed mechanism applies to each update (`None` without privacy
    /// and under central DP, where the server clips).
    pub fn client_clip(&self) -> Option<f64> {
        match self {
            PrivacyPlan::Local { clip, .. } => Some(*clip),
            PrivacyPlan::Distributed { params, .. } => Some(params.clip()),
            PrivacyPlan::None | PrivacyPlan::Central { .. } => None,
        }
    }

    /// The central noise multiplier (central layers only).
    pub fn noise_multiplier(&self) -> Option<f64> {
        match self {
            PrivacyPlan::Central { layer, .. } => Some(layer.noise_multiplier()),
            PrivacyPlan::Local {
                central: Some(layer),
                ..
            } => Some(layer.noise_multiplier()),
            _ => None,
        }
    }

    /// The event of one round in which `contributors` clients' contributions are in the
    /// aggregate, sampled at the accounted `rate` (`None`: nothing private was released).
    ///
    /// # Errors
    /// From the distributed pipeline (e.g. σ = 0 carries no guarantee).
    pub fn round_event(&self, rate: f64, contributors: usize) -> Result<Option<DpEvent>, FlError> {
        let inner = match self {
            PrivacyPlan::None => return Ok(None),
            PrivacyPlan::Central {
                layer,
                without_replacement: Some((n, m)),
            } => {
                return Ok(Some(without_replacement_event(
                    *n,
                    *m,
                    layer.noise_multiplier(),
                )));
            }
            PrivacyPlan::Central { layer, .. }
            | PrivacyPlan::Local {
                central: Some(layer),
                ..
            } => DpEvent::Gaussian {
                noise_multiplier: layer.noise_multiplier(),
            },
            PrivacyPlan::Local { epsilon, .. } => DpEvent::PureDp { epsilon: *epsilon },
            PrivacyPlan::Distributed { params, share, .. } => {
                if contributors == 0 {
                    return Ok(None);
                }
                round_event_for(*share, params, contributors)?
            }
        };
        Ok(Some(DpEvent::sampled_steps(inner, rate, 1)))
    }

    /// The event a round is planned to emit (the distributed pipeline's planned contributors).
    ///
    /// # Errors
    /// As [`PrivacyPlan::round_event`].
    pub fn planned_event(&self, rate: f64) -> Result<Option<DpEvent>, FlError> {
        let n = match self {
            PrivacyPlan::Distributed {
                planned_clients, ..
            } => *planned_clients,
            _ => 1,
        };
        self.round_event(rate, n)
    }
}

/// What a client sends.
#[derive(Debug, Clone)]
pub enum Contribution {
    /// The raw update (no privacy, or central DP where the server clips).
    Update(Vec<f64>),
    /// A local randomizer's report.
    Report(Vec<f64>),
    /// The distributed pipeline's encoding in `Z_{2^b}^{d'}`.
    Encoded(Vec<u64>),
}

/// The client's side of one round: turns an update into what it sends (borrowing the plan's
/// mechanisms; only the round's encoder, which holds its rotation, is built per round).
#[derive(Debug)]
pub enum ClientSide<'p> {
    /// Send the update.
    Plain,
    /// Clip to `clip` and privatize.
    Local(&'p LocalMechanism, f64),
    /// Encode for the modular sum.
    Encode(Box<SkellamEncoder>),
}

impl<'p> ClientSide<'p> {
    /// The client side of `plan` for round `rotation_seed` (distributed only).
    ///
    /// # Errors
    /// From the encoder.
    pub fn new(plan: &'p PrivacyPlan, rotation_seed: [u8; 32]) -> Result<Self, FlError> {
        Ok(match plan {
            PrivacyPlan::None | PrivacyPlan::Central { .. } => ClientSide::Plain,
            PrivacyPlan::Local {
                mechanism, clip, ..
            } => ClientSide::Local(mechanism, *clip),
            PrivacyPlan::Distributed { params, share, .. } => ClientSide::Encode(Box::new(
                SkellamEncoder::with_noise(*params, rotation_seed, *share)?,
            )),
        })
    }

    /// Privatizes or encodes one update.
    ///
    /// # Errors
    /// From the mechanisms (e.g. a non-finite update).
    pub fn contribute<R: Rng + CryptoRng + ?Sized>(
        &self,
        update: Vec<f64>,
        rng: &mut R,
    ) -> Result<Contribution, FlError> {
        Ok(match self {
            ClientSide::Plain => Contribution::Update(update),
            ClientSide::Local(mech, clip) => {
                let l2_clipped = || CentralGaussian::new(*clip, 1.0).map(|c| c.project(&update));
                let report = match mech {
                    LocalMechanism::Separated(m) => m.privatize(&l2_clipped()?, rng)?,
                    LocalMechanism::PrivUnitG(m) => {
                        let clipped = l2_clipped()?;
                        let norm = clipped.iter().map(|x| x * x).sum::<f64>().sqrt();
                        // A zero update has no direction: it sends the report of e₁ (any input
                        // is covered by the report's ε).
                        let unit: Vec<f64> = if norm == 0.0 {
                            let mut u = vec![0.0; clipped.len()];
                            u[0] = 1.0;
                            u
                        } else {
                            clipped.iter().map(|x| x / norm).collect()
                        };
                        let mut r = m.privatize(&unit, rng)?;
                        r.iter_mut().for_each(|x| *x *= *clip);
                        r
                    }
                    LocalMechanism::Mvu(m) => {
                        let x = match m.domain() {
                            privfed_mechanisms::Domain::L1Ball { .. } => {
                                // ℓ1 projection by scaling (slightly inside, against rounding).
                                let n: f64 = update.iter().map(|v| v.abs()).sum();
                                let f = if n > *clip {
                                    *clip / n * (1.0 - 1e-12)
                                } else {
                                    1.0
                                };
                                update.iter().map(|v| v * f).collect()
                            }
                            _ => l2_clipped()?,
                        };
                        m.privatize(&x, rng)?
                    }
                };
                Contribution::Report(report)
            }
            ClientSide::Encode(enc) => Contribution::Encoded(enc.encode(&update, rng)?.0),
        })
    }
}

/// The server's aggregate of one round.
#[derive(Debug, Clone)]
pub struct Aggregated {
    /// The mean update to apply (`None`: nothing to apply, e.g. no contributor).
    pub mean: Option<Vec<f64>>,
    /// Clients whose contributions are in the aggregate.
    pub contributors: usize,
    /// The distributed decoder suspected a modular wrap.
    pub wrap_suspected: bool,
    /// The secure-aggregation round aborted (fewer survivors than its threshold): it revealed
    /// nothing, so nothing is applied or accounted.
    pub aborted: bool,
}

/// Aggregates the contributions of the clients that did not drop out (`dropped[i]` marks
/// client `i`), adding central noise from `rng` where the plan has it.
///
/// # Errors
/// From the mechanisms, the decoder or the secure-aggregation round.
pub fn aggregate<R: Rng + CryptoRng + ?Sized>(
    plan: &PrivacyPlan,
    dim: usize,
    expected_cohort: f64,
    contributions: Vec<Contribution>,
    dropped: &[bool],
    rotation_seed: [u8; 32],
    rng: &mut R,
) -> Result<Aggregated, FlError> {
    let survivors = dropped.iter().filter(|d| !**d).count();
    let vectors = || {
        contributions
            .iter()
            .zip(dropped)
            .filter(|(_, d)| !**d)
            .filter_map(|(c, _)| match c {
                Contribution::Update(v) | Contribution::Report(v) => Some(v.as_slice()),
                Contribution::Encoded(_) => None,
            })
    };
    let mean_of = |n: usize| -> Option<Vec<f64>> {
        if n == 0 {
            return None;
        }
        let mut sum = vec![0.0; dim];
        for v in vectors() {
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
        }
        sum.iter_mut().for_each(|s| *s /= n as f64);
        Some(sum)
    };
    Ok(match plan {
        PrivacyPlan::None | PrivacyPlan::Local { central: None, .. } => Aggregated {
            mean: mean_of(survivors),
            contributors: survivors,
            wrap_suspected: false,
            aborted: false,
        },
        PrivacyPlan::Central { layer, .. }
        | PrivacyPlan::Local {
            central: Some(layer),
            ..
        } => Aggregated {
            mean: Some(layer.aggregate(vectors(), dim, expected_cohort.max(1.0), rng)?),
            contributors: survivors,
            wrap_suspected: false,
            aborted: false,
        },
        PrivacyPlan::Distributed {
            params,
            secure_aggregation,
            secagg_policy,
            ..
        } => {
            // A secure sum needs at least two inputs (one input's "sum" is the input); such a
            // round releases nothing.
            if survivors == 0 || (*secure_aggregation && contributions.len() < 2) {
                return Ok(Aggregated {
                    mean: None,
                    contributors: 0,
                    wrap_suspected: false,
                    aborted: false,
                });
            }
            let bits = params.bits();
            let padded = params.padded_dim();
            let encoded: Vec<Vec<u64>> = contributions
                .into_iter()
                .map(|c| match c {
                    Contribution::Encoded(v) => v,
                    _ => Vec::new(),
                })
                .collect();
            let (sum, contributors) = if *secure_aggregation {
                match privfed_secagg::local::secure_sum_with_policy(
                    privfed_secagg::local::SecAggThreat::HonestButCurious,
                    secagg_policy,
                    bits,
                    padded,
                    encoded,
                    dropped,
                    &mut rand::rng(),
                ) {
                    Ok(agg) => {
                        let n = agg.survivors.len();
                        (agg.sum, n)
                    }
                    Err(privfed_secagg::SecAggError::Aborted(_)) => {
                        return Ok(Aggregated {
                            mean: None,
                            contributors: 0,
                            wrap_suspected: false,
                            aborted: true,
                        });
                    }
                    Err(e) => return Err(FlError::SecAgg(e.to_string())),
                }
            } else {
                let mut sum = ModularSum::new(bits, padded)?;
                for (v, d) in encoded.iter().zip(dropped) {
                    if !*d {
                        sum.add(v)?;
                    }
                }
                let n = sum.contributions();
                (sum.value().to_vec(), n)
            };
            let decoded =
                SkellamDecoder::new(*params, rotation_seed)?.decode(&sum, contributors)?;
            Aggregated {
                mean: Some(decoded.mean),
                contributors,
                wrap_suspected: decoded.wrap_suspected,
                aborted: false,
            }
        }
    })
}
