//! An in-process round: real clients and a real server exchanging encoded messages, with no
//! network. For simulations, tests and benchmarks; the caller times the stages.
//!
//! Every message goes through `messages::encode` and `messages::decode`, so byte counts are the
//! wire's.

use rand::{CryptoRng, Rng};

use crate::client::Client;
use crate::config::{ClientId, RoundConfig, ThreatModel};
use crate::error::{Result, SecAggError};
use crate::identity::{Credentials, DeviceKey, Roster, RosterCheck};
use crate::mask::modulus_mask;
use crate::messages::{ClientMessage, Stage, decode, encode};
use crate::plan::{GraphChoice, round_config_for, round_config_for_colluding};
use crate::policy::ClientPolicy;
use crate::server::{Aggregate, RoundStatus, Server};

/// The plain sum of the named clients' inputs mod 2^`bits` (client `id` holds
/// `inputs[id − 1]`): what a secure-aggregation round must output, to check one against.
pub fn plain_sum(inputs: &[Vec<u64>], ids: &[ClientId], bits: u32) -> Vec<u64> {
    let m = modulus_mask(bits);
    let mut sum = vec![0u64; inputs.first().map_or(0, Vec::len)];
    for &id in ids {
        for (s, v) in sum.iter_mut().zip(&inputs[id as usize - 1]) {
            *s = s.wrapping_add(*v) & m;
        }
    }
    sum
}

/// Bytes a stage moved, summed over clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTraffic {
    /// Client → server.
    pub up: u64,
    /// Server → client.
    pub down: u64,
    /// Clients that sent a message in this stage.
    pub senders: usize,
}

/// Who is computing, for an [`Observer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party {
    /// A client, by id.
    Client(ClientId),
    /// The server.
    Server,
}

/// Told when each party starts and stops computing, so a caller with a clock can time them
/// (this crate has none).
pub trait Observer {
    /// `party` starts computing.
    fn start(&mut self, party: Party);
    /// `party` stops computing.
    fn stop(&mut self, party: Party);
}

/// An observer that does nothing.
#[derive(Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn start(&mut self, _: Party) {}
    fn stop(&mut self, _: Party) {}
}

/// Devices enrolled by an authority, for an active-mode round run in one process.
#[derive(Debug)]
pub struct Enrollment {
    /// The enrollment authority's key (it signs the roster).
    pub authority: DeviceKey,
    /// The signed roster of every device below.
    pub roster: Roster,
    /// One device key per client.
    pub devices: Vec<DeviceKey>,
}

impl Enrollment {
    /// `n` fresh device keys and an authority that enrolls them all, on roster version 1 that
    /// never expires (the round runs in one process, with no clock; the expiry and version
    /// checks are [`Roster::verify`]'s, tested there).
    pub fn new<R: Rng + CryptoRng + ?Sized>(n: usize, rng: &mut R) -> Self {
        let authority = DeviceKey::generate(rng);
        let devices: Vec<DeviceKey> = (0..n).map(|_| DeviceKey::generate(rng)).collect();
        let roster = Roster::sign(
            &authority,
            devices.iter().map(DeviceKey::verifying_key).collect(),
            1,
            u64::MAX,
        );
        Enrollment {
            authority,
            roster,
            devices,
        }
    }

    /// The threat model of a round over this roster.
    pub fn threat_model(&self) -> ThreatModel {
        ThreatModel::Active {
            roster: Some(self.roster.digest()),
        }
    }

    /// Each device's credentials (its key and the roster, verified against the authority).
    pub fn into_credentials(self) -> Result<Vec<Credentials>> {
        self.credentials()
    }

    /// [`Enrollment::into_credentials`] without giving up the enrollment: the same devices can
    /// take part in several rounds.
    pub fn credentials(&self) -> Result<Vec<Credentials>> {
        let trusted = self.roster.clone().verify(
            &self.authority.verifying_key(),
            RosterCheck {
                now: 0,
                min_version: 0,
            },
        )?;
        Ok(self
            .devices
            .iter()
            .map(|device| Credentials {
                device: device.clone(),
                roster: Some(trusted.clone()),
            })
            .collect())
    }
}

