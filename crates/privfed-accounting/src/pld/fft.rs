//! Composition by FFT: the Chernoff window of a composed loss, cyclic convolution by real FFT
//! (self-composition by complex powers), grid fitting for bounded memory.

use std::sync::Arc;

use realfft::RealFftPlanner;
use realfft::num_complex::Complex;

use super::pmf::DiscretePld;
use super::{MAX_PMF_LEN, TRIM_MASS};

impl DiscretePld {
    /// Chernoff window `[x_lo, x_hi]` (in loss units) for a sum whose log-MGF is `k(t)`, with
    /// at most `tail` mass beyond each end; also clipped to `[min_sum, max_sum]`. `var` is the
    /// variance of the sum, used only to guess good values of `t`.
    pub(super) fn window(
        k: impl Fn(f64) -> f64,
        tail: f64,
        min_sum: f64,
        max_sum: f64,
        var: f64,
        refine_above: f64,
    ) -> (f64, f64) {
        let lt = tail.ln();
        let mut hi = max_sum;
        let mut lo = min_sum;
        // Any t > 0 gives a valid bound. For a near-normal sum the best t is about
        // √(2 ln(1/tail)/var); try around it (factors of √2) plus a coarse fallback grid.
        let t_star = if var > 0.0 {
            (-2.0 * lt / var).sqrt()
        } else {
            1.0
        };
        let guesses = [-1i32, 0, 1].map(|j| t_star * 2f64.powf(j as f64 / 2.0));
        let fallback = [2f64.powi(-8), 2f64.powi(-4), 1.0, 16.0];
        let bound = |ts: &[f64], hi: &mut f64, lo: &mut f64| {
            for &t in ts {
                if !(t > 0.0 && t.is_finite()) {
                    continue;
                }
                let kp = k(t);
                if kp.is_finite() {
                    *hi = hi.min((kp - lt) / t);
                }
                let km = k(-t);
                if km.is_finite() {
                    *lo = lo.max((lt - km) / t);
                }
            }
        };
        bound(&guesses, &mut hi, &mut lo);
        // The coarse grid only if the guesses found nothing (e.g. a degenerate variance).
        if hi == max_sum || lo == min_sum {
            bound(&fallback, &mut hi, &mut lo);
        }
        // Wide window (heavy tails, e.g. the remove direction at small z): minimize each bound
        // over ln t by golden-section search (each is unimodal in t: the derivative of
        // (nK(t) − ln tail)/t has the sign of t·nK'(t) − nK(t) + ln tail, increasing in t).
        if hi - lo > refine_above {
            let golden = |f: &dyn Fn(f64) -> f64| -> f64 {
                let (mut a, mut b) = (t_star.ln() - 12.0, t_star.ln() + 6.0);
                let r = 0.618_033_988_749_895;
                let (mut c, mut d) = (b - r * (b - a), a + r * (b - a));
                let (mut fc, mut fd) = (f(c.exp()), f(d.exp()));
                let mut best = fc.min(fd);
                // Each step keeps one interior point and evaluates one new one; 16 steps shrink
                // the 18-wide bracket in ln t to 0.008: ample for a window.
                for _ in 0..16 {
                    if fc <= fd {
                        (b, d, fd) = (d, c, fc);
                        c = b - r * (b - a);
                        fc = f(c.exp());
                        best = best.min(fc);
                    } else {
                        (a, c, fc) = (c, d, fd);
                        d = a + r * (b - a);
                        fd = f(d.exp());
                        best = best.min(fd);
                    }
                }
                best
            };
            let f_hi = |t: f64| {
                let v = k(t);
                if v.is_finite() {
                    (v - lt) / t
                } else {
                    f64::INFINITY
                }
            };
            let f_lo = |t: f64| {
                let v = k(-t);
                if v.is_finite() {
                    -(lt - v) / t
                } else {
                    f64::INFINITY
                }
            };
            hi = hi.min(golden(&f_hi));
            lo = lo.max(-golden(&f_lo));
        }
        (lo.min(hi), hi)
    }

    pub(super) fn min_loss(&self) -> f64 {
        self.offset as f64 * self.h
    }

    pub(super) fn max_loss(&self) -> f64 {
        (self.offset + self.pmf.len() as i64 - 1) as f64 * self.h
    }

    /// The `n`-fold composition (`n ≥ 1`), by one real FFT, a pointwise `n`-th power and one
    /// inverse FFT on a Chernoff window with at most `tail` mass beyond each end.
    pub fn self_composed(&self, n: u64, tail: f64) -> Self {
        if n == 0 {
            return Self::identity(self.h);
        }
        if n == 1 {
            return self.clone();
        }
        let nf = n as f64;
        let inf_mass = -libm::expm1(nf * libm::log1p(-self.inf_mass.min(1.0)));
        let (x_lo, x_hi) = Self::window(
            |t| nf * self.log_mgf(t),
            tail,
            nf * self.min_loss(),
            nf * self.max_loss(),
            nf * self.variance(),
            (MAX_PMF_LEN / 4) as f64 * self.h,
        );
        let w_lo = (x_lo / self.h).floor() as i64;
        let w_hi = (x_hi / self.h).ceil() as i64;
        let width = (w_hi - w_lo + 1) as usize;
        if width > MAX_PMF_LEN {
            return self.coarsened().self_composed(n, tail);
        }
        let len = fft_len(width.max(2));
        let shift = self.offset * n as i64; // absolute index of Σ j = 0
        let spec = cpow_all(forward(&fold(&self.pmf, len)), n);
        let cyc = inverse(spec, len);
        let mut upper = 0.0;
        // Upper-tail mass beyond x_hi is at most `tail` by construction of the window (unless
        // the window reached the maximum possible sum, where it is 0).
        if w_hi as f64 * self.h < nf * self.max_loss() {
            upper = tail;
        }
        self.unfold(cyc, len, w_lo, width, shift, inf_mass + upper)
    }

