//! Rényi-DP accounting (docs/ALGORITHMS.md §5.1–5.2).
//!
//! A curve `ε(α)` is kept on a fixed grid of orders; events add their curves; the improved
//! conversion (Canonne, Kamath, Steinke 2020, Prop. 12; 001 Lemma 2.3) turns it into (ε, δ).

use crate::accountant::{Ledger, NeighbouringRelation, PrivacyAccountant};
use crate::error::{AccountingError, Result, check_delta, check_nonnegative, check_rate};
use crate::event::DpEvent;
use crate::skellam::skellam_rdp_bound;
use privfed_special::{ln_binomial as log_comb, log_add_exp as log_add, log_sum_exp};

/// The default order grid: `1 + k/20` for k = 1..=200 (1.05 … 11, step 0.05), every integer
/// 12 … 256, then 288, 320, 384, 448, 512, 640, 768, 896, 1024, 1536, 2048.
///
/// It contains every order of dp_accounting 0.6.0's default grid (`1 + k/10` for k = 1..99,
/// 12 … 63, 128, 256, 512, 1024), so for the same per-order values our ε can only be smaller or
/// equal; the finer steps below 11 and the integers 64 … 256 let the minimizing order sit closer
/// to the true optimum (differences are typically below 0.5%).
pub fn default_orders() -> Vec<f64> {
    let mut v: Vec<f64> = (1..=200).map(|k| 1.0 + k as f64 / 20.0).collect();
    v.extend((12..=256).map(|k| k as f64));
    v.extend([
        288.0, 320.0, 384.0, 448.0, 512.0, 640.0, 768.0, 896.0, 1024.0, 1536.0, 2048.0,
    ]);
    v
}

/// RDP of the Gaussian mechanism (sensitivity 1, std `z`): `ε(α) = α/(2z²)` (Mironov 2017).
pub fn gaussian_rdp(noise_multiplier: f64, alpha: f64) -> f64 {
    alpha / (2.0 * noise_multiplier * noise_multiplier)
}

/// RDP of the Laplace mechanism (sensitivity 1, scale `b`), Mironov 2017 Prop. 6:
/// `ε(α) = 1/(α−1)·ln( α/(2α−1)·e^{(α−1)/b} + (α−1)/(2α−1)·e^{−α/b} )`, evaluated as
/// `1/b + ln(α/(2α−1) + (α−1)/(2α−1)·e^{−(2α−1)/b})/(α−1)` to avoid overflow.
pub fn laplace_rdp(scale: f64, alpha: f64) -> f64 {
    let b = scale;
    let s = 2.0 * alpha - 1.0;
    let inner = alpha / s + (alpha - 1.0) / s * (-s / b).exp();
    (1.0 / b + inner.ln() / (alpha - 1.0)).max(0.0)
}

/// RDP of any ε-DP randomizer, tight for binary randomized response (docs/ALGORITHMS.md §5.1):
/// `ε(α) = 1/(α−1)·ln((sinh(αε) − sinh((α−1)ε))/sinh ε) = ln(cosh((2α−1)ε/2)/cosh(ε/2))/(α−1)`.
pub fn pure_dp_rdp(epsilon: f64, alpha: f64) -> f64 {
    let ln_cosh = |x: f64| {
        let x = x.abs();
        x + libm::log1p((-2.0 * x).exp()) - std::f64::consts::LN_2
    };
    ((ln_cosh((2.0 * alpha - 1.0) * epsilon / 2.0) - ln_cosh(epsilon / 2.0)) / (alpha - 1.0))
        .clamp(0.0, epsilon)
}

/// RDP at order `α` of a **local randomizer** that is `(α, ε(α))`-RDP for any two inputs (the
/// replace-one relation of local DP, e.g. an MVU design's curve), when the client takes part with
/// probability `rate` independently of everything else and otherwise sends nothing:
/// `ε_q(α) = ln(1 − q + q·e^{(α−1)ε(α)})/(α−1)`.
///
/// **Exact when the absence of a report is visible.** For inputs `x, x'` the client's output laws
/// are `(1−q)δ_⊥ + q·μ` and `(1−q)δ_⊥ + q·ν`, with `⊥` ("no report") outside the supports of the
/// randomizer's laws `μ, ν`, so `Σ_o P(o)^α Q(o)^{1−α} = (1−q) + q·Σ_o μ(o)^α ν(o)^{1−α}
/// = 1 − q + q·e^{(α−1)D_α(μ‖ν)}`, increasing in `D_α(μ‖ν) ≤ ε(α)`. Anything computed from the
/// reports alone (e.g. their sum) is a post-processing, so the value is an upper bound there.
///
/// This is not the generic bound the accountant applies to [`DpEvent::PoissonSampled`] (Zhu & Wang
/// 2019), which amplifies a *central* mechanism's curve under add/remove neighbours; a local
/// randomizer's replace-one curve is not such a curve (adding a client adds a report). Here the
/// gain is at most linear in `q` and vanishes as `α → ∞` (the max-divergence, i.e. pure ε, is not
/// reduced). Always `≤ ε(α)`.
///
/// Errors on `rate ∉ (0, 1]`, `α` not finite and `> 1`, or `ε(α)` negative or NaN (`+∞` gives `+∞`).
pub fn local_sampled_rdp(rate: f64, rdp: f64, alpha: f64) -> Result<f64> {
    check_rate(rate)?;
    if !(alpha.is_finite() && alpha > 1.0) {
        return Err(AccountingError::invalid(
            "alpha",
            alpha,
            "the Rényi order must be finite and > 1",
        ));
    }
    if rdp.is_nan() || rdp < 0.0 {
        return Err(AccountingError::invalid(
            "rdp_epsilon",
            rdp,
            "must be >= 0 (or +inf)",
        ));
    }
    if rate >= 1.0 || rdp.is_infinite() {
        return Ok(rdp);
    }
    let y = (alpha - 1.0) * rdp;
    // ln(1 − q + q·e^y): log1p(q·expm1(y)) for moderate y, y + ln(q + (1−q)e^{−y}) for large y.
    let log_sum = if y < 1.0 {
        libm::log1p(rate * libm::expm1(y))
    } else {
        y + (rate + (1.0 - rate) * (-y).exp()).ln()
    };
    Ok((log_sum / (alpha - 1.0)).clamp(0.0, rdp))
}