/// A round run in one process.
pub struct LocalRound {
    server: Server,
    clients: Vec<Option<Client>>,
    /// Active mode: each client's credentials until it joins.
    credentials: Vec<Option<Credentials>>,
    inputs: Vec<Vec<u64>>,
    /// drop_before[i]: the stage before which client i+1 goes silent (None: never).
    drop_before: Vec<Option<Stage>>,
    /// The policy every client joins under.
    policy: ClientPolicy,
    next: usize,
}

impl std::fmt::Debug for LocalRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRound")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl LocalRound {
    /// Prepares a round: client `i + 1` holds `inputs[i]` and stops answering before stage
    /// `drop_before[i]` (if any).
    pub fn new(
        config: RoundConfig,
        inputs: Vec<Vec<u64>>,
        drop_before: Vec<Option<Stage>>,
    ) -> Result<Self> {
        let n = config.clients as usize;
        if inputs.len() != n || drop_before.len() != n {
            return Err(SecAggError::config(
                "inputs",
                inputs.len(),
                format!("one input and one dropout entry per client ({n})"),
            ));
        }
        let server = Server::new(config)?;
        Ok(LocalRound {
            server,
            clients: (0..n).map(|_| None).collect(),
            credentials: (0..n).map(|_| None).collect(),
            inputs,
            drop_before,
            policy: ClientPolicy::default(),
            next: 0,
        })
    }

    /// Prepares an active-mode round: as [`LocalRound::new`], with one set of credentials per
    /// client (client `i + 1` joins with `credentials[i]`).
    pub fn with_credentials(
        config: RoundConfig,
        inputs: Vec<Vec<u64>>,
        drop_before: Vec<Option<Stage>>,
        credentials: Vec<Credentials>,
    ) -> Result<Self> {
        if credentials.len() != config.clients as usize {
            return Err(SecAggError::config(
                "credentials",
                credentials.len(),
                format!("one per client ({})", config.clients),
            ));
        }
        let mut round = Self::new(config, inputs, drop_before)?;
        round.credentials = credentials.into_iter().map(Some).collect();
        Ok(round)
    }

    /// Every client joins under `policy` instead of [`ClientPolicy::default`] (a refused round
    /// fails at its first stage with [`SecAggError::Refused`]).
    pub fn with_policy(mut self, policy: ClientPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The server (its status and output).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The stage [`LocalRound::run_stage`] will run next, or `None` when the round is over.
    pub fn next_stage(&self) -> Option<Stage> {
        self.server
            .config()
            .stages()
            .get(self.next)
            .copied()
            .filter(|_| matches!(self.server.status(), RoundStatus::Collecting(_)))
    }

    fn active(&self, i: usize, stage: Stage) -> bool {
        self.drop_before[i].is_none_or(|d| stage < d)
    }

    /// Runs the next stage: every client still in it answers, then the server closes the stage.
    pub fn run_stage<R: Rng + CryptoRng + ?Sized>(&mut self, rng: &mut R) -> Result<StageTraffic> {
        self.run_stage_observed(rng, &mut NoObserver)
    }

    /// [`LocalRound::run_stage`], telling `observer` who computes when. Encoding and decoding
    /// of messages count for the party that sends or receives them.
    pub fn run_stage_observed<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        rng: &mut R,
        observer: &mut dyn Observer,
    ) -> Result<StageTraffic> {
        let Some(stage) = self.next_stage() else {
            return Err(SecAggError::State("the round is over".into()));
        };
        let mut traffic = StageTraffic::default();
        for i in 0..self.clients.len() {
            if !self.active(i, stage) {
                continue;
            }
            let id = (i + 1) as ClientId;
            let up = if stage == Stage::AdvertiseKeys {
                observer.start(Party::Client(id));
                let config = self.server.config().clone();
                let created = match self.credentials[i].take() {
                    Some(c) => Client::new_active_with_policy(config, id, c, &self.policy, rng),
                    None => Client::new_with_policy(config, id, &self.policy, rng),
                };
                let up = created.map(|(client, m)| {
                    self.clients[i] = Some(client);
                    encode(&m)
                });
                observer.stop(Party::Client(id));
                up?
            } else {
                if self.clients[i].is_none() {
                    continue;
                }
                observer.start(Party::Server);
                let down = self.server.message_for(id).map(|m| encode(&m));
                observer.stop(Party::Server);
                let Ok(down) = down else {
                    continue; // pruned or dropped by the server
                };
                traffic.down += down.len() as u64;
                observer.start(Party::Client(id));
                let client = self.clients[i].as_mut().expect("checked above");
                // Sized against the round's cap before it is decoded, as on a device.
                let answer = client
                    .handle_bytes(&down, &self.inputs[i], rng)
                    .map(|m| encode(&m));
                observer.stop(Party::Client(id));
                match answer {
                    Ok(up) => up,
                    // The server here is honest: a message over the cap is a wrong cap.
                    Err(e @ SecAggError::TooLarge { .. }) => return Err(e),
                    // A client that aborts sends nothing more.
                    Err(e) if e.is_fatal() => continue,
                    Err(e) => return Err(e),
                }
            };
            traffic.up += up.len() as u64;
            traffic.senders += 1;
            observer.start(Party::Server);
            let received = decode::<ClientMessage>(&up).and_then(|m| self.server.receive(&m));
            observer.stop(Party::Server);
            received?;
        }
        observer.start(Party::Server);
        let closed = self.server.close_stage().map(|_| ());
        observer.stop(Party::Server);
        closed?;
        self.next += 1;
        Ok(traffic)
    }

    /// Runs every remaining stage; the sum, or the reason the round aborted.
    pub fn run<R: Rng + CryptoRng + ?Sized>(&mut self, rng: &mut R) -> Result<Aggregate> {
        while self.next_stage().is_some() {
            self.run_stage(rng)?;
        }
        match self.server.status() {
            RoundStatus::Finished => Ok(self
                .server
                .output()
                .expect("a finished round has an output")
                .clone()),
            RoundStatus::Aborted(reason) => Err(SecAggError::Aborted(reason.clone())),
            RoundStatus::Collecting(_) => unreachable!("loop runs until the round is over"),
        }
    }
}

