//! A server that grinds the active mode's placement to put its colluders around a target.
//!
//! The active graph is a Harary ring permuted by `HKDF(session id; key-list binding)`
//! (`crypto::active_graph_seed`); the server cannot choose the permutation, only re-try it: each
//! change of the round-1 key list (a colluder re-drawing its own round keys, or a member added to
//! or dropped from U1) gives a fresh SHA-256 binding, modelled here as 32 fresh random bytes (the
//! random-oracle view of the hash). The test measures how often `2^g` tries put at least
//! `2t − k` colluders among a target's `k` neighbours — the neighbourhood in which its secrets
//! leak — and compares it with what the planner charges (`plan::secrets_bound_log2` times
//! `2^grinding_bits`).

use privfed_secagg::plan::secrets_bound_log2;
use privfed_secagg::{Graph, GraphSpec, crypto};
use rand::RngExt;

use crate::rng;

/// `P[Binomial(n, p) ≥ k]`, summed exactly in f64 (n in the thousands at most).
fn binomial_sf(n: u64, p: f64, k: u64) -> f64 {
    let mut pmf = (1.0 - p).powi(n as i32);
    let mut sf = 0.0;
    for i in 0..=n {
        if i >= k {
            sf += pmf;
        }
        pmf *= (n - i) as f64 / (i + 1) as f64 * p / (1.0 - p);
    }
    sf.min(1.0)
}

/// `P[Binomial(n, p) ≤ k]`.
fn binomial_cdf(n: u64, p: f64, k: u64) -> f64 {
    1.0 - binomial_sf(n, p, k + 1)
}

/// `C(n, r)` exactly.
fn choose(n: u64, r: u64) -> u128 {
    (0..r).fold(1u128, |acc, i| acc * u128::from(n - i) / u128::from(i + 1))
}

/// 48 clients, 6 of them colluders (γ = 1/8), Harary degree `k = 6`, `t = 5`: the target's
/// secrets leak when at least `2t − k = 4` colluders are among its 6 neighbours; one placement
/// does that with probability `p = Σ_{i≥4} C(6,i)·C(41,6−i)/C(47,6) ≈ 1.17·10⁻³`. The server
/// tries `2^g = 128` placements per round, in 300 rounds (38,400 placements).
///
/// * The planner's per-client bound (`secrets_bound_log2 / n`) is exactly `p`.
/// * Per placement, the success count is Binomial(38,400, p) (two-sided, α = 10⁻⁶ each side):
///   the derived placement is as good as uniform for this event, and the server cannot do better
///   than chance per try.
/// * Per round, the server succeeds in at most the charged `2^g·p` of rounds (one-sided,
///   α = 10⁻⁶): the planner's `grinding_bits` charge holds; and in at least
///   `1 − (1 − p)^(2^g)` (one-sided, α = 10⁻⁶): grinding does buy what the analysis says.
///
/// Stated false-positive rate: at most 4·10⁻⁶. A placement the server could choose (the ids
/// in join order, a constant seed) makes every round succeed or none, and fails the test.
#[test]
fn a_grinding_server_succeeds_as_often_as_the_planner_charges() {
    let (n, colluders, k, t, g) = (48u32, 6u32, 6u32, 5u32, 7u32);
    let tries = 1u64 << g;
    let rounds = 300u64;
    let need = 2 * t - k;
    let others = u64::from(n - 1);
    let c = u64::from(colluders);
    let p = (u64::from(need)..=c.min(u64::from(k)))
        .map(|i| choose(c, i) * choose(others - c, u64::from(k) - i))
        .sum::<u128>() as f64
        / choose(others, u64::from(k)) as f64;
    let corrupt = f64::from(colluders) / f64::from(n);
    let charged = 2f64.powf(secrets_bound_log2(n, k, t, corrupt)) / f64::from(n);
    assert!(
        (charged / p - 1.0).abs() < 1e-9,
        "charged {charged}, exact {p}"
    );

    let members: Vec<u32> = (1..=n).collect();
    let is_colluder = |id: u32| id > n - colluders;
    let target = 1;
    let mut r = rng(77);
    let (mut placements_won, mut rounds_won) = (0u64, 0u64);
    for _ in 0..rounds {
        let mut session = [0u8; 32];
        r.fill(&mut session[..]);
        let mut won = false;
        for _ in 0..tries {
            let mut binding = [0u8; 32];
            r.fill(&mut binding[..]);
            let graph = Graph::for_members(
                members.clone(),
                GraphSpec::Harary { degree: k },
                &crypto::active_graph_seed(&session, &binding),
            );
            let around = graph.neighbours(target);
            assert_eq!(around.len(), k as usize);
            if around.iter().filter(|&&v| is_colluder(v)).count() >= need as usize {
                placements_won += 1;
                won = true;
            }
        }
        rounds_won += u64::from(won);
    }
    let alpha = 1e-6;
    let total = rounds * tries;
    assert!(
        binomial_sf(total, p, placements_won) > alpha
            && binomial_cdf(total, p, placements_won) > alpha,
        "{placements_won} of {total} placements put {need} colluders around the target, \
         expected {:.1}",
        total as f64 * p
    );
    let charged_round = (tries as f64 * charged).min(1.0);
    assert!(
        binomial_sf(rounds, charged_round, rounds_won) > alpha,
        "{rounds_won} of {rounds} grinding rounds succeeded, more than the charged {:.3}",
        charged_round
    );
    let exact_round = 1.0 - (1.0 - p).powi(tries as i32);
    assert!(
        binomial_cdf(rounds, exact_round, rounds_won) > alpha,
        "{rounds_won} of {rounds} grinding rounds succeeded, fewer than {exact_round:.3}"
    );
}

