//! Colluding clients that help a lying server, and a server that grinds the active mode's
//! placement to put them around a target.
//!
//! **The adversary.** A server that owns the wire (as in [`super::lying_server`]) and `C`
//! colluding clients: real enrolled devices that run the protocol, hand the server the shares
//! sealed to them (their cipher secret key opens them) and sign any survivor set U3 it asks for
//! (a twin of each colluder — the same device, the same randomness — signs the second story).
//! The server aims at one honest target `u`.
//!
//! **The split.** The server shows `u`, a set A of `u`'s honest neighbours and the colluders a
//! story in which `u` survived (A answers with shares of the self-mask seed `b_u`), and the
//! other honest neighbours B and the twins a story in which `u` dropped (B answers with shares of
//! `s_u`, the key that removes all of `u`'s pairwise masks). With `t` shares of each it unmasks
//! `y_u`. In the honest-but-curious mode the stories are unmasking requests, and the split needs
//! `|A| + C_u ≥ t` and `|B| + C_u ≥ t` with `C_u` colluders among `u`'s `k` neighbours:
//! `2t ≤ k + C_u`, the bound of Bell et al. and of the planner's secrets bound. In the active
//! mode every honest neighbour of `u` also needs `t` signatures of its own neighbours on the U3
//! it signed; clients next to `u`'s neighbours sign whichever story helps, and the split is
//! searched for exhaustively. The measured bound (`tests/it/colluders.rs`): on a Harary graph
//! the same `2t ≤ k + C_u`; on the complete graph one colluder more, `2t + 1 ≤ k + C_u`, because
//! `u` signs only a U3 that holds it and nobody outside its neighbourhood can sign for B.
//!
//! * [`colluders`]: the colluders are the `C` of `u`'s neighbours that suit the attack best
//!   (searched) — the worst case, what unlimited grinding buys.
//! * [`grind_placement`] / [`grinding`]: the colluders are fixed clients (the `C` highest ids
//!   other than the target, i.e. placed independently of the graph, as the planner assumes).
//!   The active graph is a Harary ring permuted by `HKDF(session id; key-list binding)`
//!   ([`crypto::active_graph_seed`]); the server cannot choose it, only re-try it: one colluder
//!   re-draws its round keys, which changes the signed key list and so the permutation. Each of
//!   the `attempts` placements is scored by the colluders it puts among `u`'s neighbours (the
//!   planner charges `2^grinding_bits` times the probability of `≥ 2t − k`,
//!   [`crate::plan::secrets_bound_log2_colluders`]); [`grinding`] then plays the split on the
//!   best placement. In the honest-but-curious mode the graph is a function of the session id
//!   the server draws, so each attempt is a fresh session id: the server places freely.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::ChaCha20Rng;
use rand::{CryptoRng, Rng, SeedableRng};
use serde::Serialize;
use x25519_dalek::{PublicKey, StaticSecret};

use crate::client::Client;
use crate::config::{ClientId, Graph, RoundConfig};
use crate::crypto;
use crate::error::{Result, SecAggError};
use crate::identity::Credentials;
use crate::mask::{Sign, apply_mask};
use crate::messages::{
    ClientPayload, Header, PeerKeys, SealedShares, ServerMessage, ServerPayload, SharePlaintext,
    SignedKeys, SurvivorSignature, key_list_binding, unpack,
};
use crate::plan::secrets_bound_log2_colluders;
use crate::shamir::{self, Share};

/// The largest number of clients whose side of the split is searched exhaustively on a graph
/// that is neither complete nor honest-but-curious (`2^20` candidate splits).
pub const MAX_SPLIT_SEARCH: usize = 20;

