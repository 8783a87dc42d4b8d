//! [`AnyRandomizer`]: one value for "a randomizer chosen at run time" (by the CLI, the
//! simulator or a server), dispatching to the concrete types.

use crate::bitwise_rr::BitwiseRr;
use crate::gaussian::Gaussian;
use crate::grid_rr::GridRr;
use crate::laplace::Laplace;
use crate::mvu::Mvu;
use crate::privunit_inf::PrivUnitInf;
use crate::privunit2::PrivUnit2;
use crate::privunitg::PrivUnitG;
use crate::separated::Separated;
use crate::{CryptoRng, Domain, Guarantee, LocalRandomizer, Result, Rng};
use serde::Serialize;

/// Any of the crate's local randomizers. Serializes as the inner mechanism's parameters.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum AnyRandomizer {
    /// [`PrivUnit2`].
    PrivUnit2(PrivUnit2),
    /// [`PrivUnitG`].
    PrivUnitG(PrivUnitG),
    /// [`PrivUnitInf`].
    PrivUnitInf(PrivUnitInf),
    /// [`GridRr`] (ScalarDP, ScalarRelDP, unbiased generalized RR).
    GridRr(GridRr),
    /// [`Separated`].
    Separated(Separated),
    /// [`Laplace`].
    Laplace(Laplace),
    /// [`Gaussian`].
    Gaussian(Gaussian),
    /// [`BitwiseRr`] (unbiased bitwise RR, paper 004).
    BitwiseRr(BitwiseRr),
    /// [`Mvu`] (the MVU mechanism with a design, paper 004).
    Mvu(Mvu),
}

macro_rules! dispatch {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            AnyRandomizer::PrivUnit2($m) => $e,
            AnyRandomizer::PrivUnitG($m) => $e,
            AnyRandomizer::PrivUnitInf($m) => $e,
            AnyRandomizer::GridRr($m) => $e,
            AnyRandomizer::Separated($m) => $e,
            AnyRandomizer::Laplace($m) => $e,
            AnyRandomizer::Gaussian($m) => $e,
            AnyRandomizer::BitwiseRr($m) => $e,
            AnyRandomizer::Mvu($m) => $e,
        }
    };
}

impl LocalRandomizer for AnyRandomizer {
    fn name(&self) -> &'static str {
        dispatch!(self, m => m.name())
    }
    fn domain(&self) -> Domain {
        dispatch!(self, m => m.domain())
    }
    fn guarantee(&self) -> Guarantee {
        dispatch!(self, m => m.guarantee())
    }
    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        dispatch!(self, m => m.variance_at(x))
    }
    fn worst_case_variance(&self) -> f64 {
        dispatch!(self, m => m.worst_case_variance())
    }
    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        dispatch!(self, m => m.privatize_into(x, out, rng))
    }
    fn privatize_into_threads<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
        threads: crate::rng::Threads,
    ) -> Result<()> {
        dispatch!(self, m => m.privatize_into_threads(x, out, rng, threads))
    }
}

macro_rules! from_impl {
    ($($t:ident),*) => {$(
        impl From<$t> for AnyRandomizer {
            fn from(m: $t) -> Self {
                AnyRandomizer::$t(m)
            }
        }
    )*};
}
from_impl!(
    PrivUnit2,
    PrivUnitG,
    PrivUnitInf,
    GridRr,
    Separated,
    Laplace,
    Gaussian,
    BitwiseRr,
    Mvu
);

/// What `privfed describe` prints for a local randomizer and Python's
/// `LocalRandomizer.describe()` returns: its exact guarantee, dimension, worst-case variance,
/// input domain and parameters.
#[derive(Debug, Clone, Serialize)]
pub struct RandomizerReport<'a> {
    /// The mechanism's name ([`LocalRandomizer::name`]).
    pub mechanism: &'static str,
    /// ε of the guarantee (nats).
    pub epsilon: f64,
    /// δ of the guarantee (0 for pure ε-DP).
    pub delta: f64,
    /// Input (and output) dimension.
    pub dim: usize,
    /// Worst-case variance `max_x E‖M(x) − x‖²` over the domain.
    pub variance: f64,
    /// The input domain.
    pub domain: Domain,
    /// The guarantee (`kind`, `epsilon`, and `delta` for approximate DP).
    pub guarantee: Guarantee,
    /// The mechanism's parameters (its serde form).
    pub params: &'a AnyRandomizer,
}

impl AnyRandomizer {
    /// The [`RandomizerReport`] of this randomizer.
    pub fn report(&self) -> RandomizerReport<'_> {
        let g = self.guarantee();
        RandomizerReport {
            mechanism: self.name(),
            epsilon: g.epsilon(),
            delta: g.delta(),
            dim: self.dim(),
            variance: self.worst_case_variance(),
            domain: self.domain(),
            guarantee: g,
            params: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_states_the_mechanisms_own_guarantee_and_variance() {
        let m = AnyRandomizer::from(crate::privunit2::PrivUnit2::optimized(4.0, 100).unwrap());
        let r = m.report();
        assert_eq!(r.mechanism, m.name());
        assert_eq!(r.epsilon, m.guarantee().epsilon());
        assert_eq!(r.variance, m.worst_case_variance());
        assert_eq!(r.dim, 100);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["params"], serde_json::to_value(&m).unwrap());
        assert_eq!(v["guarantee"]["kind"], "pure");
    }
}