/// `ln A_α` for the Poisson-subsampled Gaussian at integer `α` (Mironov, Talwar, Zhang 2019):
/// `A_α = Σ_{k=0}^{α} C(α,k)(1−q)^{α−k} q^k exp((k²−k)/(2z²))`. Since the binomial weights sum
/// to 1, `A_α − 1 = Σ_{k≥2} C(α,k)(1−q)^{α−k} q^k expm1((k²−k)/(2z²))`, a sum of positive terms
/// evaluated in log space, so `ln A_α = log1p(A_α − 1)` keeps full relative accuracy even when
/// `A_α − 1` is tiny (small q, large z). `ln C(α,k)` follows the recurrence
/// `ln C(α,k) = ln C(α,k−1) + ln((α−k+1)/k)` from `ln C(α,1) = ln α` (one logarithm per term).
fn log_a_int(q: f64, z: f64, alpha: u64) -> f64 {
    let lq = q.ln();
    let l1q = libm::log1p(-q);
    let a = alpha as f64;
    // ln(e^y − 1); above y = 40 the correction −e^{−y} is below 2^{−57}·y, lost in rounding.
    let ln_expm1 = |y: f64| {
        if y > 40.0 {
            y
        } else if y > 1.0 {
            y + (-(-y).exp()).ln_1p()
        } else {
            y.exp_m1().ln()
        }
    };
    let mut ln_c = a.ln();
    let terms: Vec<f64> = (2..=alpha)
        .map(|k| {
            let k = k as f64;
            ln_c += ((a - k + 1.0) / k).ln();
            ln_c + k * lq + (a - k) * l1q + ln_expm1((k * k - k) / (2.0 * z * z))
        })
        .collect();
    privfed_special::softplus(log_sum_exp(&terms))
}

/// The trapezoidal step and integration range for `log_a_quad` at `(z, α, q)`, such that the
/// discretization and the truncation each cost a relative error below `e^{−target}`.
///
/// **Step.** The integrand `f(x) = φ_z(x)·g(x)^α`, `g = 1−q+q·e^{u(x)}`, `u = (2x−1)/(2z²)`, is
/// analytic in the strip `|Im x| < πz²` (there `|Im u| < π`, so `g` stays off the negative real
/// axis), and on the line `Im x = y` it is bounded by `|φ_z(x+iy)| = φ_z(x)e^{y²/(2z²)}` and
/// `|g(x+iy)| ≤ g(x)` (triangle inequality), so `∫|f(x+iy)|dx ≤ e^{y²/(2z²)}·A_α`. The
/// trapezoidal rule's error in a strip of half-width `d` is at most `2M/(e^{2πd/h} − 1)` with `M`
/// that bound (Trefethen & Weideman 2014, Thm. 5.1): a relative error `≲ 2e^{−(2πd/h − d²/(2z²))}`.
/// The exponent is largest at `d = 2πz²/h` (value `2π²z²/h²`) when that `d` is below `0.9πz²`,
/// i.e. `h ≥ 2/0.9`; otherwise `d = 0.9πz²` gives `1.8π²z²/h − 0.405π²z²`. `h` is the largest step
/// whose exponent reaches `target`.
///
/// **Range.** Below `−T_lo·z` the integrand is at most `φ_z` (`g ≤ 1` for `u ≤ 0`): a tail of
/// `e^{−T_lo²/2}` against `A_α ≥ 1`. Above `α + T_hi·z`, `g ≤ e^u` gives
/// `f ≤ N(α, z²)·e^{(α²−α)/(2z²)}`, while `A_α ≥ max(1, q^α·e^{(α²−α)/(2z²)})`; so
/// `T_hi²/2 ≥ target + min((α²−α)/(2z²), α·ln(1/q))` suffices.
fn quad_grid(q: f64, z: f64, alpha: f64, target: f64) -> (f64, f64, f64) {
    use std::f64::consts::PI;
    let z2 = z * z;
    let h_free = PI * z * (2.0 / target).sqrt();
    let h = if h_free >= 2.0 / 0.9 {
        h_free
    } else {
        1.8 * PI * PI * z2 / (target + 0.405 * PI * PI * z2)
    };
    let t_lo = (2.0 * target).sqrt();
    let excess = ((alpha * alpha - alpha) / (2.0 * z2)).min(-alpha * q.ln());
    let t_hi = (2.0 * (target + excess.max(0.0))).sqrt();
    (h, -t_lo * z, alpha + t_hi * z)
}

/// `ln A_α` at any real `α > 1`: `A_α = E_{x~N(0,z²)}[((1−q) + q·e^{(2x−1)/(2z²)})^α]` by the
/// trapezoidal rule, with the step and range of `quad_grid` (relative error below `e^{−50}`
/// from each source). The sum is taken in log space; when `ln A_α < 0.1` (known in advance
/// when `ln A_⌈α⌉ < 0.1`, since `ln A_α` is non-decreasing in α) it is redone for
/// `A_α − 1 = E[(1+t)^α − 1 − αt]`, `t = q·expm1(u)` (the linear term has mean zero, since
/// `E[e^u] = 1`, and removing it avoids cancelling terms of order `αq` down to a result of order
/// `q²`), on a grid for `e^{−100}` whose absolute error (the same strip bound) is below `e^{−97}`,
/// so tiny values keep their relative accuracy. Returns `None` if more than 2·10⁶ points would be needed (very
/// small `z`), where callers fall back to the order `⌈α⌉`.
fn log_a_quad(q: f64, z: f64, alpha: f64) -> Option<f64> {
    let z2 = z * z;
    let points = |target: f64| {
        let (h, lo, hi) = quad_grid(q, z, alpha, target);
        let n = ((hi - lo) / h).ceil() as usize + 1;
        (n <= 2_000_000).then_some((h, lo, n))
    };
    let lq = q.ln();
    let l1q = libm::log1p(-q);
    let ln_norm = -(z * (2.0 * std::f64::consts::PI).sqrt()).ln();
    let u = |x: f64| (2.0 * x - 1.0) / (2.0 * z2);
    // ln A_α is non-decreasing in α ((α−1)·RDP(α), both factors non-decreasing), so when the
    // exact sum at ⌈α⌉ is already below 0.1 the first pass would only say "below 0.1": skip it.
    let small = alpha.ceil() <= 64.0 && log_a_int(q, z, alpha.ceil() as u64) < 0.1;
    if !small {
        let (h, lo, n) = points(50.0)?;
        let vals: Vec<f64> = (0..n)
            .map(|i| {
                let x = lo + i as f64 * h;
                -x * x / (2.0 * z2) + alpha * log_add(l1q, lq + u(x))
            })
            .collect();
        let log_a = log_sum_exp(&vals) + h.ln() + ln_norm;
        if log_a >= 0.1 {
            return Some(log_a);
        }
    }
    let (h, lo, n) = points(100.0)?;
    let mut sum = 0.0;
    for i in 0..n {
        let x = lo + i as f64 * h;
        let ln_phi = -x * x / (2.0 * z2) + ln_norm;
        sum += weighted_excess_over_linear(alpha, q * u(x).exp_m1(), ln_phi);
    }
    Some(libm::log1p(sum * h))
}