/// What colluding clients and a lying server obtained against one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CollusionReport {
    /// The round's threat model.
    pub threat_model: &'static str,
    /// The client whose input the server tried to learn.
    pub target: ClientId,
    /// Every colluding client.
    pub colluders: Vec<ClientId>,
    /// The colluders among the target's neighbours (`C_u`): they hold shares of its secrets.
    pub colluding_neighbours: u32,
    /// The fewest colluding neighbours with which the split can succeed, by the analysis:
    /// `2t − k`, and `2t + 1 − k` on the active mode's complete graph.
    pub bound_colluding_neighbours: u32,
    /// Whether the search found a split in which every honest client the server needs answers.
    pub split_found: bool,
    /// Whether the server computed the target's exact input from the real clients' answers.
    pub recovered_input: bool,
    /// Honest clients that aborted (short of signatures on their story).
    pub clients_aborted: usize,
    /// What stopped the attack, or how it succeeded.
    pub detail: String,
}

/// What a server that re-tries the placement `attempts` times reached.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrindingPlacement {
    /// Placements tried (the first is the round's own; each further one a re-drawn key list,
    /// or a fresh session id in the honest-but-curious mode).
    pub attempts: u64,
    /// The colluding clients (fixed before the round).
    pub colluders: u32,
    /// Neighbours per client, `k`.
    pub degree: u32,
    /// Threshold `t`.
    pub threshold: u32,
    /// `2t − k`: the colluding neighbours the planner's secrets bound counts.
    pub needed_colluding_neighbours: u32,
    /// The most colluders one placement put among the target's neighbours.
    pub best_colluding_neighbours: u32,
    /// Placements with at least `needed_colluding_neighbours` colluders around the target.
    pub placements_reaching_need: u64,
    /// Whether some placement admits the split ([`CollusionReport::split_found`]).
    pub split_placement_found: bool,
    /// The planner's probability that one uniform placement reaches the need around a given
    /// client: `P[X ≥ 2t − k]`, `X ~ Hypergeometric(n − 1, C, k)` (its secrets bound over `n`).
    pub placement_probability: f64,
    /// What the planner charges `attempts` tries against one target: `min(1, attempts · p)`.
    pub planner_charge: f64,
    /// log2 of the planner's bound for any client and any of the attempts:
    /// `secrets_bound_log2 + log2(attempts)` (`"-inf"` in JSON when no placement can reach the
    /// need).
    #[serde(serialize_with = "crate::plan::log2_json")]
    pub planner_bound_log2: f64,
}

/// Plays colluding clients and a lying server against real clients holding `inputs` (client
/// `i + 1` holds `inputs[i]`), aiming at `target`, with `colluders` of the target's neighbours
/// colluding — the `colluders` that suit the split best, searched (the placement a server that
/// could grind without limit would buy; more colluders than neighbours fill the neighbourhood
/// and the rest sit elsewhere). An active round needs `credentials(rng)` to give each client its
/// credentials; it is called twice (the colluders' twins are the same devices).
pub fn colluders<R: Rng + CryptoRng + ?Sized>(
    config: &RoundConfig,
    inputs: &[Vec<u64>],
    target: ClientId,
    colluders: u32,
    credentials: &mut dyn FnMut(&mut R) -> Result<Vec<Credentials>>,
    rng: &mut R,
) -> Result<CollusionReport> {
    check(config, inputs, target, colluders)?;
    let round = Round::join(config, inputs, credentials, rng)?;
    let (graph, t) = (&round.graph, config.threshold as usize);
    let around = graph.neighbours(target);
    let c = colluders as usize;
    let (set, side) = if c >= around.len() {
        // The neighbourhood is full; the rest collude elsewhere.
        let mut set: BTreeSet<ClientId> = around.iter().copied().collect();
        let extra: Vec<ClientId> = graph
            .members()
            .iter()
            .copied()
            .filter(|v| *v != target && !set.contains(v))
            .take(c - around.len())
            .collect();
        set.extend(extra);
        let side = find_split(graph, target, &set, t, round.active)?;
        (set, side)
    } else if graph.is_complete() {
        // Every neighbour is alike: the first `C` are as good as any.
        let set: BTreeSet<ClientId> = around.iter().copied().take(c).collect();
        let side = find_split(graph, target, &set, t, round.active)?;
        (set, side)
    } else {
        if around.len() > MAX_SPLIT_SEARCH {
            return Err(too_large(around.len()));
        }
        let mut found = None;
        for pick in 0u64..(1 << around.len()) {
            if pick.count_ones() as usize != c {
                continue;
            }
            let set: BTreeSet<ClientId> = (0..around.len())
                .filter(|i| pick >> i & 1 == 1)
                .map(|i| around[i])
                .collect();
            if let Some(side) = find_split(graph, target, &set, t, round.active)? {
                found = Some((set, Some(side)));
                break;
            }
        }
        found.unwrap_or_else(|| (around.iter().copied().take(c).collect(), None))
    };
    round.play(target, &set, side)
}

