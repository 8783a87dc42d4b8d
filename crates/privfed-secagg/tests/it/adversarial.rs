//! A curious server, a lying server, and hostile messages.

use privfed_secagg::messages::{self, Header, OwnedShare, SealedShares, pack, unpack};
use privfed_secagg::shamir::{self, Share};
use privfed_secagg::{
    Client, ClientMessage, ClientPayload, GraphSpec, Receipt, RoundConfig, RoundStatus,
    SecAggError, Server, ServerMessage, ServerPayload, Stage,
};
use rand::RngExt;
use rand::rngs::ChaCha20Rng;

use crate::{config, plain_sum, random_inputs, rng};

/// Real clients and a real server, stepped by hand so a test can intercept, alter or invent
/// messages.
struct Harness {
    server: Server,
    clients: Vec<Client>,
    inputs: Vec<Vec<u64>>,
    rng: ChaCha20Rng,
    /// The last message each client sent (index id − 1).
    sent: Vec<Option<ClientMessage>>,
}

impl Harness {
    fn new(c: RoundConfig, seed: u64) -> Self {
        let mut r = rng(seed);
        let n = c.clients as usize;
        let inputs = random_inputs(&mut r, n, c.dim, c.bits);
        Self::with_inputs(c, inputs, r)
    }

    fn with_inputs(c: RoundConfig, inputs: Vec<Vec<u64>>, mut r: ChaCha20Rng) -> Self {
        let mut server = Server::new(c.clone()).unwrap();
        let mut clients = Vec::new();
        let mut sent = Vec::new();
        for id in 1..=c.clients {
            let (client, m) = Client::new(c.clone(), id, &mut r).unwrap();
            assert_eq!(server.receive(&m).unwrap(), Receipt::Accepted);
            clients.push(client);
            sent.push(Some(m));
        }
        server.close_stage().unwrap();
        Harness {
            server,
            clients,
            inputs,
            rng: r,
            sent,
        }
    }

    /// Runs the current stage for the clients `active` admits, then closes it.
    fn step(&mut self, active: impl Fn(u32) -> bool) {
        for i in 0..self.clients.len() {
            let id = i as u32 + 1;
            if !active(id) {
                continue;
            }
            let Ok(request) = self.server.message_for(id) else {
                continue;
            };
            let m = self.clients[i]
                .handle(&request, &self.inputs[i], &mut self.rng)
                .unwrap();
            self.server.receive(&m).unwrap();
            self.sent[i] = Some(m);
        }
        self.server.close_stage().unwrap();
    }

    fn client(&mut self, id: u32) -> &mut Client {
        &mut self.clients[id as usize - 1]
    }

    fn ask(&mut self, id: u32, payload: ServerPayload) -> Result<ClientMessage, SecAggError> {
        let message = ServerMessage {
            header: Header::new(self.server.config().binding(), id),
            payload,
        };
        let input = self.inputs[id as usize - 1].clone();
        self.clients[id as usize - 1].handle(&message, &input, &mut self.rng)
    }
}

/// What a curious server sees of a surviving client — its masked input — is uniform over
/// Z_{2^b} whatever the input: chi-square against uniform over the 8 residues at b = 3, for a
/// client whose input is all 0 and one whose input is all 7, 24,000 coordinates each, α = 1e-6
/// per test.
#[test]
fn a_curious_server_sees_uniform_masked_inputs_whatever_the_input() {
    let bits = 3;
    let dim = 60;
    for value in [0u64, 7] {
        let mut counts = [0u64; 8];
        for round in 0..400u64 {
            let mut c = config(4, 2, bits, dim, GraphSpec::Complete);
            c.session_id[0] = round as u8;
            c.session_id[1] = (round >> 8) as u8;
            let mut r = rng(1000 + round);
            let mut inputs = random_inputs(&mut r, 4, dim, bits);
            inputs[0] = vec![value; dim];
            let mut h = Harness::with_inputs(c, inputs, r);
            h.step(|_| true); // share keys
            h.step(|_| true); // masked input
            let Some(ClientMessage {
                payload: ClientPayload::MaskedInput { packed },
                ..
            }) = &h.sent[0]
            else {
                panic!("client 1 sent its masked input");
            };
            for v in unpack(packed, bits, dim).unwrap() {
                counts[v as usize] += 1;
            }
            h.step(|_| true);
            assert_eq!(*h.server.status(), RoundStatus::Finished);
        }
        privfed_testkit::assert_chi_square_gof(
            &counts,
            &[1.0 / 8.0; 8],
            1e-6,
            "a client's masked input as the server sees it",
        );
    }
}

