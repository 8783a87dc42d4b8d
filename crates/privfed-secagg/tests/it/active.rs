//! The active mode: exact sums with dropouts at every stage (the consistency check included),
//! and typed refusals of forged, unsigned and wrongly signed keys, short or split consistency
//! signatures, and a graph or an id assignment that does not match the derivation.

use privfed_secagg::local::{Enrollment, LocalRound};
use privfed_secagg::messages::{Header, SignedKeys, SurvivorSignature};
use privfed_secagg::{
    Client, ClientMessage, ClientPayload, Credentials, DeviceKey, GraphSpec, Receipt, RoundConfig,
    RoundStatus, SecAggError, Server, ServerMessage, ServerPayload, Stage, ThreatModel,
};
use proptest::prelude::*;
use rand::RngExt;
use rand::rngs::ChaCha20Rng;

use crate::{config, enrolled, plain_sum, random_inputs, rng};

/// Real active-mode clients and server, stepped by hand.
struct Active {
    server: Server,
    clients: Vec<Client>,
    inputs: Vec<Vec<u64>>,
    rng: ChaCha20Rng,
}

impl Active {
    fn new(mut c: RoundConfig, seed: u64) -> Self {
        let mut r = rng(seed);
        let creds = enrolled(&mut c, &mut r);
        let inputs = random_inputs(&mut r, c.clients as usize, c.dim, c.bits);
        let mut server = Server::new(c.clone()).unwrap();
        let mut clients = Vec::new();
        for (id, cred) in (1..=c.clients).zip(creds) {
            let (client, m) = Client::new_active(c.clone(), id, cred, &mut r).unwrap();
            assert_eq!(server.receive(&m).unwrap(), Receipt::Accepted);
            clients.push(client);
        }
        server.close_stage().unwrap();
        Active {
            server,
            clients,
            inputs,
            rng: r,
        }
    }

    /// Runs the current stage for every client, then closes it.
    fn step(&mut self) {
        for i in 0..self.clients.len() {
            let id = i as u32 + 1;
            let Ok(request) = self.server.message_for(id) else {
                continue;
            };
            let m = self.clients[i]
                .handle(&request, &self.inputs[i], &mut self.rng)
                .unwrap();
            self.server.receive(&m).unwrap();
        }
        self.server.close_stage().unwrap();
    }

    /// Client `id`'s answer to an invented server payload.
    fn ask(&mut self, id: u32, payload: ServerPayload) -> Result<ClientMessage, SecAggError> {
        let message = ServerMessage {
            header: Header::new(self.server.config().binding(), id),
            payload,
        };
        let i = id as usize - 1;
        self.clients[i].handle(&message, &self.inputs[i], &mut self.rng)
    }

    fn key_list(&self) -> Vec<SignedKeys> {
        match self.server.message_for(1).unwrap().payload {
            ServerPayload::SignedKeyList { entries } => entries,
            p => panic!("{p:?}"),
        }
    }
}

#[test]
fn an_active_round_sums_exactly_on_both_graphs() {
    for (c, drops) in [
        (config(9, 6, 16, 50, GraphSpec::Complete), vec![]),
        (
            config(40, 5, 20, 33, GraphSpec::Harary { degree: 8 }),
            vec![
                (0, Stage::AdvertiseKeys),
                (5, Stage::ShareKeys),
                (11, Stage::MaskedInput),
                (17, Stage::ConsistencyCheck),
                (23, Stage::Unmasking),
            ],
        ),
    ] {
        let mut c = c;
        let mut r = rng(11);
        let n = c.clients as usize;
        let creds = enrolled(&mut c, &mut r);
        let inputs = random_inputs(&mut r, n, c.dim, c.bits);
        let mut drop_before = vec![None; n];
        for &(i, s) in &drops {
            drop_before[i] = Some(s);
        }
        let mut round =
            LocalRound::with_credentials(c.clone(), inputs.clone(), drop_before, creds).unwrap();
        let mut stages = Vec::new();
        while let Some(s) = round.next_stage() {
            stages.push(s);
            round.run_stage(&mut r).unwrap();
        }
        assert_eq!(stages, Stage::ALL.to_vec());
        let out = round.server().output().unwrap().clone();
        assert_eq!(out.sum, plain_sum(&inputs, &out.survivors, c.bits));
        for &(i, s) in &drops {
            let id = i as u32 + 1;
            // A client that stopped after its masked input is in the sum (its self-mask was
            // recovered from its neighbours' shares).
            assert_eq!(
                out.survivors.contains(&id),
                s >= Stage::ConsistencyCheck,
                "{s:?}"
            );
        }
    }
}