    /// Composition with another PLD (grids are coarsened to the wider of the two).
    pub fn composed(&self, other: &Self, tail: f64) -> Self {
        if self.is_identity() {
            return other.coarsened_to(self.h);
        }
        if other.is_identity() {
            return self.coarsened_to(other.h);
        }
        let h = self.h.max(other.h);
        let (a, b) = (self.coarsened_to(h), other.coarsened_to(h));
        let inf_mass = 1.0 - (1.0 - a.inf_mass) * (1.0 - b.inf_mass);
        let (x_lo, x_hi) = Self::window(
            |t| a.log_mgf(t) + b.log_mgf(t),
            tail,
            a.min_loss() + b.min_loss(),
            a.max_loss() + b.max_loss(),
            a.variance() + b.variance(),
            (MAX_PMF_LEN / 4) as f64 * h,
        );
        let w_lo = (x_lo / h).floor() as i64;
        let w_hi = (x_hi / h).ceil() as i64;
        let width = (w_hi - w_lo + 1) as usize;
        if width > MAX_PMF_LEN {
            return a.coarsened().composed(&b.coarsened(), tail);
        }
        let len = fft_len(width.max(2));
        let sa = forward(&fold(&a.pmf, len));
        let sb = forward(&fold(&b.pmf, len));
        let spec: Vec<Complex<f64>> = sa.into_iter().zip(sb).map(|(x, y)| x * y).collect();
        let cyc = inverse(spec, len);
        let upper = if (w_hi as f64) * h < a.max_loss() + b.max_loss() {
            tail
        } else {
            0.0
        };
        a.unfold(cyc, len, w_lo, width, a.offset + b.offset, inf_mass + upper)
    }

    /// Reads the window `[w_lo, w_lo + width)` (absolute indices) out of a cyclic result whose
    /// index 0 is absolute index `shift`.
    pub(super) fn unfold(
        &self,
        cyc: Vec<f64>,
        len: usize,
        w_lo: i64,
        width: usize,
        shift: i64,
        inf_mass: f64,
    ) -> Self {
        let l = len as i64;
        let pmf: Vec<f64> = (0..width as i64)
            .map(|i| cyc[(w_lo + i - shift).rem_euclid(l) as usize].max(0.0))
            .collect();
        Self {
            h: self.h,
            offset: w_lo,
            pmf,
            inf_mass: inf_mass.min(1.0),
        }
        .trimmed(TRIM_MASS)
    }
}

/// Smallest `2^a` or `3·2^a` at least `n`.
pub(super) fn fft_len(n: usize) -> usize {
    let p = n.next_power_of_two();
    if p / 4 * 3 >= n { p / 4 * 3 } else { p }
}

pub(super) fn fold(p: &[f64], len: usize) -> Vec<f64> {
    let mut out = vec![0.0; len];
    for (j, &v) in p.iter().enumerate() {
        out[j % len] += v;
    }
    out
}

thread_local! {
    static PLANNER: std::cell::RefCell<RealFftPlanner<f64>> = std::cell::RefCell::new(RealFftPlanner::new());
}

pub(super) fn forward(x: &[f64]) -> Vec<Complex<f64>> {
    let plan: Arc<dyn realfft::RealToComplex<f64>> =
        PLANNER.with(|p| p.borrow_mut().plan_fft_forward(x.len()));
    let mut input = x.to_vec();
    let mut out = plan.make_output_vec();
    plan.process(&mut input, &mut out)
        .expect("lengths from the plan");
    out
}

pub(super) fn inverse(mut spec: Vec<Complex<f64>>, len: usize) -> Vec<f64> {
    let plan: Arc<dyn realfft::ComplexToReal<f64>> =
        PLANNER.with(|p| p.borrow_mut().plan_fft_inverse(len));
    // The imaginary parts of the DC (and Nyquist) bins must be exactly 0 for realfft.
    spec[0].im = 0.0;
    if len.is_multiple_of(2) {
        let last = spec.len() - 1;
        spec[last].im = 0.0;
    }
    let mut out = plan.make_output_vec();
    plan.process(&mut spec, &mut out)
        .expect("lengths from the plan");
    let scale = 1.0 / len as f64;
    out.iter_mut().for_each(|v| *v *= scale);
    out
}

/// `c^n` for every bin by binary exponentiation (about `2·log₂ n` complex products per bin;
/// relative error of order `n·2⁻⁵³`, like the polar form, and `|c| ≤ 1` so nothing overflows).
/// The loop over bits is outside the loop over bins so that the inner loops vectorize.
pub(super) fn cpow_all(mut c: Vec<Complex<f64>>, mut n: u64) -> Vec<Complex<f64>> {
    let mut acc = vec![Complex::new(1.0, 0.0); c.len()];
    while n > 0 {
        if n & 1 == 1 {
            acc.iter_mut().zip(&c).for_each(|(a, b)| *a *= *b);
        }
        n >>= 1;
        if n > 0 {
            c.iter_mut().for_each(|b| *b = *b * *b);
        }
    }
    acc
}
