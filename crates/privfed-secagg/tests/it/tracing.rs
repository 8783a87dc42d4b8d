//! Malicious clients that send wrong Shamir shares in the unmasking round, in both threat
//! models: the server traces them ([`privfed_secagg::shamir::decode`]), leaves their shares out
//! and still finds the exact sum, names them in `Aggregate::rejected_shares`, and aborts with
//! `UntraceableShares` instead of a wrong sum when too few extra shares arrived to trace them.

use privfed_secagg::{
    Client, ClientPayload, GraphSpec, Receipt, RoundConfig, RoundStatus, Server, Stage,
};
use rand::rngs::ChaCha20Rng;

use crate::{config, enrolled, plain_sum, random_inputs, rng};

/// Client 12 drops before its masked input; the others survive.
const DROPPED: u32 = 12;
/// The survivor whose self-mask seed `b_u` the liars corrupt.
const TARGET: u32 = 5;

/// A round with real clients, stepped by hand; `corrupt(sender, owner, is_self_mask)` says
/// which unmasking shares a sender replaces by a wrong value.
fn run(
    active: bool,
    threshold: u32,
    corrupt: impl Fn(u32, u32, bool) -> bool,
) -> (Server, Vec<Vec<u64>>, usize) {
    let mut c: RoundConfig = config(12, threshold, 24, 7, GraphSpec::Complete);
    let mut r: ChaCha20Rng = rng(40 + u64::from(threshold));
    let mut creds = active.then(|| enrolled(&mut c, &mut r).into_iter());
    let inputs = random_inputs(&mut r, 12, c.dim, c.bits);
    let mut server = Server::new(c.clone()).unwrap();
    let mut clients = Vec::new();
    for id in 1..=12u32 {
        let (client, m) = match creds.as_mut() {
            Some(creds) => {
                Client::new_active(c.clone(), id, creds.next().unwrap(), &mut r).unwrap()
            }
            None => Client::new(c.clone(), id, &mut r).unwrap(),
        };
        assert_eq!(server.receive(&m).unwrap(), Receipt::Accepted);
        clients.push(client);
    }
    server.close_stage().unwrap();
    let mut target_shares = 0;
    while let RoundStatus::Collecting(stage) = server.status().clone() {
        for id in 1..=12u32 {
            if id == DROPPED && stage >= Stage::MaskedInput {
                continue;
            }
            let Ok(request) = server.message_for(id) else {
                continue;
            };
            let i = id as usize - 1;
            let mut m = clients[i].handle(&request, &inputs[i], &mut r).unwrap();
            if let ClientPayload::Unmasking {
                self_mask,
                mask_key,
            } = &mut m.payload
            {
                target_shares += self_mask.iter().filter(|o| o.owner == TARGET).count();
                for (list, is_self) in [(self_mask, true), (mask_key, false)] {
                    for o in list.iter_mut().filter(|o| corrupt(id, o.owner, is_self)) {
                        // Any other field element: a wrong share that is still well formed.
                        o.share.y[1] = (o.share.y[1] + 12345) % privfed_secagg::shamir::P;
                    }
                }
            }
            server.receive(&m).unwrap();
        }
        server.close_stage().unwrap();
    }
    (server, inputs, target_shares)
}

/// One liar with a wrong share of a survivor's `b_u` and of the dropout's `s_u`, then two
/// liars on both (`t = 6`: `b_u` has 10 shares, one per other survivor, `s_u` 11, so `e = 2`
/// for each): the sum is exact and the liars, and only they, are named, in both threat models.
#[test]
fn wrong_shares_of_a_survivor_and_a_dropout_are_traced_and_the_sum_is_exact() {
    for active in [false, true] {
        for liars in [vec![3u32], vec![3, 9]] {
            let (server, inputs, n_shares) = run(active, 6, |sender, owner, is_self| {
                liars.contains(&sender)
                    && ((is_self && owner == TARGET) || (!is_self && owner == DROPPED))
            });
            assert_eq!(
                n_shares, 10,
                "every other survivor holds a share of b_{TARGET}"
            );
            let out = server
                .output()
                .unwrap_or_else(|| panic!("active {active}: {:?}", server.status()));
            assert_eq!(out.rejected_shares, liars, "active {active}");
            assert_eq!(out.dropped, vec![DROPPED]);
            assert_eq!(out.sum, plain_sum(&inputs, &out.survivors, 24));
        }
        // Honest: nothing rejected.
        let (server, inputs, _) = run(active, 6, |_, _, _| false);
        let out = server.output().unwrap();
        assert!(out.rejected_shares.is_empty());
        assert_eq!(out.sum, plain_sum(&inputs, &out.survivors, 24));
    }
}

/// More wrong shares of one secret than its extra shares trace: two liars on `b_u` with its 10
/// shares and `t = 7` (`e = 1`, `n − t − e = 2`), and, separately, three on the dropout's
/// `s_u` with its 11 shares and `t = 6` (`e = 2`, `n − t − e = 3`). The round aborts with
/// `UntraceableShares` — never a wrong sum — in both threat models; with `n − t` odd no choice
/// of the liars' values could make either decode wrongly.
#[test]
fn more_wrong_shares_than_traceable_abort_the_round_instead_of_a_wrong_sum() {
    for active in [false, true] {
        for on_self in [true, false] {
            let (t, liars) = if on_self {
                (7, vec![2, 3])
            } else {
                (6, vec![2, 3, 4])
            };
            let (server, _, _) = run(active, t, |sender, owner, is_self| {
                liars.contains(&sender)
                    && is_self == on_self
                    && owner == if on_self { TARGET } else { DROPPED }
            });
            assert!(server.output().is_none());
            match server.status() {
                RoundStatus::Aborted(reason) => {
                    assert!(reason.contains("not traceable"), "{reason}")
                }
                s => panic!("active {active}: {s:?}"),
            }
        }
    }
}