/// `e^{ln_w}·((1+t)^α − 1 − αt)` for `t > −1`, without cancellation: the binomial series
/// `Σ_{k≥2} C(α,k)t^k` for `|t| < 0.05` (terms shrink by `≥ 20×/(α+1)`; summed until below
/// `1e-17` of the total), else directly, with `e^{ln_w}(1+t)^α` formed in log space so that a
/// tiny weight times a huge power stays finite.
fn weighted_excess_over_linear(alpha: f64, t: f64, ln_w: f64) -> f64 {
    let weight = ln_w.exp();
    if t.abs() < 0.05 {
        let (mut c, mut p, mut sum) = (alpha, t, 0.0);
        for k in 2..200 {
            let k = k as f64;
            c *= (alpha - k + 1.0) / k;
            p *= t;
            let term = c * p;
            sum += term;
            if term.abs() <= 1e-17 * sum.abs() {
                break;
            }
        }
        weight * sum
    } else {
        let w = alpha * t.ln_1p();
        let power = if w < 50.0 {
            weight * w.exp_m1()
        } else {
            (ln_w + w).exp() - weight
        };
        power - weight * alpha * t
    }
}

/// RDP of the Poisson-subsampled Gaussian (rate `q`, noise multiplier `z`) at order `α > 1`:
/// `ln(A_α)/(α−1)` with the exact binomial sum at integer orders and the quadrature of
/// `log_a_quad` at fractional ones (falling back to the larger order `⌈α⌉`, an upper bound
/// since RDP is non-decreasing in α, only if the quadrature would be too long). Also capped by
/// the un-sampled Gaussian `α/(2z²)`.
pub fn poisson_gaussian_rdp(q: f64, z: f64, alpha: f64) -> f64 {
    if q >= 1.0 {
        return gaussian_rdp(z, alpha);
    }
    let log_a = if alpha.fract() == 0.0 {
        log_a_int(q, z, alpha as u64)
    } else {
        match log_a_quad(q, z, alpha) {
            Some(v) => v,
            None => return poisson_gaussian_rdp(q, z, alpha.ceil()),
        }
    };
    (log_a / (alpha - 1.0)).clamp(0.0, gaussian_rdp(z, alpha))
}

/// Zhu & Wang (2019, Thm. 6) general upper bound on the RDP of a Poisson-subsampled mechanism
/// at integer `α ≥ 2`, given the base curve at the integer orders `2..=α` (`base[ℓ]` for ℓ):
/// `ε'(α) ≤ 1/(α−1)·ln( (1−q)^{α−1}(αq − q + 1) + C(α,2)q²(1−q)^{α−2}e^{ε(2)}
///                       + 3·Σ_{ℓ=3}^{α} C(α,ℓ)(1−q)^{α−ℓ}q^ℓ e^{(ℓ−1)ε(ℓ)} )`.
fn zhu_wang_bound(q: f64, alpha: u64, base: &[f64]) -> f64 {
    let a = alpha as f64;
    let lq = q.ln();
    let l1q = libm::log1p(-q);
    let mut terms = Vec::with_capacity(alpha as usize);
    terms.push((a - 1.0) * l1q + (a * q - q + 1.0).ln());
    terms.push(log_comb(a, 2.0) + 2.0 * lq + (a - 2.0) * l1q + base[2]);
    for l in 3..=alpha {
        let lf = l as f64;
        terms.push(
            3f64.ln() + log_comb(a, lf) + (a - lf) * l1q + lf * lq + (lf - 1.0) * base[l as usize],
        );
    }
    (log_sum_exp(&terms) / (a - 1.0)).max(0.0)
}

/// The largest integer order at which the sampled-without-replacement bound uses the forward
/// differences (dp_accounting's `max_alpha`); above it only `2e^{(j−1)ε(j)}` is used.
const WOR_MAX_EXACT_ORDER: u64 = 256;

/// `ln|Δ^k g(−1)|` for k = 1..=n+1 (index k−1), `g(x) = e^{x(x+1)/(2z²)}`, i.e. the forward
/// differences at 0 of `k ↦ e^{(k−1)ε(k)}` for the Gaussian's `ε(k) = k/(2z²)`: repeated
/// differences of `g(−1), g(0), …, g(n+1)` held as (log-magnitude, sign), as dp_accounting's
/// `_get_forward_diffs`.
fn wor_forward_diffs(z: f64, n: usize) -> Vec<f64> {
    let cgf = |x: f64| x * (x + 1.0) / (2.0 * z * z);
    let mut v: Vec<f64> = (0..n + 3).map(|i| cgf(i as f64 - 1.0)).collect();
    let mut sign = vec![true; n + 3];
    let mut deltas = Vec::with_capacity(n + 2);
    for i in 0..n + 2 {
        for j in 0..(n + 2 - i) {
            let (a, b) = (v[j], v[j + 1]);
            if sign[j] == sign[j + 1] {
                // |x_{j+1} − x_j| with both of the same sign.
                let (s, mag) = if b > a {
                    (true, b + libm::log1p(-(a - b).exp()))
                } else if b < a {
                    (false, a + libm::log1p(-(b - a).exp()))
                } else {
                    (true, f64::NEG_INFINITY)
                };
                v[j] = mag;
                sign[j] = if sign[j + 1] { s } else { !s };
            } else {
                v[j] = log_add(a, b);
                sign[j] = sign[j + 1];
            }
        }
        deltas.push(v[0]);
    }
    deltas
}

/// `(α−1)·ε'(α)` at integer `α ≥ 1` of the Gaussian on a sample without replacement
/// ([`DpEvent::SampledWithoutReplacement`]'s formula); `deltas` from `wor_forward_diffs` with
/// `n ≥ min(α, WOR_MAX_EXACT_ORDER)`.
fn wor_gaussian_log_a_int(q: f64, z: f64, alpha: u64, deltas: &[f64]) -> f64 {
    if alpha <= 1 {
        return 0.0;
    }
    let a = alpha as f64;
    let eps = |x: f64| x / (2.0 * z * z);
    let cgf = |x: f64| x * (x + 1.0) / (2.0 * z * z);
    let lq = q.ln();
    let ln2 = std::f64::consts::LN_2;
    let ln4 = 2.0 * ln2;
    // ln(e^{ε(2)} − 1)
    let log_f2m1 = eps(2.0) + libm::log1p(-(-eps(2.0)).exp());
    let mut terms = Vec::with_capacity(alpha as usize);
    terms.push(0.0);
    terms.push(2.0 * lq + log_comb(a, 2.0) + (ln4 + log_f2m1).min(eps(2.0) + ln2));
    for i in 3..=alpha {
        let fi = i as f64;
        let loose = ln2 + cgf(fi - 1.0);
        let s = if alpha <= WOR_MAX_EXACT_ORDER {
            let lo = deltas[(2 * (i / 2) - 1) as usize];
            let hi = deltas[(2 * i.div_ceil(2) - 1) as usize];
            (ln4 + 0.5 * (lo + hi)).min(loose)
        } else {
            loose
        };
        terms.push(s + fi * lq + log_comb(a, fi));
    }
    log_sum_exp(&terms)
}

