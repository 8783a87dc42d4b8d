//! Tests of the training loop on small in-memory data (the real-data runs are the CLI's tests).

use super::config::*;
use super::data::{FederatedData, Shard};
use super::privacy::PrivacyPlan;
use super::train::{StepOutcome, Trainer};
use privfed_accounting::calibrate::{AccountantKind, epsilon_of};
use privfed_accounting::{DpEvent, RdpAccountant};
use privfed_learn::nn::ModelSpec;
use rand::{RngExt, SeedableRng};

/// Three Gaussian blobs in 4 dimensions spread over `clients` clients (non-IID: each client's
/// rows lean to one class).
fn blobs(clients: usize, per_client: usize) -> FederatedData {
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(11);
    let centers = [
        [2.0, 0.0, 0.0, 1.0],
        [0.0, 2.0, 0.0, -1.0],
        [0.0, 0.0, 2.0, 0.0],
    ];
    let mut draw = |n: usize, lean: Option<u32>| {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for _ in 0..n {
            let c = match lean {
                Some(l) if rng.random_bool(0.7) => l,
                _ => rng.random_range(0..3u32),
            };
            for v in centers[c as usize] {
                x.push(v + rng.random_range(-1.0f32..1.0));
            }
            y.push(c);
        }
        Shard::dense(4, 3, x, y).unwrap()
    };
    let shards = (0..clients)
        .map(|i| draw(per_client, Some((i % 3) as u32)))
        .collect();
    let test = draw(600, None);
    FederatedData::new("blobs".into(), shards, test).unwrap()
}

fn config(privacy: Privacy, sampling: Sampling, rounds: u64) -> TrainConfig {
    TrainConfig {
        rounds,
        seed: Some(Seed::from_u64(5)),
        model: ModelSpec::Softmax {
            features: 4,
            classes: 3,
        },
        sampling,
        local: LocalTraining {
            epochs: 1,
            batch_size: 5,
            learning_rate: 0.1,
            proximal: 0.0,
            max_steps: None,
        },
        privacy,
        server: ServerOptimizer::Sgd {
            learning_rate: 1.0,
            momentum: 0.5,
        },
        accounting: AccountingConfig::default(),
        eval: EvalConfig::default(),
        audit: None,
    }
}

fn central(z: f64) -> Privacy {
    Privacy::CentralGaussian {
        clip: 1.0,
        noise_multiplier: Some(z),
        epsilon: None,
    }
}

fn run(cfg: TrainConfig, data: &FederatedData, threads: usize) -> Trainer<'_> {
    let mut t = Trainer::new(cfg, data, threads).unwrap();
    t.run(|_, _| Ok(())).unwrap();
    t
}

#[test]
fn fedavg_learns_and_reports_every_round() {
    let data = blobs(60, 20);
    let t = run(
        config(Privacy::None, Sampling::Fixed { cohort: 10 }, 15),
        &data,
        2,
    );
    let s = t.summary();
    assert_eq!(s.rounds_completed, 15);
    assert_eq!(t.history().len(), 15);
    assert!(
        t.history()
            .iter()
            .all(|m| m.sampled == 10 && m.epsilon.is_none())
    );
    let acc = s.final_accuracy.unwrap();
    assert!(acc > 0.9, "accuracy {acc}");
    let first = t.history()[0].test_loss.unwrap();
    let last = s.final_test_loss.unwrap();
    assert!(last < first, "test loss {first} → {last}");
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let data = blobs(40, 10);
    for privacy in [
        central(1.0),
        Privacy::Separated {
            epsilon: 4.0,
            magnitude_epsilon: None,
            epsilon0: None,
            clip: 1.0,
            central: None,
        },
    ] {
        let cfg = config(privacy, Sampling::Poisson { rate: 0.3 }, 4);
        let a = run(cfg.clone(), &data, 1);
        let b = run(cfg, &data, 3);
        assert_eq!(a.params(), b.params());
        let strip = |t: &Trainer<'_>| {
            t.history()
                .iter()
                .map(|m| (m.sampled, m.accuracy, m.epsilon, m.update_norm))
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&a), strip(&b));
    }
}

#[test]
fn different_seeds_give_different_runs() {
    let data = blobs(40, 10);
    let cfg = config(central(1.0), Sampling::Poisson { rate: 0.3 }, 2);
    let mut other = cfg.clone();
    other.seed = Some(Seed::from_u64(6));
    assert_ne!(run(cfg, &data, 1).params(), run(other, &data, 1).params());
}

#[test]
fn a_resumed_run_ends_where_an_uninterrupted_one_does() {
    let data = blobs(40, 10);
    for server in [
        ServerOptimizer::Sgd {
            learning_rate: 1.0,
            momentum: 0.9,
        },
        ServerOptimizer::Adam {
            learning_rate: 0.05,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
        },
    ] {
        let mut cfg = config(central(0.8), Sampling::Poisson { rate: 0.25 }, 6);
        cfg.server = server;
        let full = run(cfg.clone(), &data, 2);

        let mut first = Trainer::new(cfg.clone(), &data, 1).unwrap();
        for _ in 0..3 {
            first.step().unwrap();
        }
        let bytes = first.checkpoint().unwrap();
        drop(first);
        // The config may omit the seed: the checkpoint's is used.
        let mut no_seed = cfg.clone();
        no_seed.seed = None;
        let mut resumed = Trainer::resume(no_seed, &data, 3, &bytes).unwrap();
        assert_eq!(resumed.round(), 3);
        resumed.run(|_, _| Ok(())).unwrap();
        assert_eq!(resumed.params(), full.params());
        assert_eq!(resumed.events(), full.events());
        assert_eq!(
            resumed.summary().final_epsilon,
            full.summary().final_epsilon
        );
        assert_eq!(resumed.history().len(), 6);
    }
}

#[test]
fn damaged_or_foreign_checkpoints_are_refused() {
    let data = blobs(20, 10);
    let cfg = config(central(1.0), Sampling::Poisson { rate: 0.3 }, 3);
    let mut t = Trainer::new(cfg.clone(), &data, 1).unwrap();
    t.step().unwrap();
    let bytes = t.checkpoint().unwrap();
    let mut flipped = bytes.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 1;
    let msg = |r: Result<Trainer<'_>, super::FlError>| r.unwrap_err().to_string();
    assert!(msg(Trainer::resume(cfg.clone(), &data, 1, &flipped)).contains("checksum"));
    assert!(msg(Trainer::resume(cfg.clone(), &data, 1, &bytes[..40])).contains("checkpoint"));
    let mut other = cfg.clone();
    other.rounds = 4;
    assert!(msg(Trainer::resume(other, &data, 1, &bytes)).contains("different config"));
    let mut seeded = cfg.clone();
    seeded.seed = Some(Seed::from_u64(99));
    assert!(msg(Trainer::resume(seeded, &data, 1, &bytes)).contains("different seed"));
    let data2 = blobs(21, 10);
    assert!(msg(Trainer::resume(cfg, &data2, 1, &bytes)).contains("clients"));
}