/// Which server the clients of an in-process round defend against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecAggThreat {
    /// The honest-but-curious protocol (four stages, unsigned keys).
    HonestButCurious,
    /// The active mode with a roster: every device enrolled by an authority the clients trust.
    #[default]
    Active,
    /// The active mode without a roster (the server could add Sybils).
    ActiveWithoutRoster,
}

impl SecAggThreat {
    /// The report's name of the threat model.
    pub fn name(self) -> &'static str {
        match self {
            SecAggThreat::HonestButCurious => "honest-but-curious",
            SecAggThreat::Active | SecAggThreat::ActiveWithoutRoster => "active",
        }
    }

    /// Whether the round's devices are enrolled on a roster.
    pub fn roster(self) -> bool {
        self == SecAggThreat::Active
    }
}

/// A round configuration in `threat` ([`round_config_for`] with a session id drawn from `rng`)
/// and, in the active mode, every client's credentials: the devices are enrolled by a fresh
/// authority ([`Enrollment`], keys from `rng`), and the configuration names their roster.
pub fn prepare_round<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    graph: GraphChoice,
    rng: &mut R,
) -> Result<(RoundConfig, Option<Vec<Credentials>>)> {
    prepare_sized_round(threat, clients, bits, dim, dropout, graph, None, rng)
}

/// [`prepare_round`] with the round sized for the colluding fraction γ =
/// `colluding_fraction` ([`round_config_for_colluding`]: in the active mode the complete
/// graph's threshold is `⌊(n + ⌈γn⌉)/2⌋ + 1` and SecAgg+ is planned for γ); a γ the cohort
/// cannot be sized for is [`SecAggError::InvalidConfig`] naming `colluding_fraction`.
#[allow(clippy::too_many_arguments)]
pub fn prepare_round_for_colluding<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    graph: GraphChoice,
    colluding_fraction: f64,
    rng: &mut R,
) -> Result<(RoundConfig, Option<Vec<Credentials>>)> {
    prepare_sized_round(
        threat,
        clients,
        bits,
        dim,
        dropout,
        graph,
        Some(colluding_fraction),
        rng,
    )
}