/// Re-tries the placement `attempts` times against `target` with `colluders` colluding clients
/// (the highest ids other than the target) and reports what the best placement reached and what
/// the planner charges for it; see the module documentation for the model. `inputs` are the
/// clients' inputs (unused until [`grinding`] plays the round).
pub fn grind_placement<R: Rng + CryptoRng + ?Sized>(
    config: &RoundConfig,
    inputs: &[Vec<u64>],
    target: ClientId,
    colluders: u32,
    attempts: u64,
    credentials: &mut dyn FnMut(&mut R) -> Result<Vec<Credentials>>,
    rng: &mut R,
) -> Result<GrindingPlacement> {
    Ok(grind(
        config,
        inputs,
        target,
        colluders,
        attempts,
        credentials,
        rng,
    )?
    .0)
}

/// [`grind_placement`], then the split of [`colluders`] played on the best placement found (the
/// first that admits the split, else the one with the most colluders around the target).
pub fn grinding<R: Rng + CryptoRng + ?Sized>(
    config: &RoundConfig,
    inputs: &[Vec<u64>],
    target: ClientId,
    colluders: u32,
    attempts: u64,
    credentials: &mut dyn FnMut(&mut R) -> Result<Vec<Credentials>>,
    rng: &mut R,
) -> Result<(GrindingPlacement, CollusionReport)> {
    let (placement, round, set, side) = grind(
        config,
        inputs,
        target,
        colluders,
        attempts,
        credentials,
        rng,
    )?;
    let report = round.play(target, &set, side)?;
    Ok((placement, report))
}