#[test]
fn epsilon_equals_the_accountants_answer_for_the_events_emitted() {
    let data = blobs(50, 10);
    let (q, z, t) = (0.2, 1.1, 7);
    let tr = run(
        config(central(z), Sampling::Poisson { rate: q }, t),
        &data,
        2,
    );
    // An independent composition of the same events.
    let expect = epsilon_of(
        AccountantKind::Rdp,
        &DpEvent::poisson_gaussian(q, z, t),
        1e-5,
    )
    .unwrap();
    let got = tr.summary().final_epsilon.unwrap();
    assert!((got - expect).abs() <= 1e-9 * expect, "{got} vs {expect}");
    // ε grows every round.
    let eps: Vec<f64> = tr.history().iter().map(|m| m.epsilon.unwrap()).collect();
    assert!(eps.windows(2).all(|w| w[1] > w[0]));
}

#[test]
fn a_hypothetical_population_is_accounted_at_cohort_over_n_and_said() {
    // 50 clients, Poisson q = 0.2 (expected cohort 10); accounted as if drawn from 10,000.
    let data = blobs(50, 10);
    let (q, z, t, n) = (0.2, 1.1, 7, 10_000u64);
    let mut cfg = config(central(z), Sampling::Poisson { rate: q }, t);
    cfg.accounting.hypothetical_population = Some(n);
    assert_eq!(cfg.accounted_rate(50), 10.0 / n as f64);
    let tr = run(cfg.clone(), &data, 2);
    let expect = epsilon_of(
        AccountantKind::Rdp,
        &DpEvent::poisson_gaussian(10.0 / n as f64, z, t),
        1e-5,
    )
    .unwrap();
    let s = tr.summary();
    let got = s.final_epsilon.unwrap();
    assert!((got - expect).abs() <= 1e-9 * expect, "{got} vs {expect}");
    assert_eq!(s.hypothetical_population, Some(n));
    // The honest ε of the same run (its own 50 clients) is larger.
    let honest = epsilon_of(
        AccountantKind::Rdp,
        &DpEvent::poisson_gaussian(q, z, t),
        1e-5,
    )
    .unwrap();
    assert!(honest > 3.0 * got, "{honest} vs {got}");
    // The trained model does not depend on how it is accounted (same noise multiplier).
    let plain = run(
        config(central(z), Sampling::Poisson { rate: q }, t),
        &data,
        2,
    );
    assert_eq!(plain.summary().model_sha256, s.model_sha256);
    // A population smaller than the data, zero, or without privacy is refused.
    let err = |c: TrainConfig| Trainer::new(c, &data, 1).unwrap_err().to_string();
    cfg.accounting.hypothetical_population = Some(49);
    assert!(err(cfg.clone()).contains("hypothetical_population (49)"));
    cfg.accounting.hypothetical_population = Some(0);
    assert!(err(cfg.clone()).contains("hypothetical_population"));
    let mut none = config(Privacy::None, Sampling::Poisson { rate: q }, t);
    none.accounting.hypothetical_population = Some(n);
    assert!(err(none).contains("hypothetical_population"));
}

fn distributed(dropout: f64, secure_aggregation: bool) -> Privacy {
    Privacy::Distributed {
        share: Default::default(),
        clip: 1.0,
        bits: 16,
        beta: None,
        k: None,
        noise_stddev: Some(0.5),
        epsilon: None,
        min_clients: Some(4),
        secure_aggregation,
        secagg_policy: None,
        dropout,
    }
}

#[test]
fn distributed_rounds_are_accounted_with_their_actual_survivors() {
    let data = blobs(30, 10);
    let tr = run(
        config(distributed(0.3, false), Sampling::Fixed { cohort: 10 }, 5),
        &data,
        2,
    );
    let contributors: Vec<usize> = tr.history().iter().map(|m| m.contributors).collect();
    assert!(contributors.iter().any(|&c| c < 10), "{contributors:?}");
    let PrivacyPlan::Distributed { params, share, .. } = tr.plan() else {
        panic!("distributed plan")
    };
    let mut acc = RdpAccountant::new();
    for &c in &contributors {
        let e = privfed_distributed::round_event_for(*share, params, c).unwrap();
        acc.compose(&DpEvent::sampled_steps(e, 1.0, 1)).unwrap();
    }
    let expect = acc.get_epsilon(1e-5).unwrap();
    let got = tr.summary().final_epsilon.unwrap();
    assert!((got - expect).abs() <= 1e-9 * expect, "{got} vs {expect}");
    assert!(tr.params().iter().all(|p| p.is_finite()));
}

#[test]
fn secure_aggregation_gives_the_same_model_as_the_in_process_sum() {
    let data = blobs(20, 10);
    let a = run(
        config(distributed(0.1, false), Sampling::Fixed { cohort: 8 }, 3),
        &data,
        1,
    );
    let b = run(
        config(distributed(0.1, true), Sampling::Fixed { cohort: 8 }, 3),
        &data,
        2,
    );
    // The protocol's masks cancel exactly: same sums, same model, same events.
    assert!(b.history().iter().all(|m| !m.aborted));
    assert_eq!(a.params(), b.params());
    assert_eq!(a.events(), b.events());
}

/// The secure sum's clients join under `privacy.secagg_policy`: a floor above the cohort stops
/// the run at its first round with the rule's name; the floor at the cohort trains; a policy
/// without secure aggregation, or a malformed one, is a config error.
#[test]
fn the_secure_sums_policy_refuses_a_cohort_below_its_floor() {
    let data = blobs(20, 10);
    let with_policy = |secure_aggregation: bool, policy: privfed_secagg::ClientPolicy| {
        let mut p = distributed(0.0, secure_aggregation);
        if let Privacy::Distributed { secagg_policy, .. } = &mut p {
            *secagg_policy = Some(policy);
        }
        config(p, Sampling::Fixed { cohort: 6 }, 2)
    };
    let floor = |min_clients| privfed_secagg::ClientPolicy {
        min_clients,
        ..Default::default()
    };
    let mut t = Trainer::new(with_policy(true, floor(7)), &data, 1).unwrap();
    let e = t.run(|_, _| Ok(())).unwrap_err().to_string();
    assert!(e.contains("min_clients") && e.contains("n = 6"), "{e}");
    let t = run(with_policy(true, floor(6)), &data, 1);
    assert!(
        t.history()
            .iter()
            .all(|m| !m.aborted && m.contributors == 6)
    );
    let e = Trainer::new(with_policy(false, floor(6)), &data, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("secagg_policy"), "{e}");
    let bad = privfed_secagg::ClientPolicy {
        min_threshold_fraction: 1.0,
        ..Default::default()
    };
    let e = Trainer::new(with_policy(true, bad), &data, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("min_threshold_fraction"), "{e}");
}

#[test]
fn an_aborted_secure_aggregation_round_releases_and_accounts_nothing() {
    let data = blobs(20, 10);
    // Half the cohort of 6 drops: the protocol's threshold (> n/2) is not met in some rounds.
    let t = run(
        config(distributed(0.5, true), Sampling::Fixed { cohort: 6 }, 8),
        &data,
        2,
    );
    let aborted: Vec<_> = t.history().iter().filter(|m| m.aborted).collect();
    assert!(!aborted.is_empty(), "no round aborted; pick another seed");
    assert!(
        aborted
            .iter()
            .all(|m| m.contributors == 0 && m.update_norm == 0.0)
    );
    let released = t.history().iter().filter(|m| !m.aborted).count();
    assert_eq!(t.events().len(), released);
}