/// RDP on `orders` of the Gaussian (noise multiplier `z`, replace-one sensitivity 1) applied to
/// a sample of `m` of `n` records drawn without replacement
/// ([`DpEvent::SampledWithoutReplacement`]: Wang, Balle, Kasiviswanathan 2019, Thm. 27, as in
/// dp_accounting 0.6.0, capped by the un-sampled `α/(2z²)`).
pub fn sampled_without_replacement_gaussian_rdp(q: f64, z: f64, orders: &[f64]) -> Vec<f64> {
    if q >= 1.0 {
        return orders.iter().map(|&a| gaussian_rdp(z, a)).collect();
    }
    let max_int = orders
        .iter()
        .map(|a| a.ceil() as u64)
        .max()
        .unwrap_or(2)
        .min(WOR_MAX_EXACT_ORDER);
    let deltas = wor_forward_diffs(z, max_int as usize);
    let at_int = |k: u64| wor_gaussian_log_a_int(q, z, k, &deltas);
    orders
        .iter()
        .map(|&a| {
            let v = if a.fract() == 0.0 {
                at_int(a as u64) / (a - 1.0)
            } else {
                let (f, c) = (a.floor(), a.ceil());
                let t = a - f;
                ((1.0 - t) * at_int(f as u64) + t * at_int(c as u64)) / (a - 1.0)
            };
            v.clamp(0.0, gaussian_rdp(z, a))
        })
        .collect()
}

/// The RDP curve of `event` on `orders` (validated event). `accountant` names the caller in
/// errors.
pub(crate) fn rdp_curve(event: &DpEvent, orders: &[f64]) -> Result<Vec<f64>> {
    Ok(match event {
        DpEvent::Gaussian { noise_multiplier } => orders
            .iter()
            .map(|&a| gaussian_rdp(*noise_multiplier, a))
            .collect(),
        DpEvent::Laplace { scale } => orders.iter().map(|&a| laplace_rdp(*scale, a)).collect(),
        DpEvent::PureDp { epsilon } => orders.iter().map(|&a| pure_dp_rdp(*epsilon, a)).collect(),
        DpEvent::Skellam {
            mu,
            l1_sensitivity,
            l2_sensitivity,
        } => orders
            .iter()
            // §2.2 holds at integer orders; RDP is non-decreasing in α, so ε(⌈α⌉) bounds ε(α).
            .map(|&a| skellam_rdp_bound(*mu, *l1_sensitivity, *l2_sensitivity, a.ceil().max(2.0)))
            .collect(),
        DpEvent::DistributedDiscreteGaussian {
            sigma,
            l1_sensitivity,
            l2_sensitivity,
            tau,
            dim,
        } => orders
            .iter()
            .map(|&a| {
                crate::ddg::ddg_rdp_bound(
                    *sigma,
                    *l1_sensitivity,
                    *l2_sensitivity,
                    *tau,
                    *dim as f64,
                    a,
                )
            })
            .collect(),
        DpEvent::RdpCurve {
            orders: o,
            epsilons,
        } => orders.iter().map(|&a| curve_at(o, epsilons, a)).collect(),
        DpEvent::LocalSampled { rate, event } => {
            let base = rdp_curve(event, orders)?;
            orders
                .iter()
                .zip(base)
                .map(|(&a, v)| local_sampled_rdp(*rate, v, a))
                .collect::<Result<Vec<f64>>>()?
        }
        DpEvent::Composed { events } => {
            let mut total = vec![0.0; orders.len()];
            for e in events {
                for (t, v) in total.iter_mut().zip(rdp_curve(e, orders)?) {
                    *t += v;
                }
            }
            total
        }
        DpEvent::SelfComposed { event, count } => {
            if *count == 0 {
                vec![0.0; orders.len()]
            } else {
                let c = *count as f64;
                rdp_curve(event, orders)?
                    .into_iter()
                    .map(|v| v * c)
                    .collect()
            }
        }
        DpEvent::SampledWithoutReplacement {
            source_dataset_size,
            sample_size,
            event: inner,
        } => {
            let q = *sample_size as f64 / *source_dataset_size as f64;
            match inner.effective_gaussian_noise_multiplier() {
                Some(z) => sampled_without_replacement_gaussian_rdp(q, z, orders),
                None => return Err(unsupported_wor(event)),
            }
        }
        DpEvent::PoissonSampled { rate, event } => {
            if *rate >= 1.0 {
                return rdp_curve(event, orders);
            }
            if let DpEvent::Gaussian { noise_multiplier } = **event {
                orders
                    .iter()
                    .map(|&a| poisson_gaussian_rdp(*rate, noise_multiplier, a))
                    .collect()
            } else {
                // Generic amplification (Zhu & Wang 2019) at integer orders ⌈α⌉ ≥ 2.
                let max_int = orders
                    .iter()
                    .map(|a| a.ceil().max(2.0) as u64)
                    .max()
                    .unwrap_or(2);
                let int_orders: Vec<f64> = (0..=max_int).map(|k| (k as f64).max(2.0)).collect();
                let base = rdp_curve(event, &int_orders)?;
                let base_at = |a: f64| base[a.ceil().max(2.0) as usize];
                orders
                    .iter()
                    .map(|&a| {
                        let ai = a.ceil().max(2.0) as u64;
                        if base[ai as usize].is_infinite() {
                            f64::INFINITY
                        } else {
                            zhu_wang_bound(*rate, ai, &base).min(base_at(a))
                        }
                    })
                    .collect()
            }
        }
    })
}

/// A user curve at order `a`: the value at the smallest supplied order `≥ a` (RDP is
/// non-decreasing in α), `+∞` beyond the largest supplied order.
fn curve_at(orders: &[f64], eps: &[f64], a: f64) -> f64 {
    match orders.iter().position(|&o| o >= a) {
        Some(i) => eps[i],
        None => f64::INFINITY,
    }
}