fn masked_harness() -> Harness {
    // 7 clients, complete graph (6 neighbours each), t = 4.
    let mut h = Harness::new(config(7, 4, 16, 5, GraphSpec::Complete), 42);
    h.step(|_| true); // share keys
    h.step(|id| id != 1); // masked input: client 1 drops
    h
}

#[test]
fn a_client_refuses_to_reveal_both_shares_of_one_peer() {
    let mut h = masked_harness();
    // Client 2 is asked for client 3 as both survivor and dropped.
    let e = h
        .ask(
            2,
            ServerPayload::Unmask {
                survivors: vec![2, 3, 4, 5, 6, 7],
                dropped: vec![1, 3],
            },
        )
        .unwrap_err();
    assert!(matches!(e, SecAggError::InconsistentRequest(_)), "{e}");
    assert!(
        h.client(2).is_aborted(),
        "the client aborts and drops its secrets"
    );
    // Anything further is refused.
    let e = h
        .ask(
            2,
            ServerPayload::Unmask {
                survivors: vec![2, 3, 4, 5, 6, 7],
                dropped: vec![1],
            },
        )
        .unwrap_err();
    assert!(matches!(e, SecAggError::State(_)), "{e}");
}

#[test]
fn a_client_answers_one_unmasking_request_only() {
    let mut h = masked_harness();
    let honest = h
        .ask(
            3,
            ServerPayload::Unmask {
                survivors: vec![2, 3, 4, 5, 6, 7],
                dropped: vec![1],
            },
        )
        .unwrap();
    let ClientPayload::Unmasking {
        self_mask,
        mask_key,
    } = honest.payload
    else {
        panic!("an unmasking answer");
    };
    let owners = |v: &[OwnedShare]| v.iter().map(|s| s.owner).collect::<Vec<_>>();
    assert_eq!(owners(&self_mask), vec![2, 4, 5, 6, 7]);
    assert_eq!(owners(&mask_key), vec![1]);
    // Now the server claims client 2 dropped, to get its mask key share as well.
    let e = h
        .ask(
            3,
            ServerPayload::Unmask {
                survivors: vec![3, 4, 5, 6, 7],
                dropped: vec![1, 2],
            },
        )
        .unwrap_err();
    assert!(matches!(e, SecAggError::State(_)), "{e}");
}

#[test]
fn requests_that_contradict_what_the_client_saw_abort_it() {
    let cases: Vec<(Vec<u32>, Vec<u32>, &str)> = vec![
        (
            vec![2, 3, 4, 5, 6, 7],
            vec![],
            "a neighbour missing from both lists",
        ),
        (vec![3, 4, 5, 6, 7], vec![1], "the client itself missing"),
        (vec![2, 2, 3, 4, 5, 6, 7], vec![1], "a duplicate"),
        (vec![2, 3, 4, 5, 6, 7, 8], vec![1], "a stranger"),
        (vec![2, 3, 4], vec![1, 5, 6, 7], "fewer than t survivors"),
    ];
    for (survivors, dropped, what) in cases {
        let mut h = masked_harness();
        let e = h
            .ask(2, ServerPayload::Unmask { survivors, dropped })
            .unwrap_err();
        assert!(e.is_fatal(), "{what}: {e}");
        assert!(h.client(2).is_aborted(), "{what}");
    }
}