#[test]
fn a_budget_stop_never_overshoots() {
    let data = blobs(40, 10);
    let mut cfg = config(central(1.0), Sampling::Poisson { rate: 0.3 }, 200);
    let probe = run(
        config(central(1.0), Sampling::Poisson { rate: 0.3 }, 10),
        &data,
        2,
    );
    let eps: Vec<f64> = probe.history().iter().map(|m| m.epsilon.unwrap()).collect();
    // A budget between the 6th and 7th round's ε.
    let budget = (eps[5] + eps[6]) / 2.0;
    cfg.accounting.budget = Some(budget);
    let t = run(cfg, &data, 2);
    let s = t.summary();
    assert_eq!(s.rounds_completed, 6);
    assert!(s.final_epsilon.unwrap() <= budget);
    let stopped = s.stopped.unwrap();
    assert_eq!(stopped.round, 7);
    assert!(stopped.reason.contains("budget"));

    // Distributed rounds with fewer survivors than planned carry less noise: the actual event
    // is checked too, and the round discarded.
    let mut cfg = config(distributed(0.5, false), Sampling::Fixed { cohort: 10 }, 50);
    let probe = run(cfg.clone(), &data, 2);
    let eps: Vec<f64> = probe.history().iter().map(|m| m.epsilon.unwrap()).collect();
    let budget = eps[eps.len() / 2];
    cfg.accounting.budget = Some(budget);
    let t = run(cfg, &data, 2);
    assert!(t.summary().final_epsilon.unwrap() <= budget);
    assert!(t.summary().stopped.is_some());
}

#[test]
fn local_mechanisms_train_and_account_pure_reports() {
    let data = blobs(60, 10);
    for (privacy, central_layer) in [
        (
            Privacy::Separated {
                epsilon: 8.0,
                magnitude_epsilon: Some(1.0),
                epsilon0: Some(2.5),
                clip: 1.0,
                central: None,
            },
            false,
        ),
        (
            Privacy::Privunitg {
                epsilon: 8.0,
                clip: 0.5,
                central: Some(CentralLayer {
                    clip: 20.0,
                    noise_multiplier: Some(1.0),
                    epsilon: None,
                }),
            },
            true,
        ),
    ] {
        let t = run(
            config(privacy, Sampling::Poisson { rate: 0.5 }, 3),
            &data,
            2,
        );
        assert!(t.params().iter().all(|p| p.is_finite()));
        let s = t.summary();
        assert!(s.local_epsilon.is_some());
        assert_eq!(s.noise_multiplier.is_some(), central_layer);
        let kind = if central_layer {
            "gaussian"
        } else {
            "local_sampled"
        };
        let first = serde_json::to_string(&t.events()[0]).unwrap();
        assert!(first.contains(kind), "{first}");
    }
}

#[test]
fn the_mvu_vector_mechanism_trains_and_accounts_its_lemma_6_epsilon() {
    let data = blobs(30, 10);
    let t = run(
        config(
            Privacy::Mvu {
                metric_epsilon: 2.0,
                input_bits: 3,
                output_bits: 3,
                power: 2,
                clip: 1.0,
                dither_bound: None,
                central: None,
            },
            Sampling::Poisson { rate: 0.5 },
            2,
        ),
        &data,
        2,
    );
    assert!(t.params().iter().all(|p| p.is_finite()));
    let PrivacyPlan::Local {
        mechanism: super::privacy::LocalMechanism::Mvu(m),
        epsilon,
        ..
    } = t.plan()
    else {
        panic!("an MVU plan")
    };
    // Lemma 6: ε_metric·(dither_bound/radius)^p with the default dither bound 1.25·clip.
    let lemma6 = m.scalar().metric_epsilon() * 1.25f64.powi(2);
    assert!(
        (epsilon - lemma6).abs() <= 1e-12 * lemma6,
        "{epsilon} vs {lemma6}"
    );
    let first = serde_json::to_string(&t.events()[0]).unwrap();
    assert!(first.contains("pure_dp"), "{first}");
}

#[test]
fn bad_configs_are_refused_with_the_field_named() {
    let data = blobs(10, 5);
    let err = |cfg: TrainConfig| Trainer::new(cfg, &data, 1).unwrap_err().to_string();
    let mut c = config(Privacy::None, Sampling::Fixed { cohort: 11 }, 3);
    assert!(err(c.clone()).contains("sampling.cohort"));
    c.sampling = Sampling::Poisson { rate: 1.5 };
    assert!(err(c.clone()).contains("sampling.rate"));
    c.sampling = Sampling::Poisson { rate: 0.5 };
    c.accounting.budget = Some(1.0);
    assert!(err(c.clone()).contains("budget"));
    let mut c = config(
        Privacy::CentralGaussian {
            clip: 1.0,
            noise_multiplier: Some(1.0),
            epsilon: Some(1.0),
        },
        Sampling::Poisson { rate: 0.5 },
        3,
    );
    assert!(err(c.clone()).contains("exactly one"));
    c.privacy = distributed(0.0, false);
    c.model = ModelSpec::Softmax {
        features: 5,
        classes: 3,
    };
    assert!(err(c.clone()).contains("features"));
    // Impossible privacy: 2 bits cannot hold the sum at this noise.
    let c = config(
        Privacy::Distributed {
            share: Default::default(),
            clip: 1.0,
            bits: 2,
            beta: None,
            k: None,
            noise_stddev: None,
            epsilon: Some(0.01),
            min_clients: None,
            secure_aggregation: false,
            secagg_policy: None,
            dropout: 0.0,
        },
        Sampling::Poisson { rate: 0.5 },
        100,
    );
    assert!(Trainer::new(c, &data, 1).is_err());
    // Unknown keys are refused by the config types.
    let json = r#"{"rounds": 3, "model": {"kind": "softmax", "features": 4, "classes": 3},
                   "sampling": {"kind": "poisson", "rate": 0.5}, "lokal": {}}"#;
    let e = serde_json::from_str::<TrainConfig>(json)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lokal"), "{e}");
}

#[test]
fn a_step_after_the_end_is_finished() {
    let data = blobs(10, 5);
    let mut t = Trainer::new(
        config(Privacy::None, Sampling::Fixed { cohort: 2 }, 1),
        &data,
        1,
    )
    .unwrap();
    assert!(matches!(t.step().unwrap(), StepOutcome::Round(_)));
    assert_eq!(t.step().unwrap(), StepOutcome::Finished);
    assert!(t.is_finished());
}