/// Improved RDP → (ε, δ) conversion (Canonne, Kamath, Steinke 2020, Prop. 12; docs/ALGORITHMS.md
/// §5.2): `ε = min_α [ε(α) + ln((α−1)/α) − (ln δ + ln α)/(α−1)]`, together with the KL bound
/// (`δ ≥ √(1 − e^{−ε(α)})` gives ε = 0). Returns `(ε, optimal α)`; ε is `+∞` if every order is.
pub fn rdp_to_epsilon(orders: &[f64], rdp: &[f64], delta: f64) -> Result<(f64, f64)> {
    check_delta(delta)?;
    check_curve(orders, rdp)?;
    let mut best = (f64::INFINITY, orders[0]);
    for (&a, &r) in orders.iter().zip(rdp) {
        let eps = if delta * delta + libm::expm1(-r) > 0.0 {
            0.0
        } else {
            r + libm::log1p(-1.0 / a) - (delta.ln() + a.ln()) / (a - 1.0)
        };
        if eps < best.0 {
            best = (eps, a);
        }
    }
    Ok((best.0.max(0.0), best.1))
}

/// δ for a given ε from an RDP curve (same bound as [`rdp_to_epsilon`], solved for δ):
/// `δ = min_α exp((α−1)(ε(α) − ε + ln(1 − 1/α)) − ln α)`, and `√(1 − e^{−ε(α)})`; at most 1.
pub fn rdp_to_delta(orders: &[f64], rdp: &[f64], epsilon: f64) -> Result<(f64, f64)> {
    check_nonnegative("epsilon", epsilon)?;
    check_curve(orders, rdp)?;
    let mut best = (f64::INFINITY, orders[0]);
    for (&a, &r) in orders.iter().zip(rdp) {
        let kl = if r == 0.0 {
            f64::NEG_INFINITY
        } else {
            0.5 * libm::log1p(-(-r).exp())
        };
        let b = (a - 1.0) * (r - epsilon + libm::log1p(-1.0 / a)) - a.ln();
        let ld = kl.min(b);
        if ld < best.0 {
            best = (ld, a);
        }
    }
    Ok((best.0.exp().min(1.0), best.1))
}

fn check_curve(orders: &[f64], rdp: &[f64]) -> Result<()> {
    if orders.is_empty() || orders.len() != rdp.len() {
        return Err(AccountingError::InvalidCurve(format!(
            "{} orders, {} values",
            orders.len(),
            rdp.len()
        )));
    }
    if orders.iter().any(|&a| a.is_nan() || a <= 1.0) || rdp.iter().any(|r| r.is_nan() || *r < 0.0)
    {
        return Err(AccountingError::InvalidCurve(
            "orders must be > 1 and values non-negative".into(),
        ));
    }
    Ok(())
}

/// The ε reported by the RDP accountant, with the order that attains it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RdpEpsilon {
    /// The ε at the requested δ.
    pub epsilon: f64,
    /// The Rényi order α at which the minimum of the conversion is attained.
    pub optimal_order: f64,
}

const WOR_INNER: &str = "sampling without replacement is accounted for the Gaussian only (or a \
composition of Gaussians), as dp_accounting 0.6.0";
const WOR_RELATION: &str = "sampling without replacement is stated under the replace-one relation: \
use an RDP accountant built for replace-one neighbours";
const POISSON_RELATION: &str = "Poisson sampling is accounted under the add/remove-one relation: use \
an RDP accountant built for add/remove-one neighbours";

fn unsupported_wor(event: &DpEvent) -> AccountingError {
    AccountingError::UnsupportedEvent {
        accountant: "rdp",
        event: event.name(),
        reason: WOR_INNER.into(),
    }
}

/// `Ok` if `event` (valid) can be composed under `relation`: sampling without replacement only
/// under replace-one (and of Gaussians only), Poisson sampling (rate < 1) only under
/// add/remove-one; everything else under both, its sensitivities read under that relation.
fn check_relation(event: &DpEvent, relation: NeighbouringRelation) -> Result<()> {
    let unsupported = |reason: &str| AccountingError::UnsupportedEvent {
        accountant: "rdp",
        event: event.name(),
        reason: reason.into(),
    };
    match relation {
        NeighbouringRelation::AddOrRemoveOne => {
            if event.any(&|e| matches!(e, DpEvent::SampledWithoutReplacement { .. })) {
                return Err(unsupported(WOR_RELATION));
            }
        }
        NeighbouringRelation::ReplaceOne => {
            if event.any(&|e| matches!(e, DpEvent::PoissonSampled { rate, .. } if *rate < 1.0)) {
                return Err(unsupported(POISSON_RELATION));
            }
        }
    }
    if event.any(&|e| {
        matches!(e, DpEvent::SampledWithoutReplacement { event, .. }
            if event.effective_gaussian_noise_multiplier().is_none())
    }) {
        return Err(unsupported(WOR_INNER));
    }
    Ok(())
}

/// Rényi-DP accountant: keeps `Σ ε_event(α)` on an order grid.
///
/// Supports every [`DpEvent`]: Gaussian, Laplace, pure ε-DP, Skellam (§2.2 bound, integer
/// orders), user curves, compositions, Poisson sampling (exact for the Gaussian at integer and
/// fractional orders; Zhu–Wang 2019 for anything else) under add/remove-one neighbours (the
/// default), and sampling without replacement of Gaussians under replace-one neighbours
/// ([`RdpAccountant::with_relation`]).
///
/// **Cost.** The ledger keeps runs of identical events, and the accountant the curve of the
/// last run's event per step: composing that event again only adds to the run's count (no
/// curve is computed), and the total `committed + count·curve` is formed at query time, so `T`
/// identical steps cost one curve evaluation and answer exactly as one
/// `SelfComposed { count: T }` does.
#[derive(Debug, Clone)]
pub struct RdpAccountant {
    orders: Vec<f64>,
    /// The curves of every run but the last, summed.
    committed: Vec<f64>,
    /// The curve of one composition of the last run's event (empty when the ledger is).
    last_curve: Vec<f64>,
    relation: NeighbouringRelation,
    ledger: Ledger,
}

impl Default for RdpAccountant {
    fn default() -> Self {
        Self::new()
    }
}

impl RdpAccountant {
    /// An empty accountant on [`default_orders`], add/remove-one neighbours.
    pub fn new() -> Self {
        Self::build(default_orders(), NeighbouringRelation::AddOrRemoveOne)
    }

    fn build(orders: Vec<f64>, relation: NeighbouringRelation) -> Self {
        let committed = vec![0.0; orders.len()];
        Self {
            orders,
            committed,
            last_curve: Vec::new(),
            relation,
            ledger: Ledger::new(),
        }
    }

    /// An empty accountant on a custom grid (orders > 1, finite, strictly increasing).
    pub fn with_orders(orders: Vec<f64>) -> Result<Self> {
        Self::with_relation(orders, NeighbouringRelation::AddOrRemoveOne)
    }