/// The split-view attack: the server tells three of client 1's neighbours that it dropped and
/// the other three that it survived. Each honest client reveals one kind of share, so the server
/// holds 3 < t = 4 of each kind and can reconstruct neither client 1's mask key nor its
/// self-mask seed.
#[test]
fn a_split_view_yields_fewer_than_t_shares_of_each_kind() {
    // Client 1 sends its masked input (it is the victim).
    let mut h = Harness::new(config(7, 4, 16, 5, GraphSpec::Complete), 43);
    h.step(|_| true);
    h.step(|_| true);
    let mut key_shares: Vec<Share> = Vec::new();
    let mut seed_shares: Vec<Share> = Vec::new();
    for id in 2..=7 {
        let (survivors, dropped) = if id <= 4 {
            (vec![2, 3, 4, 5, 6, 7], vec![1])
        } else {
            (vec![1, 2, 3, 4, 5, 6, 7], vec![])
        };
        let answer = h
            .ask(id, ServerPayload::Unmask { survivors, dropped })
            .unwrap();
        let ClientPayload::Unmasking {
            self_mask,
            mask_key,
        } = answer.payload
        else {
            panic!("an unmasking answer");
        };
        key_shares.extend(
            mask_key
                .into_iter()
                .filter(|s| s.owner == 1)
                .map(|s| s.share),
        );
        seed_shares.extend(
            self_mask
                .into_iter()
                .filter(|s| s.owner == 1)
                .map(|s| s.share),
        );
    }
    assert_eq!((key_shares.len(), seed_shares.len()), (3, 3));
    assert!(matches!(
        shamir::combine(&key_shares, 4),
        Err(SecAggError::Aborted(_))
    ));
    assert!(matches!(
        shamir::combine(&seed_shares, 4),
        Err(SecAggError::Aborted(_))
    ));
}

#[test]
fn the_server_refuses_replayed_reordered_forged_and_malformed_messages() {
    let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 44);
    let binding = h.server.config().binding();
    // A replayed advertisement during the share-keys stage is stale for `receive` (it is not an
    // answer to this stage); the transport can still recognise the recorded bytes as a retry
    // (`already_received`), but not a different advertisement.
    let replay = h.sent[0].clone().unwrap();
    assert!(h.server.already_received(&replay));
    let mut forged = replay.clone();
    let ClientPayload::AdvertiseKeys { cipher_pk, .. } = &mut forged.payload else {
        panic!()
    };
    cipher_pk[0] ^= 1;
    assert!(!h.server.already_received(&forged));
    for m in [&replay, &forged] {
        assert!(matches!(
            h.server.receive(m),
            Err(SecAggError::WrongStage {
                expected: Stage::ShareKeys,
                got: Stage::AdvertiseKeys
            })
        ));
    }
    let request = h.server.message_for(1).unwrap();
    let input = h.inputs[0].clone();
    let good = h.client(1).handle(&request, &input, &mut rng(1)).unwrap();
    // Another session; another protocol version; a sender outside the round.
    let mut m = good.clone();
    m.header.binding[0] ^= 1;
    assert_eq!(h.server.receive(&m), Err(SecAggError::WrongSession));
    let mut m = good.clone();
    m.header.version = 2;
    assert!(matches!(
        h.server.receive(&m),
        Err(SecAggError::Version { got: 2, .. })
    ));
    let mut m = good.clone();
    m.header.client = 9;
    assert!(matches!(
        h.server.receive(&m),
        Err(SecAggError::UnexpectedParty { id: 9, .. })
    ));
    // Missing a neighbour; a ciphertext of the wrong length.
    let ClientPayload::ShareKeys { shares } = &good.payload else {
        panic!()
    };
    let mut m = good.clone();
    m.payload = ClientPayload::ShareKeys {
        shares: shares[1..].to_vec(),
    };
    assert!(matches!(
        h.server.receive(&m),
        Err(SecAggError::Violation(_))
    ));
    let mut cut = shares.clone();
    cut[0].ciphertext.pop();
    m.payload = ClientPayload::ShareKeys { shares: cut };
    assert!(matches!(
        h.server.receive(&m),
        Err(SecAggError::Malformed(_))
    ));
    // The real one, then a retry of it, then a different one.
    assert_eq!(h.server.receive(&good), Ok(Receipt::Accepted));
    assert_eq!(h.server.receive(&good), Ok(Receipt::Duplicate));
    let mut other = shares.clone();
    other[0].ciphertext[0] ^= 1;
    m.payload = ClientPayload::ShareKeys { shares: other };
    assert_eq!(h.server.receive(&m), Err(SecAggError::Conflict(1)));
    // Once the round has moved on, the recorded share message re-sent is stale and changes
    // nothing (the transport recognises it as a retry); a different one is stale too.
    h.step(|id| id != 1);
    assert_eq!(
        *h.server.status(),
        RoundStatus::Collecting(Stage::MaskedInput)
    );
    let before = h.server.to_bytes();
    assert!(h.server.already_received(&good));
    assert!(!h.server.already_received(&m));
    assert!(matches!(
        h.server.receive(&good),
        Err(SecAggError::WrongStage {
            expected: Stage::MaskedInput,
            got: Stage::ShareKeys
        })
    ));
    assert_eq!(h.server.to_bytes(), before);
    assert!(matches!(
        h.server.receive(&m),
        Err(SecAggError::WrongStage {
            expected: Stage::MaskedInput,
            got: Stage::ShareKeys
        })
    ));
    let short = ClientMessage {
        header: Header::new(binding, 2),
        payload: ClientPayload::MaskedInput {
            packed: pack(&[1, 2, 3], 12),
        },
    };
    assert!(matches!(
        h.server.receive(&short),
        Err(SecAggError::Malformed(_))
    ));
}