/// The grinding loop: the placement report, the round on the chosen placement, the colluders
/// and the split found there (empty when none).
#[allow(clippy::type_complexity)]
fn grind<'a, R: Rng + CryptoRng + ?Sized>(
    config: &RoundConfig,
    inputs: &'a [Vec<u64>],
    target: ClientId,
    colluders: u32,
    attempts: u64,
    credentials: &mut dyn FnMut(&mut R) -> Result<Vec<Credentials>>,
    rng: &mut R,
) -> Result<(
    GrindingPlacement,
    Round<'a>,
    BTreeSet<ClientId>,
    Option<BTreeMap<ClientId, bool>>,
)> {
    check(config, inputs, target, colluders)?;
    if attempts == 0 {
        return Err(SecAggError::config(
            "grinding_attempts",
            attempts,
            "must be at least 1",
        ));
    }
    let n = config.clients;
    let set: BTreeSet<ClientId> = (1..=n)
        .rev()
        .filter(|&v| v != target)
        .take(colluders as usize)
        .collect();
    let t = config.threshold as usize;
    let active = config.threat_model.is_active();
    // The graph of an attempt and the colluders it puts around the target.
    let score = |graph: &Graph| -> usize {
        graph
            .neighbours(target)
            .iter()
            .filter(|v| set.contains(v))
            .count()
    };
    let mut best_near = 0usize;
    let mut reaching = 0u64;
    let mut chosen: Option<(Choice, BTreeMap<ClientId, bool>)> = None;
    let mut best: Option<Choice> = None;
    let mut degree = 0u32;
    let mut need = 0usize;
    // In the active mode the honest clients' round 1 is fixed; a colluder re-draws.
    let mut round = if active {
        Some(Round::join(config, inputs, credentials, rng)?)
    } else {
        None
    };
    let grinder = set.iter().next().copied();
    let mut session = config.session_id;
    for attempt in 0..attempts {
        let choice = match (&mut round, grinder) {
            (Some(r), Some(g)) if attempt > 0 => Choice::Seed(r.redraw(g, rng)?),
            (Some(r), _) => Choice::Seed(r.seeds[grinder.unwrap_or(1) as usize - 1]),
            (None, _) => {
                if attempt > 0 {
                    rng.fill_bytes(&mut session);
                }
                Choice::Session(session)
            }
        };
        let hbc_graph;
        let graph = match &round {
            Some(r) => &r.graph,
            None => {
                hbc_graph = RoundConfig {
                    session_id: session,
                    ..config.clone()
                }
                .validate()?;
                &hbc_graph
            }
        };
        degree = graph.neighbours(target).len() as u32;
        need = (2 * t).saturating_sub(degree as usize);
        let near = score(graph);
        reaching += u64::from(near >= need);
        if near > best_near || best.is_none() {
            best_near = near;
            best = Some(choice);
        }
        if chosen.is_none()
            && near >= need
            && let Some(side) = find_split(graph, target, &set, t, active)?
        {
            chosen = Some((choice, side));
        }
        if grinder.is_none() {
            // Without colluders every placement is alike.
            break;
        }
    }
    let split_placement_found = chosen.is_some();
    let (choice, side) = match chosen {
        Some((c, side)) => (c, Some(side)),
        None => (best.expect("at least one attempt"), None),
    };
    let round = match (round, choice) {
        (Some(mut r), Choice::Seed(seed)) => {
            if let Some(g) = grinder {
                r.reseed(g, seed)?;
            }
            r
        }
        (_, Choice::Session(session_id)) => {
            let config = RoundConfig {
                session_id,
                ..config.clone()
            };
            Round::join(&config, inputs, credentials, rng)?
        }
        (None, Choice::Seed(_)) => unreachable!("seeds are chosen in the active mode only"),
    };
    let per_placement_log2 =
        secrets_bound_log2_colluders(n, degree, t as u32, colluders) - f64::from(n).log2();
    let p = per_placement_log2.exp2();
    let placement = GrindingPlacement {
        attempts,
        colluders,
        degree,
        threshold: t as u32,
        needed_colluding_neighbours: need as u32,
        best_colluding_neighbours: best_near as u32,
        placements_reaching_need: reaching,
        split_placement_found,
        placement_probability: p,
        planner_charge: (attempts as f64 * p).min(1.0),
        planner_bound_log2: per_placement_log2 + f64::from(n).log2() + (attempts as f64).log2(),
    };
    Ok((placement, round, set, side))
}

/// What a grinding attempt fixed: the grinding colluder's randomness (active) or the session id
/// (honest-but-curious).
#[derive(Debug, Clone, Copy)]
enum Choice {
    Seed([u8; 32]),
    Session([u8; 32]),
}

fn check(
    config: &RoundConfig,
    inputs: &[Vec<u64>],
    target: ClientId,
    colluders: u32,
) -> Result<()> {
    super::check_round(config, inputs, target)?;
    if colluders >= config.clients {
        return Err(SecAggError::config(
            "colluders",
            colluders,
            format!(
                "must be below the cohort ({}): the target is honest",
                config.clients
            ),
        ));
    }
    Ok(())
}

fn too_large(free: usize) -> SecAggError {
    SecAggError::config(
        "graph",
        free,
        format!(
            "the split search covers at most {MAX_SPLIT_SEARCH} clients around the target; use \
             a smaller degree"
        ),
    )
}