    /// An empty accountant on a custom grid whose guarantees are stated under `relation`: under
    /// [`NeighbouringRelation::ReplaceOne`] it composes
    /// [`DpEvent::SampledWithoutReplacement`] and refuses Poisson sampling; under
    /// [`NeighbouringRelation::AddOrRemoveOne`] the reverse (dp_accounting's rules). Every other
    /// event is composed under either, its sensitivities read under that relation.
    pub fn with_relation(orders: Vec<f64>, relation: NeighbouringRelation) -> Result<Self> {
        DpEvent::RdpCurve {
            orders: orders.clone(),
            epsilons: vec![0.0; orders.len()],
        }
        .validate()?;
        Ok(Self::build(orders, relation))
    }

    /// The order grid.
    pub fn orders(&self) -> &[f64] {
        &self.orders
    }

    /// The accumulated RDP curve, one value per order.
    pub fn rdp(&self) -> Vec<f64> {
        match self.ledger.runs().last() {
            None => self.committed.clone(),
            Some(last) => {
                let c = last.count as f64;
                self.committed
                    .iter()
                    .zip(&self.last_curve)
                    .map(|(t, v)| t + c * v)
                    .collect()
            }
        }
    }

    /// Adds `event`'s RDP curve (validated first; on error nothing is added).
    pub fn compose(&mut self, event: &DpEvent) -> Result<()> {
        self.compose_repeated(event, 1)
    }

    /// Adds `count` times `event`'s RDP curve ([`PrivacyAccountant::compose_repeated`]): O(1)
    /// when `event` is the last composed event, one curve evaluation otherwise.
    pub fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        event.validate()?;
        check_relation(event, self.relation)?;
        if count == 0 {
            return Ok(());
        }
        if self.ledger.merged_count(event, count)?.is_some() {
            self.ledger.record(event, count);
            return Ok(());
        }
        let curve = rdp_curve(event, &self.orders)?;
        if curve.iter().any(|v| v.is_nan()) {
            return Err(AccountingError::Numerical(format!(
                "NaN in the RDP curve of {}",
                event.name()
            )));
        }
        self.committed = self.rdp();
        self.last_curve = curve;
        self.ledger.record(event, count);
        Ok(())
    }

    /// The events composed so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The neighbouring relation of the reported guarantees.
    pub fn relation(&self) -> NeighbouringRelation {
        self.relation
    }

    /// ε at `delta` ∈ (0,1) with the optimal order ([`rdp_to_epsilon`]).
    pub fn get_epsilon_and_order(&self, delta: f64) -> Result<RdpEpsilon> {
        let (epsilon, optimal_order) = rdp_to_epsilon(&self.orders, &self.rdp(), delta)?;
        Ok(RdpEpsilon {
            epsilon,
            optimal_order,
        })
    }

    /// ε at `delta` ∈ (0,1).
    pub fn get_epsilon(&self, delta: f64) -> Result<f64> {
        Ok(self.get_epsilon_and_order(delta)?.epsilon)
    }

    /// δ at `epsilon` ≥ 0 ([`rdp_to_delta`]).
    pub fn get_delta(&self, epsilon: f64) -> Result<f64> {
        Ok(rdp_to_delta(&self.orders, &self.rdp(), epsilon)?.0)
    }
}