/// `local_sgd` (the public entry to the loop's local training): one epoch with one full batch
/// is one gradient step from the global model; a cap of 0 steps changes nothing; the same
/// generator gives the same result.
#[test]
fn local_sgd_is_the_loops_local_training() {
    use super::train::local_sgd;
    use privfed_learn::nn::Scratch;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;
    let data = blobs(3, 20);
    let shard = &data.clients[0];
    let model = ModelSpec::Softmax {
        features: 4,
        classes: 3,
    }
    .build()
    .unwrap();
    let global = model.init(&mut seeded_rng_for_experiments(1));
    let full = LocalTraining {
        epochs: 1,
        batch_size: shard.rows(),
        learning_rate: 0.5,
        proximal: 0.0,
        max_steps: None,
    };
    let (theta, loss) = local_sgd(
        model.as_ref(),
        shard,
        &global,
        &full,
        &mut seeded_rng_for_experiments(2),
    )
    .unwrap();
    let mut grad = vec![0.0f32; global.len()];
    let want_loss = model
        .loss_grad(
            &global,
            &shard.range(0, shard.rows()),
            &mut grad,
            &mut Scratch::default(),
        )
        .unwrap();
    assert!((loss - want_loss).abs() < 1e-5, "{loss} vs {want_loss}");
    for ((t, g0), g) in theta.iter().zip(&global).zip(&grad) {
        assert!((t - (g0 - 0.5 * g)).abs() < 1e-5);
    }
    let none = LocalTraining {
        max_steps: Some(0),
        ..full
    };
    let (same, _) = local_sgd(
        model.as_ref(),
        shard,
        &global,
        &none,
        &mut seeded_rng_for_experiments(2),
    )
    .unwrap();
    assert_eq!(same, global);
    let small = LocalTraining {
        batch_size: 3,
        epochs: 2,
        ..full
    };
    let a = local_sgd(
        model.as_ref(),
        shard,
        &global,
        &small,
        &mut seeded_rng_for_experiments(3),
    );
    let b = local_sgd(
        model.as_ref(),
        shard,
        &global,
        &small,
        &mut seeded_rng_for_experiments(3),
    );
    assert_eq!(a.unwrap(), b.unwrap());
}

/// A run whose local training blows up stops as diverged in that round, before anything is
/// privatized, released or accounted; the grid around it can go on (the run returns normally).
#[test]
fn a_local_update_that_is_not_finite_stops_the_run_as_diverged() {
    use super::train::StopKind;
    let data = blobs(20, 10);
    let mut cfg = config(central(1.0), Sampling::Fixed { cohort: 5 }, 4);
    // Finite as a config, infinite as the f32 step the client takes.
    cfg.local.learning_rate = 1e39;
    let t = run(cfg, &data, 2);
    let s = t.summary();
    let st = s.stopped.expect("stopped");
    assert_eq!((st.kind, st.round), (StopKind::Diverged, 1));
    assert!(st.reason.contains("5 of 5 clients"), "{}", st.reason);
    assert_eq!(s.rounds_completed, 0);
    assert!(t.events().is_empty(), "nothing may be accounted");
    assert_eq!(s.final_epsilon, Some(0.0));
    assert!(t.params().iter().all(|p| p.is_finite()));

    // The same run with a sane step trains all its rounds.
    let t = run(
        config(central(1.0), Sampling::Fixed { cohort: 5 }, 4),
        &data,
        2,
    );
    assert!(t.summary().stopped.is_none());
    assert_eq!(t.summary().rounds_completed, 4);
}

/// A server step that overflows the model: the round was released and accounted, so it is
/// recorded, and the run stops after it as diverged.
#[test]
fn a_server_step_that_overflows_stops_the_run_after_its_round() {
    use super::train::StopKind;
    let data = blobs(20, 10);
    let mut cfg = config(central(1.0), Sampling::Fixed { cohort: 5 }, 4);
    cfg.server = ServerOptimizer::Sgd {
        learning_rate: 1e39,
        momentum: 0.0,
    };
    let t = run(cfg, &data, 2);
    let s = t.summary();
    let st = s.stopped.expect("stopped");
    assert_eq!((st.kind, st.round), (StopKind::Diverged, 2));
    assert!(
        st.reason.contains("server's step in round 1"),
        "{}",
        st.reason
    );
    assert_eq!(s.rounds_completed, 1);
    assert_eq!(t.events().len(), 1, "the released round is accounted");
    assert!(s.final_epsilon.unwrap() > 0.0);
    assert!(
        t.history()[0].accuracy.is_none(),
        "no evaluation of a non-finite model"
    );
}

