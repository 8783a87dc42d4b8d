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