fn stage_strategy() -> impl Strategy<Value = Option<Stage>> {
    prop_oneof![
        8 => Just(None),
        1 => Just(Some(Stage::AdvertiseKeys)),
        1 => Just(Some(Stage::ShareKeys)),
        1 => Just(Some(Stage::MaskedInput)),
        1 => Just(Some(Stage::ConsistencyCheck)),
        1 => Just(Some(Stage::Unmasking)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Random dropouts at every stage of the active mode, both graphs: a finished round's sum is
    /// exactly that of the clients it names; a round without dropouts never aborts.
    #[test]
    fn active_rounds_give_exact_sums_or_a_justified_abort(
        bits in 1u32..=64,
        n in 5u32..=20,
        harary in any::<bool>(),
        seed in any::<u64>(),
        drops in proptest::collection::vec(stage_strategy(), 20),
    ) {
        let mut r = rng(seed);
        let (graph, degree) = if harary && n >= 7 {
            (GraphSpec::Harary { degree: 4 }, 4)
        } else {
            (GraphSpec::Complete, n - 1)
        };
        let dim = r.random_range(1..30usize);
        let mut c = config(n, degree / 2 + 1, bits, dim, graph);
        let creds = enrolled(&mut c, &mut r);
        let inputs = random_inputs(&mut r, n as usize, dim, bits);
        let drops: Vec<Option<Stage>> = drops[..n as usize].to_vec();
        let round = LocalRound::with_credentials(c, inputs.clone(), drops.clone(), creds)
            .unwrap()
            .run(&mut r);
        match round {
            Ok(out) => {
                prop_assert_eq!(&out.sum, &plain_sum(&inputs, &out.survivors, bits));
                for &u in &out.survivors {
                    let d = drops[u as usize - 1];
                    prop_assert!(d.is_none() || d >= Some(Stage::ConsistencyCheck));
                }
            }
            Err(SecAggError::Aborted(_)) => prop_assert!(drops.iter().any(|d| d.is_some())),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}

#[test]
fn forged_unsigned_and_wrongly_signed_keys_are_refused() {
    let c = config(7, 4, 16, 5, GraphSpec::Complete);
    let base = Active::new(c.clone(), 21);
    let entries = base.key_list();

    // A signature altered: the client refuses with a typed error and aborts.
    let mut a = Active::new(c.clone(), 21);
    let mut forged = entries.clone();
    forged[2].signature[0] ^= 1;
    let e = a
        .ask(1, ServerPayload::SignedKeyList { entries: forged })
        .unwrap_err();
    assert!(matches!(e, SecAggError::Signature(_)), "{e}");
    assert!(a.clients[0].is_aborted());

    // Keys re-signed by a device that is not on the roster (a server-made Sybil).
    let mut a = Active::new(c.clone(), 21);
    let mut sybil = entries.clone();
    let mut r = rng(5);
    let outsider = DeviceKey::generate(&mut r);
    sybil[3].device = outsider.verifying_key();
    let e = a
        .ask(1, ServerPayload::SignedKeyList { entries: sybil })
        .unwrap_err();
    assert!(matches!(e, SecAggError::Signature(_)), "{e}");

    // Unsigned keys (the honest-but-curious relay) in an active round.
    let mut a = Active::new(c.clone(), 21);
    let peers = entries
        .iter()
        .filter(|k| k.id != 1)
        .map(SignedKeys::peer_keys)
        .collect();
    let e = a.ask(1, ServerPayload::Keys { peers }).unwrap_err();
    assert!(matches!(e, SecAggError::Violation(_)), "{e}");

    // Another client's keys under this client's id, or this client left out of the list.
    let mut a = Active::new(c.clone(), 21);
    let mut swapped = entries.clone();
    swapped[0].cipher_pk = entries[1].cipher_pk;
    let e = a
        .ask(1, ServerPayload::SignedKeyList { entries: swapped })
        .unwrap_err();
    assert!(matches!(e, SecAggError::Inconsistent(_)), "{e}");
    let mut a = Active::new(c.clone(), 21);
    let e = a
        .ask(
            1,
            ServerPayload::SignedKeyList {
                entries: entries[1..].to_vec(),
            },
        )
        .unwrap_err();
    assert!(matches!(e, SecAggError::Inconsistent(_)), "{e}");

    // The server refuses unsigned keys, a bad signature and a device used twice.
    let mut c2 = c.clone();
    let mut r = rng(6);
    let creds = enrolled(&mut c2, &mut r);
    let mut server = Server::new(c2.clone()).unwrap();
    let mut msgs = Vec::new();
    for (id, cred) in (1..=7).zip(creds) {
        msgs.push(Client::new_active(c2.clone(), id, cred, &mut r).unwrap().1);
    }
    let unsigned = ClientMessage {
        header: msgs[0].header,
        payload: ClientPayload::AdvertiseKeys {
            cipher_pk: [9u8; 32],
            mask_pk: [10u8; 32],
        },
    };
    assert!(matches!(
        server.receive(&unsigned),
        Err(SecAggError::Violation(_))
    ));
    let mut bad = msgs[0].clone();
    if let ClientPayload::SignedKeys(k) = &mut bad.payload {
        k.signature[10] ^= 4;
    }
    assert!(matches!(
        server.receive(&bad),
        Err(SecAggError::Signature(_))
    ));
    server.receive(&msgs[0]).unwrap();
    // Client 2 re-using client 1's device key (a signature it cannot make, so it replays
    // client 1's keys under its own id: refused as a repeat).
    let mut twice = msgs[0].clone();
    twice.header.client = 2;
    assert!(server.receive(&twice).is_err());
}

#[test]
fn a_graph_that_does_not_match_the_derivation_is_refused() {
    // SecAgg+: the client derives its neighbours from the key list; a ciphertext from a client
    // that is not its neighbour there is refused, whatever graph the server has in mind.
    let c = config(20, 3, 16, 5, GraphSpec::Harary { degree: 4 });
    let mut a = Active::new(c, 31);
    a.step(); // share keys
    let ServerPayload::Shares { mut shares } = a.server.message_for(1).unwrap().payload else {
        panic!()
    };
    let neighbours: Vec<u32> = shares.iter().map(|s| s.peer).collect();
    let stranger = (2..=20).find(|v| !neighbours.contains(v)).unwrap();
    shares[0].peer = stranger;
    let e = a.ask(1, ServerPayload::Shares { shares }).unwrap_err();
    assert!(matches!(e, SecAggError::UnexpectedParty { .. }), "{e}");
}

/// Runs an active round up to the consistency check and returns it with U3.
fn at_consistency(seed: u64) -> (Active, Vec<u32>) {
    let c = config(9, 5, 16, 6, GraphSpec::Complete);
    let mut a = Active::new(c, seed);
    a.step(); // share keys
    a.step(); // masked input
    assert_eq!(
        a.server.status(),
        &RoundStatus::Collecting(Stage::ConsistencyCheck)
    );
    let ServerPayload::Survivors { u3 } = a.server.message_for(1).unwrap().payload else {
        panic!()
    };
    (a, u3)
}

#[test]
fn a_u3_signed_by_fewer_than_t_neighbours_is_refused() {
    let (mut a, _) = at_consistency(41);
    a.step(); // every survivor signs
    let ServerPayload::SignedSurvivors { signatures } = a.server.message_for(1).unwrap().payload
    else {
        panic!()
    };
    // t = 5: four neighbours' signatures are not enough.
    let short: Vec<SurvivorSignature> = signatures
        .iter()
        .filter(|s| s.id != 1)
        .take(4)
        .copied()
        .collect();
    let e = a
        .ask(1, ServerPayload::SignedSurvivors { signatures: short })
        .unwrap_err();
    assert!(matches!(e, SecAggError::Inconsistent(_)), "{e}");
    assert!(a.clients[0].is_aborted());
    // With all of them, client 2 answers.
    assert!(
        a.ask(2, ServerPayload::SignedSurvivors { signatures })
            .is_ok()
    );
}

#[test]
fn two_different_u3s_never_count_together() {
    let (mut a, u3) = at_consistency(42);
    // Clients 1..=4 are shown U3 without client 9; the others the real U3.
    let smaller: Vec<u32> = u3.iter().copied().filter(|&v| v != 9).collect();
    let mut sigs = Vec::new();
    for id in 1..=9u32 {
        let shown = if id <= 4 { smaller.clone() } else { u3.clone() };
        let m = a.ask(id, ServerPayload::Survivors { u3: shown }).unwrap();
        let ClientPayload::Consistency { signature } = m.payload else {
            panic!()
        };
        sigs.push(SurvivorSignature { id, signature });
    }
    // Client 5 signed the real U3; signatures on the smaller one are refused.
    let e = a
        .ask(
            5,
            ServerPayload::SignedSurvivors {
                signatures: sigs.clone(),
            },
        )
        .unwrap_err();
    assert!(matches!(e, SecAggError::Signature(_)), "{e}");
    // Only those on its own U3: 4 others plus itself, fewer than t = 5 neighbours.
    let same: Vec<SurvivorSignature> = sigs[4..].to_vec();
    let e = a
        .ask(6, ServerPayload::SignedSurvivors { signatures: same })
        .unwrap_err();
    assert!(matches!(e, SecAggError::Inconsistent(_)), "{e}");
}

#[test]
fn a_u3_that_names_a_neighbour_the_client_did_not_mask_with_is_refused() {
    let c = config(9, 5, 16, 6, GraphSpec::Complete);
    let mut a = Active::new(c, 43);
    a.step(); // share keys
    // Client 1 gets only 6 of its 8 ciphertexts, so masks with 6 peers.
    let ServerPayload::Shares { shares } = a.server.message_for(1).unwrap().payload else {
        panic!()
    };
    a.ask(
        1,
        ServerPayload::Shares {
            shares: shares[..6].to_vec(),
        },
    )
    .unwrap();
    // A U3 with everyone: it names peers client 1 never masked with.
    let everyone: Vec<u32> = (1..=9).collect();
    let e = a
        .ask(1, ServerPayload::Survivors { u3: everyone })
        .unwrap_err();
    assert!(matches!(e, SecAggError::Inconsistent(_)), "{e}");
}

#[test]
fn a_client_refuses_a_round_without_the_roster_it_trusts() {
    let mut r = rng(51);
    let mut c = config(5, 3, 8, 4, GraphSpec::Complete);
    let creds = enrolled(&mut c, &mut r);
    // Another roster's digest, no roster, or the honest-but-curious mode: refused at join.
    let mut other = c.clone();
    other.threat_model = ThreatModel::Active {
        roster: Some([7u8; 32]),
    };
    let mut it = creds.into_iter();
    let e = Client::new_active(other, 1, it.next().unwrap(), &mut r).unwrap_err();
    assert!(matches!(e, SecAggError::Policy(_)), "{e}");
    let mut open = c.clone();
    open.threat_model = ThreatModel::Active { roster: None };
    let e = Client::new_active(open, 2, it.next().unwrap(), &mut r).unwrap_err();
    assert!(matches!(e, SecAggError::Policy(_)), "{e}");
    let mut hbc = c.clone();
    hbc.threat_model = ThreatModel::HonestButCurious;
    let e = Client::new_active(hbc, 3, it.next().unwrap(), &mut r).unwrap_err();
    assert!(matches!(e, SecAggError::Policy(_)), "{e}");
    // A device that is not on the roster.
    let e = Client::new_active(
        c.clone(),
        4,
        Credentials {
            device: DeviceKey::generate(&mut r),
            roster: it.next().unwrap().roster,
        },
        &mut r,
    )
    .unwrap_err();
    assert!(matches!(e, SecAggError::Policy(_)), "{e}");
    // An active round cannot be joined without credentials.
    assert!(matches!(
        Client::new(c, 5, &mut r),
        Err(SecAggError::Policy(_))
    ));
    let _ = Enrollment::new(1, &mut r);
}

#[test]
fn the_active_server_state_survives_a_restart_at_every_stage() {
    let (mut a, _) = at_consistency(61);
    let restored = Server::from_bytes(&a.server.to_bytes()).unwrap();
    a.server = restored;
    a.step(); // consistency
    a.server = Server::from_bytes(&a.server.to_bytes()).unwrap();
    a.step(); // unmasking
    let out = a.server.output().unwrap();
    assert_eq!(out.sum, plain_sum(&a.inputs, &out.survivors, 16));
    assert_eq!(out.survivors.len(), 9);
}

#[test]
fn every_message_of_a_round_fits_the_size_bound() {
    use privfed_secagg::messages::{encode, max_client_message_len};
    for (c, active) in [
        (config(9, 5, 64, 300, GraphSpec::Complete), true),
        (config(9, 5, 13, 301, GraphSpec::Complete), false),
        (config(30, 5, 20, 77, GraphSpec::Harary { degree: 8 }), true),
    ] {
        let mut c = c;
        let mut r = rng(71);
        let n = c.clients as usize;
        let creds = active.then(|| enrolled(&mut c, &mut r));
        let bound = max_client_message_len(&c);
        let inputs = random_inputs(&mut r, n, c.dim, c.bits);
        let mut server = Server::new(c.clone()).unwrap();
        let mut clients = Vec::new();
        let mut longest = 0;
        let creds: Vec<Option<Credentials>> = match creds {
            Some(v) => v.into_iter().map(Some).collect(),
            None => (0..n).map(|_| None).collect(),
        };
        for (id, cred) in (1..=c.clients).zip(creds) {
            let (client, m) = match cred {
                Some(cred) => Client::new_active(c.clone(), id, cred, &mut r).unwrap(),
                None => Client::new(c.clone(), id, &mut r).unwrap(),
            };
            longest = longest.max(encode(&m).len());
            server.receive(&m).unwrap();
            clients.push(client);
        }
        server.close_stage().unwrap();
        while let RoundStatus::Collecting(_) = server.status() {
            for (i, client) in clients.iter_mut().enumerate() {
                let Ok(request) = server.message_for(i as u32 + 1) else {
                    continue;
                };
                let m = client.handle(&request, &inputs[i], &mut r).unwrap();
                longest = longest.max(encode(&m).len());
                server.receive(&m).unwrap();
            }
            server.close_stage().unwrap();
        }
        assert_eq!(server.status(), &RoundStatus::Finished);
        assert!(longest <= bound, "{longest} > {bound}");
        // Not loose by more than the varints' worst case and the other stages' headroom.
        assert!(
            bound < longest + 1024 + 60 * c.degree() as usize,
            "{longest} vs {bound}"
        );
    }
}