#[test]
fn a_fixed_cohort_can_be_accounted_as_sampling_without_replacement() {
    // 50 clients, cohort 10, z = 1.1 over the clip: each round is the Gaussian with noise
    // multiplier z/2 (replace-one sensitivity 2·clip) on 10 of 50 drawn without replacement.
    let data = blobs(50, 10);
    let (z, t) = (1.1, 5u64);
    let mut cfg = config(central(z), Sampling::Fixed { cohort: 10 }, t);
    cfg.accounting.fixed_cohort = FixedCohortAccounting::WithoutReplacement;
    let tr = run(cfg.clone(), &data, 2);
    let one = DpEvent::SampledWithoutReplacement {
        source_dataset_size: 50,
        sample_size: 10,
        event: Box::new(DpEvent::Gaussian {
            noise_multiplier: z / 2.0,
        }),
    };
    let mut acc = RdpAccountant::with_relation(
        privfed_accounting::rdp::default_orders(),
        privfed_accounting::NeighbouringRelation::ReplaceOne,
    )
    .unwrap();
    acc.compose_repeated(&one, t).unwrap();
    let expect = acc.get_epsilon(1e-5).unwrap();
    let s = tr.summary();
    let got = s.final_epsilon.unwrap();
    assert!((got - expect).abs() <= 1e-12 * expect, "{got} vs {expect}");
    assert_eq!(
        s.neighbouring_relation,
        privfed_accounting::NeighbouringRelation::ReplaceOne
    );
    assert_eq!(tr.events(), vec![one; t as usize]);
    // The default stays no amplification under add/remove-one.
    let plain = run(
        config(central(z), Sampling::Fixed { cohort: 10 }, t),
        &data,
        2,
    );
    let expect_plain = epsilon_of(
        AccountantKind::Rdp,
        &DpEvent::poisson_gaussian(1.0, z, t),
        1e-5,
    )
    .unwrap();
    let s = plain.summary();
    assert!((s.final_epsilon.unwrap() - expect_plain).abs() <= 1e-12 * expect_plain);
    assert_eq!(
        s.neighbouring_relation,
        privfed_accounting::NeighbouringRelation::AddOrRemoveOne
    );
    // An ε target calibrates z for the without-replacement event.
    let mut target = config(
        Privacy::CentralGaussian {
            clip: 1.0,
            noise_multiplier: None,
            epsilon: Some(3.0),
        },
        Sampling::Fixed { cohort: 10 },
        t,
    );
    target.accounting.fixed_cohort = FixedCohortAccounting::WithoutReplacement;
    let e = run(target, &data, 2).summary().final_epsilon.unwrap();
    assert!(e <= 3.0 && e > 3.0 * (1.0 - 1e-4), "{e}");
    // Where it does not apply, the config says so.
    for (mutate, what) in [
        (
            (|c: &mut TrainConfig| c.sampling = Sampling::Poisson { rate: 0.2 })
                as fn(&mut TrainConfig),
            "sampling.kind",
        ),
        (
            |c: &mut TrainConfig| c.accounting.accountant = AccountantKind::Pld,
            "accounting.accountant",
        ),
        (
            |c: &mut TrainConfig| c.privacy = Privacy::None,
            "central_gaussian",
        ),
    ] {
        let mut bad = cfg.clone();
        mutate(&mut bad);
        let err = match Trainer::new(bad, &data, 1) {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(what), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Canary audits (`[audit]`).

/// `clients` clients of `per_client` rows with 100 Gaussian features and 10 classes given by a
/// fixed random linear rule: a softmax of 1,010 parameters, enough dimensions for canaries.
fn wide(clients: usize, per_client: usize) -> FederatedData {
    let (f, k) = (100usize, 10usize);
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(12);
    let w: Vec<f32> = (0..f * k).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let mut draw = |n: usize| {
        let mut x = Vec::with_capacity(n * f);
        let mut y = Vec::with_capacity(n);
        for _ in 0..n {
            let row: Vec<f32> = (0..f).map(|_| rng.random_range(-1.0f32..1.0)).collect();
            let score = |c: usize| (0..f).map(|j| row[j] * w[c * f + j]).sum::<f32>();
            let label = (0..k)
                .max_by(|a, b| score(*a).total_cmp(&score(*b)))
                .unwrap_or(0);
            x.extend(row);
            y.push(label as u32);
        }
        Shard::dense(f, k, x, y).unwrap()
    };
    let shards = (0..clients).map(|_| draw(per_client)).collect();
    let test = draw(200);
    FederatedData::new("wide".into(), shards, test).unwrap()
}

fn audited(privacy: Privacy, sampling: Sampling, rounds: u64, canaries: usize) -> TrainConfig {
    let mut c = config(privacy, sampling, rounds);
    c.model = ModelSpec::Softmax {
        features: 100,
        classes: 10,
    };
    c.audit = Some(AuditConfig {
        canaries,
        confidence: 0.95,
        guesses: None,
        norm: None,
    });
    c
}

fn audits(t: &Trainer<'_>) -> Vec<crate::audit::RoundAudit> {
    t.history().iter().map(|m| m.audit.unwrap()).collect()
}

/// Power: without privacy, 100 canaries (50 guesses) are told apart from the final model and the
/// one-run bound at 95% exceeds 2 (all 50 guesses right gives 2.78, the most 50 guesses can
/// show). Fixed seed; a failure would mean the canaries do not reach the model.
#[test]
fn without_privacy_the_canaries_show_a_large_epsilon() {
    let data = wide(40, 20);
    let t = run(
        audited(Privacy::None, Sampling::Poisson { rate: 0.25 }, 10, 100),
        &data,
        2,
    );
    let s = t.summary();
    let a = s.audit.unwrap();
    eprintln!("privacy off: {a:?}");
    assert_eq!((a.canaries, a.guesses), (100, 50));
    assert_eq!(a.correct, 50, "{a:?}");
    assert!(a.epsilon_lower_bound > 2.0, "{a:?}");
    // Against a Gaussian claim the same 50 right guesses bound ε higher still.
    assert!(
        a.epsilon_lower_bound_gaussian.unwrap() > a.epsilon_lower_bound,
        "{a:?}"
    );
    assert!(a.epsilon_estimate.unwrap() > 2.0, "{a:?}");
    // The known-null reading sees them too, and its p-value rejects "no trace".
    assert!(a.epsilon_estimate_known_null.unwrap() > 2.0, "{a:?}");
    assert!(a.known_null_p_value.unwrap() < 1e-6, "{a:?}");
    // Every round is audited; the summary is the last round's; canaries are not contributors.
    let h = audits(&t);
    assert_eq!(h.len(), 10);
    assert_eq!(h[9].epsilon_lower_bound, a.epsilon_lower_bound);
    assert!(t.history().iter().all(|m| m.contributors == m.sampled));
    assert_eq!(s.final_epsilon, None);
    // Without privacy the canary norm is each round's largest real update norm: it follows
    // the updates (they shrink as the model learns) and is above the mean update's norm.
    assert_eq!(a.norm, Some(h[9].norm));
    assert!(
        h.iter()
            .all(|r| r.norm > 0.0 && r.accounted_canary_epsilon.is_none())
    );
    assert!(h[0].norm != h[9].norm, "{} {}", h[0].norm, h[9].norm);
    for (m, r) in t.history().iter().zip(&h) {
        assert!(
            r.norm >= m.update_norm,
            "{r:?} vs the mean update {}",
            m.update_norm
        );
    }
}

/// One home for the canaries: a run draws exactly [`crate::audit::canary_directions`] and
/// [`crate::audit::canary_inclusion`] of its seed (what `privfed.audit` and the Flower audit
/// use), and another seed draws others.
#[test]
fn a_runs_canaries_are_the_seeds_canaries() {
    use crate::audit::{Canaries, canary_directions, canary_inclusion};
    let data = wide(20, 10);
    let cfg = audited(central(1.0), Sampling::Poisson { rate: 0.5 }, 1, 20);
    let seed = cfg.seed.unwrap();
    let t = Trainer::new(cfg.clone(), &data, 1).unwrap();
    assert_eq!(t.canary_inclusion().unwrap(), canary_inclusion(&seed, 20));
    let c = Canaries::from_seed(cfg.audit.as_ref().unwrap(), 1010, None, 1e-5, &seed).unwrap();
    assert_eq!(c.directions(), canary_directions(&seed, 20, 1010).unwrap());
    assert_eq!(c.included(), canary_inclusion(&seed, 20));
    let other = Seed::from_u64(u64::MAX);
    assert_ne!(c.directions(), canary_directions(&other, 20, 1010).unwrap());
    assert!(canary_directions(&seed, 20, 0).is_err());
}

/// The canary norm: a configured norm wins; under central DP it defaults to the clip; without
/// privacy it is the round's largest real update, else the previous round's, else 1.
#[test]
fn the_canary_norm_is_the_largest_contribution_a_client_can_make() {
    let data = wide(20, 10);
    let t = run(
        audited(central(1.0), Sampling::Poisson { rate: 0.5 }, 2, 20),
        &data,
        1,
    );
    assert!(audits(&t).iter().all(|r| r.norm == 1.0));
    let mut cfg = audited(Privacy::None, Sampling::Poisson { rate: 0.5 }, 2, 20);
    cfg.audit.as_mut().unwrap().norm = Some(0.25);
    let fixed = run(cfg.clone(), &data, 1);
    assert!(audits(&fixed).iter().all(|r| r.norm == 0.25));
    use crate::audit::Canaries;
    use privfed_mechanisms::rng::NoiseRng;
    let new = |norm: Option<f64>, clip_and_z: Option<(f64, f64)>| {
        let a = AuditConfig {
            canaries: 4,
            confidence: 0.95,
            guesses: None,
            norm,
        };
        Canaries::new(
            &a,
            3,
            clip_and_z,
            1e-5,
            NoiseRng::seed_from_u64,
            &mut NoiseRng::seed_from_u64(99),
        )
        .unwrap()
    };
    let plain = new(None, None);
    assert_eq!(plain.norm_for_round(Some(2.5), Some(3.0)), 2.5);
    assert_eq!(plain.norm_for_round(None, Some(3.0)), 3.0);
    assert_eq!(plain.norm_for_round(Some(0.0), None), 1.0);
    assert_eq!(plain.norm_for_round(None, None), 1.0);
    assert_eq!(
        new(None, Some((0.5, 2.0))).norm_for_round(Some(2.5), None),
        0.5
    );
    assert_eq!(
        new(Some(0.7), Some((0.5, 2.0))).norm_for_round(Some(2.5), None),
        0.7
    );
}

/// Honesty: with DP-FedAvg and every client in every round (rate 1, so the canaries, inserted
/// every round, have exactly the accounted ε of the real clients), the one-run bound at 95% stays
/// below the accounted ε. For a correct mechanism this fails with probability at most 5% over
/// the seed; the seed is fixed. Without the noise (z → 0) the bound is 2.78 (all guesses right),
/// above the accounted ε here.
#[test]
fn with_central_dp_the_lower_bound_stays_below_the_accounted_epsilon() {
    let data = wide(20, 20);
    let t = run(
        audited(central(6.0), Sampling::Poisson { rate: 1.0 }, 10, 100),
        &data,
        2,
    );
    let s = t.summary();
    let eps = s.final_epsilon.unwrap();
    let a = s.audit.unwrap();
    eprintln!("accounted ε {eps}, audit {a:?}");
    assert!(eps > 1.5 && eps < 2.78, "accounted ε {eps}");
    // The canaries' own guarantee (exact GDP, 10 rounds at z = 6) is at most the RDP account.
    let canary_eps = a.accounted_canary_epsilon.unwrap();
    assert!(
        canary_eps > 1.5 && canary_eps <= eps,
        "{canary_eps} vs {eps}"
    );
    assert_eq!(a.norm, Some(1.0));
    assert!(a.epsilon_lower_bound < eps, "{a:?} vs accounted {eps}");
    // The one-shot estimate is an estimate, not a bound: its μ̂ is (about) median-unbiased with
    // standard error √(1/k_in + 1/k_out) (0.20 here), so it may exceed the canaries' μ = √T/z by
    // sampling error, but by more than 3.29 standard errors only with probability ≈ 5·10⁻⁴ if
    // it is not biased upward (the statistical test of that is in privfed-audit).
    let k_in = a.included as f64;
    let se = (1.0 / k_in + 1.0 / (100.0 - k_in)).sqrt();
    let mu = 10f64.sqrt() / 6.0;
    let ceiling = privfed_audit::gdp::epsilon_for_mu(mu + 3.29 * se, 1e-5).unwrap();
    let e = a.epsilon_estimate.unwrap();
    eprintln!("one-shot ε̂ {e} (ceiling {ceiling}), canaries' ε {canary_eps}, accounted {eps}");
    assert!(e <= ceiling, "one-shot ε̂ {e} vs {ceiling}");
    // The known-null reading: μ̂ = √d·m̂_in has standard error 1/√k_in under its null; the same
    // 3.29-standard-error ceiling.
    let kn = a.epsilon_estimate_known_null.unwrap();
    let kn_ceiling = privfed_audit::gdp::epsilon_for_mu(mu + 3.29 / k_in.sqrt(), 1e-5).unwrap();
    eprintln!("known-null ε̂ {kn} (ceiling {kn_ceiling})");
    assert!(kn <= kn_ceiling, "known-null ε̂ {kn} vs {kn_ceiling}");
    // The canaries' curve is exactly Gaussian (μ = √T/z), so the Gaussian one-run bound is a
    // bound for them: below their own ε, with the same 5% failure probability over the seed.
    for r in audits(&t) {
        let g = r.epsilon_lower_bound_gaussian.unwrap();
        assert!(
            g < r.accounted_canary_epsilon.unwrap(),
            "Gaussian bound {g} vs the canaries' ε: {r:?}"
        );
    }
    for r in audits(&t) {
        assert!(r.epsilon_lower_bound < eps, "{r:?} vs accounted {eps}");
        assert!(r.accounted_canary_epsilon.unwrap() <= canary_eps, "{r:?}");
    }
    // The canaries were in the aggregate: the same run at a tiny noise finds them all.
    let loud = run(
        audited(central(1e-3), Sampling::Poisson { rate: 1.0 }, 10, 100),
        &data,
        2,
    );
    let la = loud.summary().audit.unwrap();
    eprintln!("z = 1e-3: {la:?}");
    assert_eq!(la.correct, 50, "{la:?}");
    assert!(la.epsilon_lower_bound > eps, "{la:?}");
}

/// The audit is a function of the seed: the same seed (any thread count) gives the same audit,
/// another seed other inclusion bits.
#[test]
fn the_audit_is_determined_by_the_seed() {
    let data = wide(20, 10);
    let cfg = audited(central(1.0), Sampling::Poisson { rate: 0.5 }, 4, 20);
    let a = run(cfg.clone(), &data, 1);
    let b = run(cfg.clone(), &data, 2);
    assert_eq!(audits(&a), audits(&b));
    assert_eq!(a.summary().audit, b.summary().audit);
    assert_eq!(a.params(), b.params());
    let mut other = cfg.clone();
    other.seed = Some(Seed::from_u64(6));
    let c = Trainer::new(other, &data, 1).unwrap();
    let d = Trainer::new(cfg, &data, 1).unwrap();
    let bits = |t: &Trainer<'_>| t.canary_inclusion().unwrap().to_vec();
    assert_ne!(bits(&c), bits(&d));
}

/// A run resumed from a checkpoint gives the audit of an uninterrupted run, and a checkpoint
/// of a run without `[audit]` cannot resume a run with it.
#[test]
fn a_resumed_run_gives_the_same_audit() {
    let data = wide(20, 10);
    let cfg = audited(central(1.0), Sampling::Poisson { rate: 0.5 }, 6, 20);
    let full = run(cfg.clone(), &data, 2);
    let mut first = Trainer::new(cfg.clone(), &data, 1).unwrap();
    for _ in 0..3 {
        first.step().unwrap();
    }
    let bytes = first.checkpoint().unwrap();
    drop(first);
    let mut resumed = Trainer::resume(cfg.clone(), &data, 2, &bytes).unwrap();
    resumed.run(|_, _| Ok(())).unwrap();
    assert_eq!(audits(&resumed), audits(&full));
    assert_eq!(resumed.summary().audit, full.summary().audit);
    assert_eq!(resumed.params(), full.params());

    let mut plain = cfg.clone();
    plain.audit = None;
    let mut p = Trainer::new(plain, &data, 1).unwrap();
    p.step().unwrap();
    let e = Trainer::resume(cfg, &data, 1, &p.checkpoint().unwrap()).unwrap_err();
    assert!(e.to_string().contains("different config"), "{e}");
}

#[test]
fn bad_audit_configs_are_refused_with_the_field_named() {
    let data = wide(10, 5);
    let err = |cfg: TrainConfig| match Trainer::new(cfg, &data, 1) {
        Ok(_) => panic!("the config was accepted"),
        Err(e) => e.to_string(),
    };
    let base = audited(Privacy::None, Sampling::Poisson { rate: 0.5 }, 2, 10);
    let with = |f: &dyn Fn(&mut AuditConfig)| {
        let mut c = base.clone();
        f(c.audit.as_mut().unwrap());
        c
    };
    for (cfg, key) in [
        (with(&|a| a.canaries = 1), "audit.canaries"),
        (with(&|a| a.canaries = MAX_CANARIES + 1), "audit.canaries"),
        (with(&|a| a.confidence = 1.0), "audit.confidence"),
        (with(&|a| a.confidence = f64::NAN), "audit.confidence"),
        (with(&|a| a.guesses = Some(3)), "audit.guesses"),
        (with(&|a| a.guesses = Some(12)), "audit.guesses"),
        (with(&|a| a.norm = Some(0.0)), "audit.norm"),
        // 1,010 parameters × 2^15 canaries: more numbers than the directions may hold.
        (with(&|a| a.canaries = 1 << 15), "audit.canaries"),
    ] {
        let e = err(cfg);
        assert!(e.contains(key), "{key}: {e}");
    }
    // Every privacy mode admits canaries (they go through the clients' mechanism).
    for privacy in [
        Privacy::Privunitg {
            epsilon: 5.0,
            clip: 1.0,
            central: None,
        },
        distributed(0.0, false),
    ] {
        let mut c = base.clone();
        c.privacy = privacy;
        assert!(Trainer::new(c, &data, 1).is_ok());
    }
    // Unknown keys in [audit] are refused.
    let toml = "rounds = 3\nmodel = { kind = \"softmax\", features = 100, classes = 10 }\n\
                sampling = { kind = \"poisson\", rate = 0.5 }\n[audit]\ncanaries = 10\ncanries = 3\n";
    let e = toml::from_str::<TrainConfig>(toml).unwrap_err().to_string();
    assert!(e.contains("canries"), "{e}");
    let ok = "rounds = 3\nmodel = { kind = \"softmax\", features = 100, classes = 10 }\n\
              sampling = { kind = \"poisson\", rate = 0.5 }\n[audit]\ncanaries = 10\n";
    let c = toml::from_str::<TrainConfig>(ok).unwrap();
    assert_eq!(c.audit.unwrap().confidence, 0.95);
    assert_eq!(c.audit.unwrap().guesses(), 4);
}

/// Local DP: canaries go through the clients' randomizer. PrivUnitG at ε = 1 per report, clip 1,
/// no central layer; one round with its single real client (a fixed cohort of 1: every client in
/// every round, so the accounted ε is the canaries' ε too); 1,000 canaries of norm 50 (the
/// randomizer clips them to 1), 100 guesses at 95%. The one-run bound stays below the accounted
/// ε; with the planted bug (canaries skip the mechanism: their raw update, neither clipped nor
/// randomized) it exceeds it. Fixed seed: the honest bound exceeds a true ε with probability at
/// most 5%. (Skipping only the randomization, at norm 1, is a real but small violation — the
/// one real report's noise still hides a canary, ε̂ ≈ 1.7 at δ = 10⁻⁵ — that 1,000 canaries do
/// not resolve: one-run bound 0.60.)
#[test]
fn local_dp_canaries_are_privatized_and_a_skipped_mechanism_is_caught() {
    use crate::train::CanaryBug;
    let data = wide(1, 20);
    let privacy = Privacy::Privunitg {
        epsilon: 1.0,
        clip: 1.0,
        central: None,
    };
    let mut cfg = audited(privacy, Sampling::Fixed { cohort: 1 }, 1, 1000);
    let a = cfg.audit.as_mut().unwrap();
    a.guesses = Some(100);
    a.norm = Some(50.0);
    let honest = run(cfg.clone(), &data, 2);
    let s = honest.summary();
    let (a, eps) = (s.audit.unwrap(), s.final_epsilon.unwrap());
    eprintln!("local DP: {a:?}, accounted {eps}");
    assert!(a.epsilon_lower_bound < eps, "{a:?} vs {eps}");
    let mut bug = Trainer::new(cfg, &data, 2).unwrap();
    bug.canary_bug = Some(CanaryBug::SkipMechanism);
    bug.run(|_, _| Ok(())).unwrap();
    let b = bug.summary().audit.unwrap();
    eprintln!("local DP, canaries skip the mechanism: {b:?}");
    assert!(b.epsilon_lower_bound > eps, "{b:?} vs {eps}");
    // Without a configured norm the canaries sit at the clip.
    let mut cfg = audited(privacy, Sampling::Fixed { cohort: 1 }, 1, 10);
    cfg.audit.as_mut().unwrap().norm = None;
    let t = run(cfg, &data, 1);
    assert_eq!(t.summary().audit.unwrap().norm, Some(1.0));
}

/// Distributed DP: canaries are encoded like clients (clip, rotation, rounding, their own noise
/// share) and summed with them. Two real clients (a fixed cohort: rate 1), σ = 2 per client,
/// one round; 1,000 canaries of norm 10 (the encoder clips them to 1), 100 guesses at 95%. The
/// bound stays below the accounted ε (the canaries' own shares add noise the accounting does not
/// count); with the planted bug (canaries encoded with the clip raised to their norm and without
/// their noise share) it exceeds it. (Dropping only the canaries' shares is not a violation of
/// this claim: the accounting counts only the real clients' shares, which remain.)
#[test]
fn distributed_dp_canaries_are_encoded_and_an_unclipped_encoding_is_caught() {
    use crate::train::CanaryBug;
    let data = wide(2, 20);
    let mut privacy = distributed(0.0, false);
    if let Privacy::Distributed {
        noise_stddev,
        min_clients,
        bits,
        k,
        ..
    } = &mut privacy
    {
        *noise_stddev = Some(2.0);
        *min_clients = Some(2);
        // A modular range of 64 aggregate standard deviations: the canaries' sum fits in it.
        *bits = 30;
        *k = Some(64.0);
    }
    let mut cfg = audited(privacy, Sampling::Fixed { cohort: 2 }, 1, 1000);
    let a = cfg.audit.as_mut().unwrap();
    a.guesses = Some(100);
    a.norm = Some(10.0);
    let honest = run(cfg.clone(), &data, 2);
    let s = honest.summary();
    let (a, eps) = (s.audit.unwrap(), s.final_epsilon.unwrap());
    eprintln!("distributed DP: {a:?}, accounted {eps}");
    assert!(a.epsilon_lower_bound < eps, "{a:?} vs {eps}");
    let mut bug = Trainer::new(cfg, &data, 2).unwrap();
    bug.canary_bug = Some(CanaryBug::UnclippedEncoding);
    bug.run(|_, _| Ok(())).unwrap();
    let b = bug.summary().audit.unwrap();
    eprintln!("distributed DP, canaries unclipped: {b:?}");
    assert!(b.epsilon_lower_bound > eps, "{b:?} vs {eps}");
}

/// Every check of the privacy section, one row each, with the exact message a user sees
/// (`privfed fl train`, Python's `privfed.fl`): a check that disappears, or a message that
/// changes, fails here. A row is the `[privacy]` line (and, for the checks across sections, the
/// `[accounting]` line) of a run config over 10 clients with a fixed cohort of 5, and the message
/// after `config: `; `{policy}` stands for the secure-aggregation policy's own message. The
/// rows of the privacy section (and the population smaller than the data) are refused by
/// [`PrivacyPlan::new`] alone too.
const BAD_PRIVACY: &[(&str, &str)] = &[
    // central_gaussian
    (
        r#"privacy = { mechanism = "central_gaussian", clip = 0.0, noise_multiplier = 1.0 }"#,
        "privacy.clip must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "central_gaussian", clip = nan, noise_multiplier = 1.0 }"#,
        "privacy.clip must be finite and > 0 (got NaN)",
    ),
    (
        r#"privacy = { mechanism = "central_gaussian", clip = 1.0, noise_multiplier = 1.0, epsilon = 1.0 }"#,
        "privacy: give exactly one of noise_multiplier and epsilon",
    ),
    (
        r#"privacy = { mechanism = "central_gaussian", clip = 1.0 }"#,
        "privacy: give exactly one of noise_multiplier and epsilon",
    ),
    (
        r#"privacy = { mechanism = "central_gaussian", clip = 1.0, noise_multiplier = 0.0 }"#,
        "privacy.noise_multiplier must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "central_gaussian", clip = 1.0, epsilon = -1.0 }"#,
        "privacy.epsilon must be finite and > 0 (got -1)",
    ),
    // separated
    (
        r#"privacy = { mechanism = "separated", epsilon = 0.0, clip = 1.0 }"#,
        "privacy.epsilon must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, epsilon0 = -1.0, clip = 1.0 }"#,
        "privacy.epsilon0 must be finite and > 0 (got -1)",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, clip = inf }"#,
        "privacy.clip must be finite and > 0 (got inf)",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, magnitude_epsilon = 0.0, clip = 1.0 }"#,
        "privacy.magnitude_epsilon must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, magnitude_epsilon = 4.0, clip = 1.0 }"#,
        "privacy.magnitude_epsilon must be < privacy.epsilon",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, clip = 1.0, central = { clip = 0.0, noise_multiplier = 1.0 } }"#,
        "privacy.central.clip must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, clip = 1.0, central = { clip = 1.0 } }"#,
        "privacy.central: give exactly one of noise_multiplier and epsilon",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, clip = 1.0, central = { clip = 1.0, noise_multiplier = -1.0 } }"#,
        "privacy.central.noise_multiplier must be finite and > 0 (got -1)",
    ),
    (
        r#"privacy = { mechanism = "separated", epsilon = 4.0, clip = 1.0, central = { clip = 1.0, epsilon = 0.0 } }"#,
        "privacy.central.epsilon must be finite and > 0 (got 0)",
    ),
    // privunitg
    (
        r#"privacy = { mechanism = "privunitg", epsilon = -2.0, clip = 1.0 }"#,
        "privacy.epsilon must be finite and > 0 (got -2)",
    ),
    (
        r#"privacy = { mechanism = "privunitg", epsilon = 4.0, clip = 0.0 }"#,
        "privacy.clip must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "privunitg", epsilon = 4.0, clip = 1.0, central = { clip = 1.0, noise_multiplier = 1.0, epsilon = 1.0 } }"#,
        "privacy.central: give exactly one of noise_multiplier and epsilon",
    ),
    // mvu
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 0.0, input_bits = 3, output_bits = 3, power = 2, clip = 1.0 }"#,
        "privacy.metric_epsilon must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 3, output_bits = 3, power = 2, clip = -1.0 }"#,
        "privacy.clip must be finite and > 0 (got -1)",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 0, output_bits = 3, power = 2, clip = 1.0 }"#,
        "privacy.input_bits and privacy.output_bits must be in 1..=10",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 3, output_bits = 11, power = 2, clip = 1.0 }"#,
        "privacy.input_bits and privacy.output_bits must be in 1..=10",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 3, output_bits = 3, power = 3, clip = 1.0 }"#,
        "privacy.power must be 1 or 2 (got 3)",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 3, output_bits = 3, power = 2, clip = 1.0, dither_bound = 0.5 }"#,
        "privacy.dither_bound must be ≥ privacy.clip (got 0.5)",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 3, output_bits = 3, power = 2, clip = 1.0, dither_bound = inf }"#,
        "privacy.dither_bound must be ≥ privacy.clip (got inf)",
    ),
    (
        r#"privacy = { mechanism = "mvu", metric_epsilon = 1.0, input_bits = 3, output_bits = 3, power = 2, clip = 1.0, central = { clip = 0.0, epsilon = 1.0 } }"#,
        "privacy.central.clip must be finite and > 0 (got 0)",
    ),
    // distributed
    (
        r#"privacy = { mechanism = "distributed", clip = 0.0, bits = 16, noise_stddev = 0.5 }"#,
        "privacy.clip must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, secagg_policy = {} }"#,
        "privacy.secagg_policy applies to secure_aggregation = true only",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, secure_aggregation = true, secagg_policy = { min_threshold_fraction = 1.0 } }"#,
        "privacy.secagg_policy: {policy}",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 0, noise_stddev = 0.5 }"#,
        "privacy.bits must be in 1..=62 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 63, noise_stddev = 0.5 }"#,
        "privacy.bits must be in 1..=62 (got 63)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, beta = 1.0 }"#,
        "privacy.beta must lie in [0, 1) (got 1)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, beta = -0.1 }"#,
        "privacy.beta must lie in [0, 1) (got -0.1)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, k = 0.0 }"#,
        "privacy.k must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, epsilon = 1.0 }"#,
        "privacy: give exactly one of noise_stddev (≥ 0) and epsilon",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16 }"#,
        "privacy: give exactly one of noise_stddev (≥ 0) and epsilon",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = -0.5 }"#,
        "privacy: give exactly one of noise_stddev (≥ 0) and epsilon",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, epsilon = 0.0 }"#,
        "privacy.epsilon must be finite and > 0 (got 0)",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, min_clients = 0 }"#,
        "privacy.min_clients must be ≥ 1",
    ),
    (
        r#"privacy = { mechanism = "distributed", clip = 1.0, bits = 16, noise_stddev = 0.5, dropout = 1.0 }"#,
        "privacy.dropout must lie in [0, 1) (got 1)",
    ),
    // across sections
    (
        "privacy = { mechanism = \"none\" }\naccounting = { hypothetical_population = 100 }",
        "accounting.hypothetical_population needs a private mechanism (privacy.mechanism is none)",
    ),
    (
        "privacy = { mechanism = \"central_gaussian\", clip = 1.0, noise_multiplier = 1.0 }\n\
         accounting = { hypothetical_population = 9 }",
        "accounting.hypothetical_population (9) must be at least the number of clients (10): a \
         smaller population would understate the sampling rate",
    ),
    (
        "privacy = { mechanism = \"separated\", epsilon = 4.0, clip = 1.0 }\n\
         accounting = { fixed_cohort = \"without_replacement\" }",
        "accounting.fixed_cohort = \"without_replacement\" is implemented for privacy.mechanism = \
         \"central_gaussian\" only",
    ),
    (
        "privacy = { mechanism = \"none\" }\naccounting = { budget = 1.0 }",
        "accounting.budget needs a private mechanism (privacy.mechanism is none)",
    ),
];