#[test]
fn masked_inputs_of_the_wrong_size_or_with_dirty_padding_are_refused() {
    let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 45);
    h.step(|_| true);
    let binding = h.server.config().binding();
    let mut packed = pack(&[1; 9], 12);
    let too_short = ClientMessage {
        header: Header::new(binding, 2),
        payload: ClientPayload::MaskedInput {
            packed: packed[..packed.len() - 1].to_vec(),
        },
    };
    assert!(matches!(
        h.server.receive(&too_short),
        Err(SecAggError::Malformed(_))
    ));
    // 9 × 12 bits = 108 bits in 14 bytes: the last 4 bits must be zero.
    *packed.last_mut().unwrap() |= 0xf0;
    let dirty = ClientMessage {
        header: Header::new(binding, 2),
        payload: ClientPayload::MaskedInput { packed },
    };
    assert!(matches!(
        h.server.receive(&dirty),
        Err(SecAggError::Malformed(_))
    ));
}

#[test]
fn a_client_rejects_tampered_and_forged_share_deliveries() {
    for attack in ["flip", "swap", "foreign"] {
        let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 46);
        h.step(|_| true);
        let ServerMessage {
            payload: ServerPayload::Shares { mut shares },
            ..
        } = h.server.message_for(1).unwrap()
        else {
            panic!()
        };
        match attack {
            // A bit flipped in transit.
            "flip" => shares[0].ciphertext[10] ^= 0x20,
            // Client 3's ciphertext presented as client 2's.
            "swap" => {
                let (a, b) = (shares[0].peer, shares[1].peer);
                shares[0].peer = b;
                shares[1].peer = a;
            }
            // A ciphertext the server made up.
            _ => {
                shares[0] = SealedShares {
                    peer: shares[0].peer,
                    ciphertext: vec![7u8; shares[0].ciphertext.len()],
                }
            }
        }
        let e = h.ask(1, ServerPayload::Shares { shares }).unwrap_err();
        assert!(matches!(e, SecAggError::Decryption { .. }), "{attack}: {e}");
        assert!(h.client(1).is_aborted(), "{attack}");
    }
}

#[test]
fn stale_or_foreign_messages_leave_the_client_able_to_continue() {
    let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 47);
    let keys = h.server.message_for(1).unwrap();
    // Another session: refused, not fatal.
    let mut foreign = keys.clone();
    foreign.header.binding[3] ^= 1;
    let input = h.inputs[0].clone();
    let e = h
        .client(1)
        .handle(&foreign, &input, &mut rng(2))
        .unwrap_err();
    assert_eq!(e, SecAggError::WrongSession);
    // A message for a later stage (reordered): refused, not fatal.
    let early = ServerMessage {
        header: keys.header,
        payload: ServerPayload::Unmask {
            survivors: vec![1],
            dropped: vec![],
        },
    };
    assert!(matches!(
        h.client(1).handle(&early, &input, &mut rng(2)),
        Err(SecAggError::WrongStage { .. })
    ));
    assert!(!h.client(1).is_aborted());
    // The real message still works, and the round completes exactly.
    h.step(|_| true);
    h.step(|_| true);
    h.step(|_| true);
    let out = h.server.output().unwrap();
    assert_eq!(out.sum, plain_sum(&h.inputs, &out.survivors, 12));
}