/// The one body of [`prepare_round`] (γ = `None`: the planner's default) and
/// [`prepare_round_for_colluding`].
#[allow(clippy::too_many_arguments)]
fn prepare_sized_round<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    clients: u32,
    bits: u32,
    dim: usize,
    dropout: f64,
    graph: GraphChoice,
    colluding_fraction: Option<f64>,
    rng: &mut R,
) -> Result<(RoundConfig, Option<Vec<Credentials>>)> {
    let model = match threat {
        SecAggThreat::HonestButCurious => ThreatModel::HonestButCurious,
        _ => ThreatModel::Active { roster: None },
    };
    let mut session_id = [0u8; 32];
    rng.fill_bytes(&mut session_id);
    let mut config = match colluding_fraction {
        None => round_config_for(model, clients, bits, dim, dropout, graph, session_id)?,
        Some(gamma) => round_config_for_colluding(
            model, clients, bits, dim, dropout, graph, session_id, gamma,
        )?,
    };
    let credentials = match threat {
        SecAggThreat::HonestButCurious => None,
        SecAggThreat::Active => {
            let enrollment = Enrollment::new(clients as usize, rng);
            config.threat_model = enrollment.threat_model();
            Some(enrollment.into_credentials()?)
        }
        SecAggThreat::ActiveWithoutRoster => Some(
            (0..clients)
                .map(|_| Credentials {
                    device: DeviceKey::generate(rng),
                    roster: None,
                })
                .collect(),
        ),
    };
    Ok((config, credentials))
}

/// Sums `inputs` (client `i + 1` holds `inputs[i]`; an empty vector for a client that drops)
/// through a real in-process round in `threat` in which the clients marked in `dropped` share
/// keys and then drop before sending masked input. The protocol's secrets come from `rng` (the
/// OS generator in production simulations). A round with too few survivors is
/// [`SecAggError::Aborted`] and reveals nothing. Every client joins under
/// [`ClientPolicy::default`]; [`secure_sum_with_policy`] takes another policy.
pub fn secure_sum<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    bits: u32,
    dim: usize,
    inputs: Vec<Vec<u64>>,
    dropped: &[bool],
    rng: &mut R,
) -> Result<Aggregate> {
    secure_sum_with_policy(
        threat,
        &ClientPolicy::default(),
        bits,
        dim,
        inputs,
        dropped,
        rng,
    )
}

/// [`secure_sum`] with every client joining under `policy`: a round the policy refuses fails
/// at its first stage with [`SecAggError::Refused`] naming the rule, before any client sends a
/// key.
pub fn secure_sum_with_policy<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    policy: &ClientPolicy,
    bits: u32,
    dim: usize,
    inputs: Vec<Vec<u64>>,
    dropped: &[bool],
    rng: &mut R,
) -> Result<Aggregate> {
    sized_secure_sum(threat, policy, None, bits, dim, inputs, dropped, rng)
}

/// [`secure_sum_with_policy`] in a round sized for the colluding fraction γ =
/// `colluding_fraction` ([`prepare_round_for_colluding`]): the γ the distributed-DP accounting
/// assumes, so one value sizes the round and counts the honest contributors.
#[allow(clippy::too_many_arguments)]
pub fn secure_sum_for_colluding<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    policy: &ClientPolicy,
    colluding_fraction: f64,
    bits: u32,
    dim: usize,
    inputs: Vec<Vec<u64>>,
    dropped: &[bool],
    rng: &mut R,
) -> Result<Aggregate> {
    sized_secure_sum(
        threat,
        policy,
        Some(colluding_fraction),
        bits,
        dim,
        inputs,
        dropped,
        rng,
    )
}

#[allow(clippy::too_many_arguments)]
fn sized_secure_sum<R: Rng + CryptoRng + ?Sized>(
    threat: SecAggThreat,
    policy: &ClientPolicy,
    colluding_fraction: Option<f64>,
    bits: u32,
    dim: usize,
    inputs: Vec<Vec<u64>>,
    dropped: &[bool],
    rng: &mut R,
) -> Result<Aggregate> {
    let n = inputs.len() as u32;
    let dropout = dropped.iter().filter(|&&d| d).count() as f64 / n.max(1) as f64;
    let (config, credentials) = prepare_sized_round(
        threat,
        n,
        bits,
        dim,
        dropout,
        GraphChoice::Auto,
        colluding_fraction,
        rng,
    )?;
    let drops = dropped
        .iter()
        .map(|&d| d.then_some(Stage::MaskedInput))
        .collect();
    let round = match credentials {
        Some(c) => LocalRound::with_credentials(config, inputs, drops, c)?,
        None => LocalRound::new(config, inputs, drops)?,
    };
    round.with_policy(*policy).run(rng)
}
