//! Accounting for a deployment, end to end: calibrate the noise of DP-FedAvg for a target
//! (ε, δ), account the rounds with both accountants (RDP and PLD), add the local reports the
//! same devices send, read δ at an ε, and bound what a Draw-and-Discard server's adversaries
//! learn. Every number printed is computed here; the assertions pin the facts a reader relies on.
//!
//! Run: `cargo run -p privfed-accounting --example plan_deployment`

use privfed_accounting::analysis::draw_and_discard;
use privfed_accounting::calibrate::{AccountantKind, calibrate_noise_multiplier};
use privfed_accounting::{
    BoundSource, DpEvent, PldAccountant, PureCappedRdpAccountant, RdpAccountant,
};

fn main() -> privfed_accounting::Result<()> {
    let (rate, rounds, delta, target) = (0.01, 1000, 1e-5, 2.0);

    // 1. The smallest noise multiplier that keeps 1,000 rounds at 1% sampling within ε = 2.
    let rdp_z = calibrate_noise_multiplier(AccountantKind::Rdp, target, delta, rate, rounds)?;
    let pld_z = calibrate_noise_multiplier(AccountantKind::Pld, target, delta, rate, rounds)?;
    println!(
        "noise multiplier for (ε = {target}, δ = {delta}): RDP {:.4}, PLD {:.4}",
        rdp_z.parameter, pld_z.parameter
    );
    // PLD is tighter, so it needs less noise for the same target; both meet it from below.
    assert!(pld_z.parameter < rdp_z.parameter);
    assert!(rdp_z.epsilon <= target && pld_z.epsilon <= target);

    // 2. Account the training run with the PLD-calibrated noise, as events in a ledger.
    let training = DpEvent::poisson_gaussian(rate, pld_z.parameter, rounds);
    let mut rdp = RdpAccountant::new();
    let mut pld = PldAccountant::new();
    rdp.compose(&training)?;
    pld.compose(&training)?;
    let r = rdp.get_epsilon_and_order(delta)?;
    println!(
        "training: ε(δ = {delta}) = {:.4} (RDP, order {}), {:.4} (PLD)",
        r.epsilon,
        r.optimal_order,
        pld.get_epsilon(delta)?
    );
    assert!(pld.get_epsilon(delta)? <= target && r.epsilon > target);

    // 3. The same devices also send 50 locally private reports at ε = 0.2 (pure ε-DP): compose
    //    them and ask the other question, δ at ε = 4.
    let reports = DpEvent::SelfComposed {
        event: Box::new(DpEvent::PureDp { epsilon: 0.2 }),
        count: 50,
    };
    pld.compose(&reports)?;
    println!(
        "training + 50 reports: ε(δ) = {:.4}, δ(ε = 4) = {:.3e} (PLD, {} events in the ledger)",
        pld.get_epsilon(delta)?,
        pld.get_delta(4.0)?,
        pld.ledger().len()
    );
    assert_eq!(pld.ledger().len(), 2);

    // 4. Reports alone, with RDP capped by pure composition: 50 × 0.2 = 10 at δ = 0 is the cap,
    //    and at δ = 1e-5 the RDP conversion is smaller.
    let mut capped = PureCappedRdpAccountant::new();
    capped.compose(&reports)?;
    let e = capped.epsilon_answer(delta)?;
    println!(
        "50 reports alone: ε = {:.4} from {:?} (pure composition: {})",
        e.epsilon,
        e.epsilon_from.expect("every event is pure ε-DP"),
        e.epsilon_pure_composition
            .expect("every event is pure ε-DP")
    );
    assert_eq!(e.epsilon_pure_composition, Some(10.0));
    assert_eq!(e.epsilon_from, Some(BoundSource::Rdp));

    // 5. A Draw-and-Discard server with k = 20 instances, clients at ε = ln 32: what each of the
    //    paper's three adversaries learns about one update after 100 further updates.
    let dd = draw_and_discard(32f64.ln(), 20, 100, 1e-8)?;
    println!(
        "draw-and-discard: I {:.3}, II {:.3} (expected), III discarded w.p. {:.2}, else ε {:.3}",
        dd.adversary_i_epsilon,
        dd.adversary_ii_expected_loss,
        dd.adversary_iii_discard_probability,
        dd.adversary_iii_epsilon
    );
    assert!(dd.adversary_ii_expected_loss < dd.adversary_i_epsilon / 2.0);
    Ok(())
}