/// The split's sides (`true`: A, the story with the target) for the honest neighbours of `u`
/// and their other neighbours, such that both secrets get `t` shares and, in the active mode,
/// every honest neighbour of `u` holds `t` signatures of its neighbours on its own story;
/// `None` when there is none.
fn find_split(
    graph: &Graph,
    u: ClientId,
    colluding: &BTreeSet<ClientId>,
    t: usize,
    active: bool,
) -> Result<Option<BTreeMap<ClientId, bool>>> {
    let around = graph.neighbours(u);
    let near = around.iter().filter(|v| colluding.contains(v)).count();
    let honest: Vec<ClientId> = around
        .iter()
        .copied()
        .filter(|v| !colluding.contains(v))
        .collect();
    let outside: BTreeSet<ClientId> = honest
        .iter()
        .flat_map(|&w| graph.neighbours(w))
        .filter(|&x| x != u && !around.contains(&x) && !colluding.contains(&x))
        .collect();
    let free: Vec<ClientId> = honest.iter().copied().chain(outside).collect();
    let feasible = |side: &BTreeMap<ClientId, bool>| -> bool {
        let a = honest.iter().filter(|v| side[v]).count();
        if a + near < t || honest.len() - a + near < t {
            return false;
        }
        honest.iter().all(|&w| {
            let mine = side[&w];
            let neighbours = graph.neighbours(w);
            if !active {
                // Told the target dropped, a client keeps its other neighbours as survivors.
                return mine || neighbours.len() > t;
            }
            let signers = neighbours
                .into_iter()
                .filter(|x| {
                    colluding.contains(x)
                        || (*x == u && mine)
                        || side.get(x).is_some_and(|&s| s == mine)
                })
                .count();
            signers >= t
        })
    };
    let split = |on_a: &dyn Fn(usize) -> bool| -> BTreeMap<ClientId, bool> {
        free.iter()
            .enumerate()
            .map(|(i, &x)| (x, on_a(i)))
            .collect()
    };
    if !active || graph.is_complete() {
        // Only the number of honest neighbours on A matters (the complete graph is symmetric;
        // honest-but-curious clients check no signatures).
        for a in 0..=honest.len() {
            let side = split(&|i| i < a || i >= honest.len());
            if feasible(&side) {
                return Ok(Some(side));
            }
        }
        return Ok(None);
    }
    if free.len() > MAX_SPLIT_SEARCH {
        return Err(too_large(free.len()));
    }
    for mask in 0u64..(1 << free.len()) {
        let side = split(&|i| mask >> i & 1 == 1);
        if feasible(&side) {
            return Ok(Some(side));
        }
    }
    Ok(None)
}

/// One party: a real client and the randomness it runs on.
struct Party {
    id: ClientId,
    twin: bool,
    client: Client,
    rng: ChaCha20Rng,
}

/// Round 1 as the attacker holds it: every client, its randomness, what it advertised, and the
/// graph and key-derivation binding the clients derive from an honest relay.
struct Round<'a> {
    config: RoundConfig,
    inputs: &'a [Vec<u64>],
    active: bool,
    seeds: Vec<[u8; 32]>,
    parties: Vec<Party>,
    round1: Vec<ClientPayload>,
    credentials: Option<Vec<Credentials>>,
    twin_credentials: Option<Vec<Credentials>>,
    graph: Graph,
    kb: [u8; 32],
}

fn copy(c: &Credentials) -> Credentials {
    Credentials {
        device: c.device.clone(),
        roster: c.roster.clone(),
    }
}

impl<'a> Round<'a> {
    fn join<R: Rng + CryptoRng + ?Sized>(
        config: &RoundConfig,
        inputs: &'a [Vec<u64>],
        credentials: &mut dyn FnMut(&mut R) -> Result<Vec<Credentials>>,
        rng: &mut R,
    ) -> Result<Self> {
        let active = config.threat_model.is_active();
        let (creds, twins) = if active {
            (Some(credentials(rng)?), Some(credentials(rng)?))
        } else {
            (None, None)
        };
        let mut round = Round {
            config: config.clone(),
            inputs,
            active,
            seeds: Vec::new(),
            parties: Vec::new(),
            round1: Vec::new(),
            credentials: creds,
            twin_credentials: twins,
            graph: config.validate()?,
            kb: config.binding(),
        };
        for id in 1..=config.clients {
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            let (party, payload) = round.party(id, seed, false)?;
            round.seeds.push(seed);
            round.parties.push(party);
            round.round1.push(payload);
        }
        round.derive();
        Ok(round)
    }