#[test]
fn every_bad_privacy_parameter_is_refused_with_its_message() {
    let data = blobs(10, 5);
    let policy = privfed_secagg::ClientPolicy {
        min_threshold_fraction: 1.0,
        ..Default::default()
    }
    .validate()
    .unwrap_err()
    .to_string();
    for (lines, want) in BAD_PRIVACY {
        let text = format!(
            "rounds = 3\nseed = 5\nmodel = {{ kind = \"softmax\", features = 4, classes = 3 }}\n\
             sampling = {{ kind = \"fixed\", cohort = 5 }}\n{lines}\n"
        );
        let cfg: TrainConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let want = format!("config: {}", want.replace("{policy}", &policy));
        let got = Trainer::new(cfg.clone(), &data, 1).unwrap_err().to_string();
        assert_eq!(got, want, "{text}");
        // The plan reads the privacy section through the same checks, with or without
        // `validate` before it: it refuses every row of that section, and whatever it refuses
        // it refuses with the same message.
        let dim = cfg.model.build().unwrap().num_params();
        match PrivacyPlan::new(&cfg, dim, data.clients.len()) {
            Err(e) => assert_eq!(e.to_string(), want, "{text}"),
            Ok(_) => assert!(!want.starts_with("config: privacy"), "{text}"),
        }
    }
}