#[test]
fn the_client_checks_the_keys_it_is_given() {
    let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 48);
    let ServerMessage {
        payload: ServerPayload::Keys { peers },
        ..
    } = h.server.message_for(1).unwrap()
    else {
        panic!()
    };
    // Two peers with the same key (a server substituting its own key for several clients).
    let mut dup = peers.clone();
    dup[1].mask_pk = dup[0].mask_pk;
    assert!(matches!(
        h.ask(1, ServerPayload::Keys { peers: dup }),
        Err(SecAggError::Violation(_))
    ));
    // Fewer than t peers.
    let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 48);
    assert!(matches!(
        h.ask(
            1,
            ServerPayload::Keys {
                peers: peers[..2].to_vec()
            }
        ),
        Err(SecAggError::Aborted(_))
    ));
    // A small-order public key.
    let mut h = Harness::new(config(5, 3, 12, 9, GraphSpec::Complete), 48);
    let mut weak = peers.clone();
    weak[0].cipher_pk = [0u8; 32];
    assert!(h.ask(1, ServerPayload::Keys { peers: weak }).is_err());
}

/// Random byte flips and truncations of every kind of message: decoding either fails with a
/// typed error or yields a message the server and clients then accept or refuse — nothing
/// panics, and a finished round's sum is still exact.
#[test]
fn mangled_bytes_never_panic_and_never_corrupt_the_sum() {
    let mut r = rng(49);
    for trial in 0..30u64 {
        let c = config(6, 3, 10, 7, GraphSpec::Harary { degree: 4 });
        let mut h = Harness::new(c, 500 + trial);
        for _ in 0..3 {
            for i in 0..6usize {
                let id = i as u32 + 1;
                let Ok(request) = h.server.message_for(id) else {
                    continue;
                };
                // The server's message, mangled on its way to the client.
                let mut down = messages::encode(&request);
                mangle(&mut down, &mut r);
                if let Ok(m) = messages::decode::<ServerMessage>(&down) {
                    let input = h.inputs[i].clone();
                    let _ = h.clients[i].handle(&m, &input, &mut h.rng);
                }
                // The genuine message, and a mangled copy of the answer.
                let input = h.inputs[i].clone();
                let Ok(answer) = h.clients[i].handle(&request, &input, &mut h.rng) else {
                    continue;
                };
                let mut up = messages::encode(&answer);
                mangle(&mut up, &mut r);
                if let Ok(m) = messages::decode::<ClientMessage>(&up) {
                    let _ = h.server.receive(&m);
                }
                let _ = h.server.receive(&answer);
            }
            let _ = h.server.close_stage();
        }
        if let Some(out) = h.server.output() {
            assert_eq!(
                out.sum,
                plain_sum(&h.inputs, &out.survivors, 10),
                "trial {trial}"
            );
        }
    }
}

fn mangle(bytes: &mut Vec<u8>, r: &mut ChaCha20Rng) {
    match r.random_range(0..3) {
        0 => {
            let cut = r.random_range(0..bytes.len());
            bytes.truncate(cut);
        }
        1 => {
            for _ in 0..r.random_range(1..4) {
                let i = r.random_range(0..bytes.len());
                bytes[i] ^= 1 << r.random_range(0..8);
            }
        }
        _ => bytes.extend_from_slice(&[0u8; 3]),
    }
}

#[test]
fn the_server_state_survives_a_restart_mid_round() {
    let mut h = Harness::new(config(8, 5, 30, 20, GraphSpec::Complete), 50);
    h.step(|_| true);
    // Half of the masked inputs arrive, then the server restarts from its serialized state.
    for i in 0..4usize {
        let id = i as u32 + 1;
        let request = h.server.message_for(id).unwrap();
        let input = h.inputs[i].clone();
        let m = h.clients[i].handle(&request, &input, &mut h.rng).unwrap();
        h.server.receive(&m).unwrap();
    }
    let saved = h.server.to_bytes();
    h.server = Server::from_bytes(&saved).unwrap();
    // The rest, with client 8 dropping.
    for i in 4..7usize {
        let id = i as u32 + 1;
        let request = h.server.message_for(id).unwrap();
        let input = h.inputs[i].clone();
        let m = h.clients[i].handle(&request, &input, &mut h.rng).unwrap();
        h.server.receive(&m).unwrap();
    }
    h.server.close_stage().unwrap();
    let saved = h.server.to_bytes();
    h.server = Server::from_bytes(&saved).unwrap();
    h.step(|_| true);
    let out = h.server.output().unwrap();
    assert_eq!(out.survivors, (1..=7).collect::<Vec<_>>());
    assert_eq!(out.sum, plain_sum(&h.inputs, &out.survivors, 30));
    // A damaged state is a typed error.
    assert!(Server::from_bytes(&saved[..saved.len() / 2]).is_err());
}