    /// Client `id` (or its twin) on randomness `seed`, and its round-1 payload.
    fn party(&self, id: ClientId, seed: [u8; 32], twin: bool) -> Result<(Party, ClientPayload)> {
        let mut rng = ChaCha20Rng::from_seed(seed);
        let creds = if twin {
            &self.twin_credentials
        } else {
            &self.credentials
        };
        let (client, message) = match creds {
            Some(c) => {
                let cred = c
                    .get(id as usize - 1)
                    .ok_or_else(|| SecAggError::config("credentials", c.len(), "one per client"))?;
                Client::new_active(self.config.clone(), id, copy(cred), &mut rng)?
            }
            None => Client::new(self.config.clone(), id, &mut rng)?,
        };
        Ok((
            Party {
                id,
                twin,
                client,
                rng,
            },
            message.payload,
        ))
    }

    fn entries(&self) -> Vec<SignedKeys> {
        super::signed_entries(&self.round1)
    }

    fn peer_keys(&self, id: ClientId) -> Option<PeerKeys> {
        super::advertised_keys(&self.round1, id)
    }

    /// The graph and binding every client derives from the current round 1.
    fn derive(&mut self) {
        if self.active {
            let entries = self.entries();
            self.kb = key_list_binding(&self.config.binding(), &entries);
            self.graph = Graph::for_members(
                entries.iter().map(|e| e.id).collect(),
                self.config.graph,
                &crypto::active_graph_seed(&self.config.session_id, &self.kb),
            );
        }
    }