/// Colluders and a lying server against real active-mode clients on `spec` over `n` clients
/// (degree `k`), threshold `t`. After round 1 fixes the placement, the server's `C` colluders
/// are `C` of the target's neighbours (the worst case, what grinding buys; searched) and give
/// it everything they hold: the shares of `u`'s secrets sealed to them (opened with their
/// cipher key) and a signature on any U3 (a twin of each colluder's state — same credentials,
/// same randomness — signs the second story). The server shows the target `u = 1`, a set A of
/// its honest neighbours and the colluders a U3 with `u` (A answers with shares of `b_u`), and
/// the other honest neighbours B and the twins a U3 without `u` (B answers with shares of
/// `s_u`, the key that removes all of `u`'s pairwise masks). Clients next to `u`'s neighbours
/// sign whichever story helps; the split is searched exhaustively for one in which every honest
/// neighbour of `u` sees `t` signatures of its neighbours on its own U3 and both secrets get
/// `t` shares. Returns whether such a split existed, whether `x_u` was recovered from the real
/// clients' answers, and how many honest clients aborted.
fn split_u3_with_colluders(
    n: u32,
    spec: GraphSpec,
    t: u32,
    colluders: u32,
    seed: u64,
) -> (bool, bool, usize) {
    use privfed_secagg::local::Enrollment;
    use privfed_secagg::mask::{Sign, apply_mask};
    use privfed_secagg::messages::{
        Header, SealedShares, SignedKeys, SurvivorSignature, key_list_binding, unpack,
    };
    use privfed_secagg::shamir::{self, Share};
    use privfed_secagg::{Client, ClientPayload, ServerMessage, ServerPayload};
    use std::collections::{BTreeMap, BTreeSet};
    use x25519_dalek::StaticSecret;

    let mut c = crate::config(n, t, 16, 5, spec);
    let mut r = rng(seed);
    let enrollment = Enrollment::new(n as usize, &mut r);
    c.threat_model = enrollment.threat_model();
    let inputs = crate::random_inputs(&mut r, n as usize, c.dim, c.bits);
    let binding = c.binding();
    let u = 1u32;
    // Party p < n is client p + 1; party n + p its twin (used only if it colludes).
    let party_id = |p: usize| (p % n as usize) as u32 + 1;
    let creds = enrollment.credentials().unwrap();
    let twin_creds = enrollment.credentials().unwrap();
    let mut parties: Vec<(Client, rand::rngs::ChaCha20Rng)> = Vec::new();
    let mut entries: Vec<SignedKeys> = Vec::new();
    for (p, cred) in creds.into_iter().chain(twin_creds).enumerate() {
        let id = party_id(p);
        let mut pr = rng(seed * 1000 + u64::from(id));
        let (client, m) = Client::new_active(c.clone(), id, cred, &mut pr).unwrap();
        if p < n as usize {
            let ClientPayload::SignedKeys(k) = m.payload else {
                panic!("round 1")
            };
            entries.push(k);
        }
        parties.push((client, pr));
    }
    let kb = key_list_binding(&binding, &entries);
    let graph = Graph::for_members(
        (1..=n).collect(),
        spec,
        &crypto::active_graph_seed(&c.session_id, &kb),
    );
    let around: Vec<u32> = graph.neighbours(u);
    let outside: Vec<u32> = around
        .iter()
        .flat_map(|&w| graph.neighbours(w))
        .filter(|&x| x != u && !around.contains(&x))
        .collect::<BTreeSet<u32>>()
        .into_iter()
        .collect();
    // Is this split feasible: side A (true) or B of every honest neighbour of u and every
    // client next to one, with these colluders?
    let feasible = |colluding: &BTreeSet<u32>, side_a: &BTreeMap<u32, bool>| -> bool {
        let honest: Vec<u32> = around
            .iter()
            .copied()
            .filter(|v| !colluding.contains(v))
            .collect();
        let a = honest.iter().filter(|v| side_a[v]).count();
        a + colluding.len() >= t as usize
            && honest.len() - a + colluding.len() >= t as usize
            && honest.iter().all(|&w| {
                let mine = side_a[&w];
                let signers = graph
                    .neighbours(w)
                    .into_iter()
                    .filter(|x| {
                        colluding.contains(x)
                            || (*x == u && mine)
                            || side_a.get(x).is_some_and(|&s| s == mine)
                    })
                    .count();
                signers >= t as usize
            })
    };
    // The search: which C of u's neighbours collude (the placement grinding would buy), and
    // the split.
    let mut found: Option<(BTreeSet<u32>, BTreeMap<u32, bool>)> = None;
    'search: for pick in 0u32..(1 << around.len()) {
        if pick.count_ones() != colluders {
            continue;
        }
        let colluding: BTreeSet<u32> = (0..around.len())
            .filter(|i| pick >> i & 1 == 1)
            .map(|i| around[i])
            .collect();
        let free: Vec<u32> = around
            .iter()
            .chain(&outside)
            .copied()
            .filter(|x| !colluding.contains(x))
            .collect();
        assert!(free.len() < 20, "search space");
        for mask in 0u32..(1 << free.len()) {
            let side: BTreeMap<u32, bool> = free
                .iter()
                .enumerate()
                .map(|(i, &x)| (x, mask >> i & 1 == 1))
                .collect();
            if feasible(&colluding, &side) {
                found = Some((colluding, side));
                break 'search;
            }
        }
    }
    let possible = found.is_some();
    let (colluding, side) = found.unwrap_or_else(|| {
        // No split works; play the first C neighbours and t − C honest ones on A anyway.
        let colluding: BTreeSet<u32> = around.iter().copied().take(colluders as usize).collect();
        let a = t.saturating_sub(colluders) as usize;
        let side = around
            .iter()
            .chain(&outside)
            .copied()
            .filter(|x| !colluding.contains(x))
            .enumerate()
            .map(|(i, x)| (x, i < a))
            .collect();
        (colluding, side)
    });
    let ask =
        |parties: &mut Vec<(Client, rand::rngs::ChaCha20Rng)>, p: usize, payload: ServerPayload| {
            let id = party_id(p);
            let (client, pr) = &mut parties[p];
            let message = ServerMessage {
                header: Header::new(binding, id),
                payload,
            };
            client
                .handle(&message, &inputs[id as usize - 1], pr)
                .ok()
                .map(|m| m.payload)
        };
    // Twins of honest clients never speak.
    let speaks = |p: usize| p < n as usize || colluding.contains(&party_id(p));
    // Round 1 relayed honestly; every ciphertext delivered.
    let mut sealed: BTreeMap<u32, Vec<SealedShares>> = BTreeMap::new();
    for p in (0..parties.len()).filter(|&p| speaks(p)) {
        let answer = ask(
            &mut parties,
            p,
            ServerPayload::SignedKeyList {
                entries: entries.clone(),
            },
        );
        let Some(ClientPayload::ShareKeys { shares }) = answer else {
            panic!("{answer:?}")
        };
        sealed.insert(party_id(p), shares);
    }
    let mut y_u = Vec::new();
    for p in (0..parties.len()).filter(|&p| speaks(p)) {
        let id = party_id(p);
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
        let answer = ask(&mut parties, p, ServerPayload::Shares { shares });
        let Some(ClientPayload::MaskedInput { packed }) = answer else {
            panic!("{answer:?}")
        };
        if id == u {
            y_u = packed;
        }
    }
    // The two stories; a colluder tells A, its twin B; clients far from u sign A.
    let on_a = |p: usize| -> bool {
        let id = party_id(p);
        if colluding.contains(&id) {
            p < n as usize
        } else {
            id == u || side.get(&id).copied().unwrap_or(true)
        }
    };
    let with_u: Vec<u32> = (1..=n).collect();
    let without_u: Vec<u32> = (2..=n).collect();
    let mut sigs: [Vec<SurvivorSignature>; 2] = [Vec::new(), Vec::new()];
    for p in (0..parties.len()).filter(|&p| speaks(p)) {
        let (story, u3) = if on_a(p) {
            (0, &with_u)
        } else {
            (1, &without_u)
        };
        if let Some(ClientPayload::Consistency { signature }) =
            ask(&mut parties, p, ServerPayload::Survivors { u3: u3.clone() })
        {
            sigs[story].push(SurvivorSignature {
                id: party_id(p),
                signature,
            });
        }
    }
    for s in &mut sigs {
        s.sort_by_key(|s| s.id);
    }
    let (mut b_shares, mut s_shares): (Vec<Share>, Vec<Share>) = (Vec::new(), Vec::new());
    // The colluders hand over the shares of u they hold: their cipher secret key (the first
    // draw of their randomness, checked against the key they advertised) opens u's ciphertext.
    for &v in &colluding {
        let mut pr = rng(seed * 1000 + u64::from(v));
        let cipher_sk = StaticSecret::random_from_rng(&mut pr);
        let entry = entries[v as usize - 1];
        assert_eq!(
            x25519_dalek::PublicKey::from(&cipher_sk).to_bytes(),
            entry.cipher_pk
        );
        let sealed_to_v = sealed[&u].iter().find(|s| s.peer == v).unwrap();
        let plain = crypto::open(
            &cipher_sk,
            &entries[u as usize - 1].cipher_pk,
            &kb,
            u,
            v,
            &sealed_to_v.ciphertext,
        )
        .unwrap();
        // sender, receiver (4 bytes each), then the mask key's and the self-mask seed's values.
        let word = |i: usize| u64::from_be_bytes(plain[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        s_shares.push(Share {
            x: v,
            y: std::array::from_fn(word),
        });
        b_shares.push(Share {
            x: v,
            y: std::array::from_fn(|i| word(5 + i)),
        });
    }
    for p in (0..parties.len()).filter(|&p| {
        speaks(p) && around.contains(&party_id(p)) && !colluding.contains(&party_id(p))
    }) {
        let id = party_id(p);
        let story = usize::from(!on_a(p));
        let signatures: Vec<SurvivorSignature> = sigs[story]
            .iter()
            .filter(|s| graph.are_neighbours(id, s.id))
            .copied()
            .collect();
        if let Some(ClientPayload::Unmasking {
            self_mask,
            mask_key,
        }) = ask(
            &mut parties,
            p,
            ServerPayload::SignedSurvivors { signatures },
        ) {
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
    let aborted = parties[..n as usize]
        .iter()
        .filter(|(cl, _)| !colluding.contains(&cl.id()) && cl.is_aborted())
        .count();
    let (Ok(b_u), Ok(s_u)) = (
        shamir::combine(&b_shares, t as usize),
        shamir::combine(&s_shares, t as usize),
    ) else {
        return (possible, false, aborted);
    };
    let s_u = StaticSecret::from(*s_u);
    let mut x = unpack(&y_u, c.bits, c.dim).unwrap();
    apply_mask(&mut x, &b_u, c.bits, Sign::Subtract);
    for e in entries.iter().filter(|e| around.contains(&e.id)) {
        let seed = crypto::pair_mask_seed(&s_u, &e.mask_pk, &kb, u, e.id).unwrap();
        let sign = if u < e.id { Sign::Subtract } else { Sign::Add };
        apply_mask(&mut x, &seed, c.bits, sign);
    }
    (possible, x == inputs[u as usize - 1], aborted)
}

/// Where the colluders' bound is. On the complete graph (n = 9, k = 8) the split-U3 attack
/// recovers the target's input exactly when `2t + 1 ≤ k + C`: the target signs only a U3 that
/// holds it and nobody is outside its neighbourhood, so the side without it has one signer
/// fewer. On a Harary graph (n = 16, k = 6, t = 4, 5, C = 0..5) the neighbours' other
/// neighbours make up the signatures, and the attack recovers the input exactly when
/// `2t ≤ k + C` — the bound of the analysis (`SECURE_AGGREGATION.md`; the planner's `secrets_bound_log2` counts placements
/// with `≥ 2t − k` colluders around a client). Whenever the attack fails it is not silent:
/// honest clients short of signatures abort.
#[test]
fn colluders_recover_an_input_exactly_at_the_bound() {
    let cases = [
        (9u32, GraphSpec::Complete, 8u32, [5u32, 6], 1u32),
        (16, GraphSpec::Harary { degree: 6 }, 6, [4, 5], 0),
    ];
    for (n, spec, k, thresholds, slack) in cases {
        for t in thresholds {
            for colluders in 0..=5 {
                let seed = 300 + u64::from(100 * n + 10 * t + colluders);
                let (possible, recovered, aborted) =
                    split_u3_with_colluders(n, spec, t, colluders, seed);
                let at_bound = 2 * t + slack <= k + colluders;
                let what = format!("n {n}, k {k}, t {t}, C {colluders}");
                assert_eq!(possible, at_bound, "{what}: the search");
                assert_eq!(recovered, at_bound, "{what}: the real clients");
                assert_eq!(aborted > 0, !recovered, "{what}");
            }
        }
    }
}