/// Every valid event is supported under its relation (module docs); neighbouring relation
/// add/remove-one by default (the relation of every [`DpEvent`] but
/// [`DpEvent::SampledWithoutReplacement`]; Poisson-sampled events use the add/remove bounds of
/// Mironov et al. 2019 and Zhu & Wang 2019), replace-one when built so.
impl PrivacyAccountant for RdpAccountant {
    fn name(&self) -> &'static str {
        "rdp"
    }

    fn neighbouring_relation(&self) -> NeighbouringRelation {
        self.relation
    }

    fn supports(&self, event: &DpEvent) -> bool {
        event.validate().is_ok() && check_relation(event, self.relation).is_ok()
    }

    fn compose_repeated(&mut self, event: &DpEvent, count: u64) -> Result<()> {
        RdpAccountant::compose_repeated(self, event, count)
    }

    fn get_epsilon(&self, delta: f64) -> Result<f64> {
        RdpAccountant::get_epsilon(self, delta)
    }

    fn get_delta(&self, epsilon: f64) -> Result<f64> {
        RdpAccountant::get_delta(self, epsilon)
    }

    fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pure_dp_fixtures() {
        // docs/ALGORITHMS.md §5.1 (checked values).
        assert!((pure_dp_rdp(1.0, 2.0) - 0.735326).abs() < 1e-6);
        assert!((pure_dp_rdp(3.0, 5.0) - 2.987853).abs() < 1e-6);
        // Large ε·α does not overflow and stays ≤ ε.
        let v = pure_dp_rdp(50.0, 1024.0);
        assert!(v.is_finite() && v <= 50.0 && v > 49.9);
    }

    #[test]
    fn laplace_limits() {
        // α → ∞: ε → 1/b. α = 2, b = 1: ln(2/3·e + 1/3·e^{−2}).
        let v = laplace_rdp(1.0, 2.0);
        let want = (2.0 / 3.0 * 1f64.exp() + 1.0 / 3.0 * (-2.0f64).exp()).ln();
        assert!((v - want).abs() < 1e-14);
        assert!((laplace_rdp(0.5, 1e6) - 2.0).abs() < 1e-4);
    }

    #[test]
    fn quadrature_matches_binomial_sum_at_integer_orders() {
        // Two independent computations of ln A_α: the binomial sum and the quadrature.
        for &(q, z) in &[
            (0.01, 0.5),
            (0.1, 1.1),
            (0.1, 0.7),
            (0.5, 2.0),
            (0.001, 5.0),
            (0.2, 0.3),
            (1e-4, 20.0),
            (0.9, 1.0),
            (0.01, 50.0),
            (1e-6, 3.5),
            (0.05, 4.0),
        ] {
            // Both regimes of the step (z below and above 3.54) and long ranges (large α).
            for alpha in [2u64, 3, 5, 8, 12, 32, 100, 256] {
                let exact = log_a_int(q, z, alpha);
                let quad = log_a_quad(q, z, alpha as f64).unwrap();
                // ln A is computed to full relative accuracy by both routes (agreement seen: below 1e-13).
                let tol = 1e-12 * exact.abs();
                assert!(
                    (exact - quad).abs() <= tol,
                    "q={q} z={z} α={alpha}: {exact} vs {quad}"
                );
            }
        }
    }

    #[test]
    fn fractional_orders_are_monotone_and_finite() {
        // dp_accounting drops low fractional orders at q = 0.1, z ≤ 1.1; we must not.
        for z in [0.5, 0.8, 1.1] {
            let mut last = 0.0;
            for k in 1..=200 {
                let a = 1.0 + k as f64 / 20.0;
                let v = poisson_gaussian_rdp(0.1, z, a);
                assert!(
                    v.is_finite() && v >= last - 1e-12,
                    "z={z} α={a}: {v} < {last}"
                );
                last = v;
            }
        }
    }

    #[test]
    fn zhu_wang_is_above_exact_gaussian() {
        // The generic bound applied to the Gaussian curve must not undercut the exact value.
        for &(q, z) in &[(0.01, 1.0), (0.1, 2.0), (0.05, 0.8)] {
            let orders: Vec<f64> = (2..=64).map(|k| k as f64).collect();
            let exact = rdp_curve(&DpEvent::poisson_gaussian(q, z, 1), &orders).unwrap();
            let base: Vec<f64> = (0..=64)
                .map(|k| gaussian_rdp(z, (k as f64).max(2.0)))
                .collect();
            for (i, &a) in orders.iter().enumerate() {
                let zw = zhu_wang_bound(q, a as u64, &base).min(gaussian_rdp(z, a));
                assert!(
                    zw >= exact[i] * (1.0 - 1e-12),
                    "q={q} z={z} α={a}: {zw} < {}",
                    exact[i]
                );
            }
        }
    }

    #[test]
    fn conversion_properties() {
        let mut acc = RdpAccountant::new();
        acc.compose(&DpEvent::Gaussian {
            noise_multiplier: 1.0,
        })
        .unwrap();
        let r = acc.get_epsilon_and_order(1e-5).unwrap();
        // Round trip: δ(ε(δ)) ≤ δ (the same bound family, so equality up to rounding).
        let d = acc.get_delta(r.epsilon).unwrap();
        assert!(d <= 1e-5 * (1.0 + 1e-9), "{d}");
        assert!(acc.orders().contains(&r.optimal_order));
        assert!(acc.get_epsilon(0.0).is_err());
        assert!(acc.get_epsilon(1.0).is_err());
        assert!(acc.get_delta(-1.0).is_err());
        // Empty accountant: ε = 0.
        assert_eq!(RdpAccountant::new().get_epsilon(1e-5).unwrap(), 0.0);
    }

    /// `D_α(p‖r)` of two explicit laws, computed directly.
    fn renyi(p: &[f64], r: &[f64], a: f64) -> f64 {
        p.iter()
            .zip(r)
            .map(|(x, y)| x.powf(a) * y.powf(1.0 - a))
            .sum::<f64>()
            .ln()
            / (a - 1.0)
    }

    /// The accountant's `LocalSampled(PureDp)` curve against the Rényi divergence of the explicit
    /// mixture of randomized response with a visible ⊥ (RR is the worst ε-DP pair, so this is
    /// exact), and it is never below what plain Poisson sampling would claim at ε(δ).
    #[test]
    fn local_sampled_pure_dp_is_the_rr_mixture() {
        let orders = [1.5, 2.0, 3.0, 10.0, 64.0];
        for (eps, q) in [(0.5f64, 0.2f64), (2.0, 0.05), (4.0, 0.5)] {
            let e = DpEvent::LocalSampled {
                rate: q,
                event: Box::new(DpEvent::PureDp { epsilon: eps }),
            };
            let curve = rdp_curve(&e, &orders).unwrap();
            let p = eps.exp() / (1.0 + eps.exp());
            let pm = [q * p, q * (1.0 - p), 1.0 - q];
            let pn = [q * (1.0 - p), q * p, 1.0 - q];
            for (&a, &c) in orders.iter().zip(&curve) {
                let direct = renyi(&pm, &pn, a);
                assert!(
                    (c - direct).abs() <= 1e-10 * direct,
                    "ε={eps} q={q} α={a}: {c} vs {direct}"
                );
            }
        }
        let eps_of = |e: DpEvent| {
            let mut acc = RdpAccountant::new();
            acc.compose(&e).unwrap();
            acc.get_epsilon(1e-6).unwrap()
        };
        let pure = || Box::new(DpEvent::PureDp { epsilon: 1.0 });
        let l = eps_of(DpEvent::LocalSampled {
            rate: 0.01,
            event: pure(),
        });
        let c = eps_of(DpEvent::PoissonSampled {
            rate: 0.01,
            event: pure(),
        });
        assert!(l > c, "local {l} vs central {c}");
    }

    #[test]
    fn local_sampling_is_exact_on_explicit_laws() {
        // Two explicit laws μ, ν on 3 letters; the sampled laws add a fourth letter ⊥ with mass
        // 1 − q. D_α of the sampled pair computed directly must equal the formula applied to
        // D_α(μ‖ν) (which is itself computed directly).
        let mu = [0.5, 0.3, 0.2];
        let nu = [0.2, 0.3, 0.5];
        for q in [0.01, 0.3, 1.0] {
            for a in [1.5, 2.0, 7.0, 40.0] {
                let base = renyi(&mu, &nu, a);
                let pm: Vec<f64> = mu.iter().map(|x| q * x).chain([1.0 - q]).collect();
                let pn: Vec<f64> = nu.iter().map(|x| q * x).chain([1.0 - q]).collect();
                let direct = if q < 1.0 { renyi(&pm, &pn, a) } else { base };
                let f = local_sampled_rdp(q, base, a).unwrap();
                assert!(
                    (f - direct).abs() <= 1e-12 * direct.max(1e-300),
                    "q={q} α={a}: {f} vs {direct}"
                );
                assert!(f <= base);
            }
        }
        // Large (α−1)ε stays finite and tends to ε; ∞ stays ∞; bad arguments are errors.
        let v = local_sampled_rdp(0.01, 3.0, 2048.0).unwrap();
        assert!(v < 3.0 && v > 3.0 - 0.01, "{v}");
        assert_eq!(
            local_sampled_rdp(0.5, f64::INFINITY, 2.0).unwrap(),
            f64::INFINITY
        );
        assert!(local_sampled_rdp(0.0, 1.0, 2.0).is_err());
        assert!(local_sampled_rdp(0.5, 1.0, 1.0).is_err());
        assert!(local_sampled_rdp(0.5, -1.0, 2.0).is_err());
        assert!(local_sampled_rdp(0.5, f64::NAN, 2.0).is_err());
    }

    #[test]
    fn user_curve_and_generic_subsampling() {
        let mut acc = RdpAccountant::new();
        acc.compose(&DpEvent::PoissonSampled {
            rate: 0.01,
            event: Box::new(DpEvent::Laplace { scale: 1.0 }),
        })
        .unwrap();
        let e = acc.get_epsilon(1e-5).unwrap();
        let mut plain = RdpAccountant::new();
        plain.compose(&DpEvent::Laplace { scale: 1.0 }).unwrap();
        assert!(e > 0.0 && e < plain.get_epsilon(1e-5).unwrap());
        // A curve above the largest order gives +∞ there, not a panic.
        let mut c = RdpAccountant::new();
        c.compose(&DpEvent::RdpCurve {
            orders: vec![2.0, 8.0],
            epsilons: vec![0.1, 0.5],
        })
        .unwrap();
        assert!(c.get_epsilon(1e-5).unwrap().is_finite());
    }

    fn wor(n: u64, m: u64, inner: DpEvent) -> DpEvent {
        DpEvent::SampledWithoutReplacement {
            source_dataset_size: n,
            sample_size: m,
            event: Box::new(inner),
        }
    }

    fn gauss(z: f64) -> DpEvent {
        DpEvent::Gaussian {
            noise_multiplier: z,
        }
    }

    #[test]
    fn sampling_without_replacement_bounds() {
        let orders = default_orders();
        let replace_one = || {
            RdpAccountant::with_relation(orders.clone(), NeighbouringRelation::ReplaceOne).unwrap()
        };
        // m = n is the Gaussian itself.
        let full = rdp_curve(&wor(10, 10, gauss(1.3)), &orders).unwrap();
        let plain = rdp_curve(&gauss(1.3), &orders).unwrap();
        assert_eq!(full, plain);
        // Below the cap, finite, monotone in the order and in the sampling ratio.
        let mut last_q: Option<Vec<f64>> = None;
        for m in [1u64, 10, 50, 200] {
            let c = rdp_curve(&wor(1000, m, gauss(0.9)), &orders).unwrap();
            for (i, &a) in orders.iter().enumerate() {
                assert!(c[i].is_finite() && c[i] >= 0.0 && c[i] <= gaussian_rdp(0.9, a));
                if i > 0 {
                    assert!(c[i] >= c[i - 1] * (1.0 - 1e-12), "m={m} α={a}");
                }
            }
            if let Some(prev) = &last_q {
                assert!(c.iter().zip(prev).all(|(x, y)| x >= y));
            }
            last_q = Some(c);
        }
        // The strengthened terms never exceed the plain `2e^{(j−1)ε(j)}` ones (WBK19 Thm. 9
        // for the Gaussian, ε(∞) = ∞), computed here directly.
        let (q, z) = (0.05f64, 1.1f64);
        let deltas = wor_forward_diffs(z, 64);
        for alpha in [2u64, 3, 7, 16, 64] {
            let a = alpha as f64;
            let e2 = 2.0 / (2.0 * z * z);
            let mut t = vec![
                0.0,
                2.0 * q.ln() + log_comb(a, 2.0) + (4.0 * libm::expm1(e2)).min(2.0 * e2.exp()).ln(),
            ];
            for j in 3..=alpha {
                let jf = j as f64;
                t.push(jf * q.ln() + log_comb(a, jf) + 2f64.ln() + (jf - 1.0) * jf / (2.0 * z * z));
            }
            let plain = log_sum_exp(&t);
            assert!(wor_gaussian_log_a_int(q, z, alpha, &deltas) <= plain + 1e-12);
        }
        // The forward differences of e^{(k−1)ε(k)} at 0, directly for small k: Δ¹ = e^{ε(2)} − 1,
        // Δ² = e^{3ε(3)}... from the values g_k = e^{(k−1)k/(2z²)}.
        let g = |k: f64| ((k - 1.0) * k / (2.0 * z * z)).exp();
        let d1 = g(1.0) - g(0.0);
        let d2 = g(2.0) - 2.0 * g(1.0) + g(0.0);
        let d3 = g(3.0) - 3.0 * g(2.0) + 3.0 * g(1.0) - g(0.0);
        assert!((deltas[0] - d1.abs().ln()).abs() < 1e-12 || d1 == 0.0);
        assert!(
            (deltas[1] - d2.ln()).abs() < 1e-12,
            "{} {}",
            deltas[1],
            d2.ln()
        );
        assert!(
            (deltas[2] - d3.ln()).abs() < 1e-12,
            "{} {}",
            deltas[2],
            d3.ln()
        );
        // Compositions of Gaussians inside are their effective Gaussian.
        let two = DpEvent::Composed {
            events: vec![gauss(2.0), gauss(2.0)],
        };
        let c2 = rdp_curve(&wor(100, 5, two), &orders).unwrap();
        let c1 = rdp_curve(&wor(100, 5, gauss(2.0 / 2f64.sqrt())), &orders).unwrap();
        for (x, y) in c2.iter().zip(&c1) {
            assert!((x - y).abs() <= 1e-12 * y.max(1e-300), "{x} vs {y}");
        }
        // Relations: replace-one composes it and refuses Poisson sampling; add/remove-one the
        // reverse; anything but Gaussians inside is refused under both.
        let mut r1 = replace_one();
        r1.compose(&wor(100, 5, gauss(1.0))).unwrap();
        r1.compose(&gauss(3.0)).unwrap();
        assert_eq!(r1.relation(), NeighbouringRelation::ReplaceOne);
        assert_eq!(
            PrivacyAccountant::neighbouring_relation(&r1),
            NeighbouringRelation::ReplaceOne
        );
        let poisson = DpEvent::poisson_gaussian(0.1, 1.0, 3);
        assert!(!r1.supports(&poisson));
        assert!(matches!(
            r1.compose(&poisson),
            Err(AccountingError::UnsupportedEvent { .. })
        ));
        assert!(r1.supports(&DpEvent::poisson_gaussian(1.0, 1.0, 3)));
        let mut ar = RdpAccountant::new();
        let e = ar.compose(&wor(100, 5, gauss(1.0))).unwrap_err();
        assert!(e.to_string().contains("replace-one"), "{e}");
        let laplace = wor(100, 5, DpEvent::Laplace { scale: 1.0 });
        for acc in [&mut r1, &mut ar] {
            let err = acc.compose(&laplace).unwrap_err();
            assert!(
                matches!(&err, AccountingError::UnsupportedEvent { event, .. }
                    if event == "SampledWithoutReplacement(Laplace)"),
                "{err}"
            );
        }
        assert_eq!(r1.ledger().runs().len(), 2);
        // Invalid sizes.
        assert!(wor(0, 0, gauss(1.0)).validate().is_err());
        assert!(wor(10, 0, gauss(1.0)).validate().is_err());
        assert!(wor(10, 11, gauss(1.0)).validate().is_err());
        assert!(wor(10, 1, gauss(-1.0)).validate().is_err());
    }
}