    /// Client `id` re-draws its round keys from fresh randomness: a new key list, a new
    /// placement. Returns the randomness.
    fn redraw<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        id: ClientId,
        rng: &mut R,
    ) -> Result<[u8; 32]> {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        self.reseed(id, seed)?;
        Ok(seed)
    }

    fn reseed(&mut self, id: ClientId, seed: [u8; 32]) -> Result<()> {
        let (party, payload) = self.party(id, seed, false)?;
        let i = id as usize - 1;
        self.seeds[i] = seed;
        self.parties[i] = party;
        self.round1[i] = payload;
        self.derive();
        Ok(())
    }

    fn ask(&mut self, p: usize, payload: ServerPayload) -> Option<ClientPayload> {
        let party = &mut self.parties[p];
        let message = ServerMessage {
            header: Header::new(self.config.binding(), party.id),
            payload,
        };
        party
            .client
            .handle(
                &message,
                &self.inputs[party.id as usize - 1],
                &mut party.rng,
            )
            .ok()
            .map(|m| m.payload)
    }

    /// Plays the split with `colluding` and `side` (`None`: no split was found; then `t − C_u`
    /// honest neighbours are shown A and the rest B anyway, and the clients' checks decide).
    fn play(
        mut self,
        u: ClientId,
        colluding: &BTreeSet<ClientId>,
        side: Option<BTreeMap<ClientId, bool>>,
    ) -> Result<CollusionReport> {
        let t = self.config.threshold as usize;
        let graph = self.graph.clone();
        let around = graph.neighbours(u);
        let near: BTreeSet<ClientId> = around
            .iter()
            .copied()
            .filter(|v| colluding.contains(v))
            .collect();
        let split_found = side.is_some();
        let side = if let Some(side) = side {
            side
        } else {
            let a = t.saturating_sub(near.len());
            around
                .iter()
                .copied()
                .filter(|v| !colluding.contains(v))
                .enumerate()
                .map(|(i, x)| (x, i < a))
                .collect()
        };
        let bound = (2 * t + usize::from(self.active && graph.is_complete()))
            .saturating_sub(around.len()) as u32;
        let mut report = CollusionReport {
            threat_model: self.config.threat_model.name(),
            target: u,
            colluders: colluding.iter().copied().collect(),
            colluding_neighbours: near.len() as u32,
            bound_colluding_neighbours: bound,
            split_found,
            recovered_input: false,
            clients_aborted: 0,
            detail: String::new(),
        };
        // The colluders' twins: the same devices on the same randomness (active mode).
        if self.active {
            for &v in colluding {
                let (twin, _) = self.party(v, self.seeds[v as usize - 1], true)?;
                self.parties.push(twin);
            }
        }
        let n = self.config.clients as usize;
        let entries = self.entries();
        // Round 1 relayed honestly.
        let mut sealed: BTreeMap<ClientId, Vec<SealedShares>> = BTreeMap::new();
        for p in 0..self.parties.len() {
            let id = self.parties[p].id;
            let payload = if self.active {
                ServerPayload::SignedKeyList {
                    entries: entries.clone(),
                }
            } else {
                ServerPayload::Keys {
                    peers: graph
                        .neighbours(id)
                        .into_iter()
                        .filter_map(|v| self.peer_keys(v))
                        .collect(),
                }
            };
            match self.ask(p, payload) {
                Some(ClientPayload::ShareKeys { shares }) => {
                    sealed.entry(id).or_insert(shares);
                }
                _ => return Ok(self.finish(report, format!("client {id} refused the key list"))),
            }
        }
        // Every ciphertext delivered.
        let mut y_u = None;
        for p in 0..self.parties.len() {
            let id = self.parties[p].id;
            let shares: Vec<SealedShares> = sealed
                .iter()
                .filter_map(|(&v, list)| {
                    let s = list.iter().find(|s| s.peer == id)?;
                    Some(SealedShares {
                        peer: v,
                        ciphertext: s.ciphertext.clone(),
                    })
                })
                .collect();
            match self.ask(p, ServerPayload::Shares { shares }) {
                Some(ClientPayload::MaskedInput { packed }) => {
                    if id == u && !self.parties[p].twin {
                        y_u = Some(packed);
                    }
                }
                _ => return Ok(self.finish(report, format!("client {id} sent no masked input"))),
            }
        }
        let Some(y_u) = y_u else {
            return Ok(self.finish(report, "the target sent no masked input".into()));
        };
        // The two stories: a colluder tells A, its twin B; clients far from u tell A.
        let on_a = |party: &Party| -> bool {
            if colluding.contains(&party.id) {
                !party.twin
            } else {
                party.id == u || side.get(&party.id).copied().unwrap_or(true)
            }
        };
        let with_u: Vec<ClientId> = (1..=n as ClientId).collect();
        let without_u: Vec<ClientId> = with_u.iter().copied().filter(|&v| v != u).collect();
        let mut answers: Vec<ClientPayload> = Vec::new();
        let asked: Vec<usize> = (0..self.parties.len())
            .filter(|&p| {
                let party = &self.parties[p];
                !party.twin && around.contains(&party.id) && !colluding.contains(&party.id)
            })
            .collect();
        if self.active {
            let mut sigs: [Vec<SurvivorSignature>; 2] = [Vec::new(), Vec::new()];
            for p in 0..self.parties.len() {
                let story = usize::from(!on_a(&self.parties[p]));
                let u3 = if story == 0 { &with_u } else { &without_u };
                if let Some(ClientPayload::Consistency { signature }) =
                    self.ask(p, ServerPayload::Survivors { u3: u3.clone() })
                {
                    sigs[story].push(SurvivorSignature {
                        id: self.parties[p].id,
                        signature,
                    });
                }
            }
            for s in &mut sigs {
                s.sort_by_key(|s| s.id);
            }
            for &p in &asked {
                let id = self.parties[p].id;
                let story = usize::from(!on_a(&self.parties[p]));
                let signatures: Vec<SurvivorSignature> = sigs[story]
                    .iter()
                    .filter(|s| graph.are_neighbours(id, s.id))
                    .copied()
                    .collect();
                if let Some(a) = self.ask(p, ServerPayload::SignedSurvivors { signatures }) {
                    answers.push(a);
                }
            }
        } else {
            for &p in &asked {
                let id = self.parties[p].id;
                let mine = on_a(&self.parties[p]);
                let mut survivors: Vec<ClientId> = graph
                    .neighbours(id)
                    .into_iter()
                    .filter(|&v| mine || v != u)
                    .collect();
                survivors.push(id);
                survivors.sort_unstable();
                let dropped = if mine { Vec::new() } else { vec![u] };
                if let Some(a) = self.ask(p, ServerPayload::Unmask { survivors, dropped }) {
                    answers.push(a);
                }
            }
        }
        let (mut b_shares, mut s_shares): (Vec<Share>, Vec<Share>) = (Vec::new(), Vec::new());
        for a in &answers {
            if let ClientPayload::Unmasking {
                self_mask,
                mask_key,
            } = a
            {
                b_shares.extend(
                    self_mask
                        .iter()
                        .filter(|o| o.owner == u)
                        .map(|o| o.share.clone()),
                );
                s_shares.extend(
                    mask_key
                        .iter()
                        .filter(|o| o.owner == u)
                        .map(|o| o.share.clone()),
                );
            }
        }
        // The colluders around u open the shares u sealed to them: their cipher secret key is
        // the first draw of their randomness (checked against the key they advertised).
        let own = self
            .peer_keys(u)
            .ok_or_else(|| SecAggError::config("target", u, "advertised no keys"))?;
        for &v in &near {
            let cipher_sk = StaticSecret::random_from_rng(&mut ChaCha20Rng::from_seed(
                self.seeds[v as usize - 1],
            ));
            let keys = self
                .peer_keys(v)
                .ok_or_else(|| SecAggError::config("colluders", v, "advertised no keys"))?;
            if PublicKey::from(&cipher_sk).to_bytes() != keys.cipher_pk {
                return Err(SecAggError::config(
                    "colluders",
                    v,
                    "the colluder's cipher key is not the first draw of its randomness",
                ));
            }
            let Some(to_v) = sealed.get(&u).and_then(|l| l.iter().find(|s| s.peer == v)) else {
                continue;
            };
            let plain = crypto::open(&cipher_sk, &own.cipher_pk, &self.kb, u, v, &to_v.ciphertext)?;
            let shares = SharePlaintext::from_bytes(&plain)?;
            s_shares.push(shares.mask_key);
            b_shares.push(shares.self_mask);
        }
        let (b, s) = (b_shares.len(), s_shares.len());
        let (Ok(b_u), Ok(s_u)) = (shamir::combine(&b_shares, t), shamir::combine(&s_shares, t))
        else {
            let detail = format!(
                "{b} shares of the target's self-mask seed and {s} of its mask key came back, \
                 {t} of each needed"
            );
            return Ok(self.finish(report, detail));
        };
        let s_u = StaticSecret::from(*s_u);
        let bits = self.config.bits;
        let mut x = unpack(&y_u, bits, self.config.dim)?;
        apply_mask(&mut x, &b_u, bits, Sign::Subtract);
        for v in &around {
            let Some(keys) = self.peer_keys(*v) else {
                continue;
            };
            let seed = crypto::pair_mask_seed(&s_u, &keys.mask_pk, &self.kb, u, *v)?;
            let sign = if u < *v { Sign::Subtract } else { Sign::Add };
            apply_mask(&mut x, &seed, bits, sign);
        }
        report.recovered_input = x == self.inputs[u as usize - 1];
        let detail = if report.recovered_input {
            format!(
                "the target's input recovered from {b} shares of its self-mask seed and {s} of its \
                 mask key, {} of them from colluders",
                2 * near.len()
            )
        } else {
            "the unmasked vector is not the target's input".into()
        };
        Ok(self.finish(report, detail))
    }

    fn finish(&self, mut report: CollusionReport, detail: String) -> CollusionReport {
        report.clients_aborted = self
            .parties
            .iter()
            .filter(|p| !p.twin && !report.colluders.contains(&p.id) && p.client.is_aborted())
            .count();
        report.detail = detail;
        report
    }
}
