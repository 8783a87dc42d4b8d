//! A point of `[0, 1]` with its complement, and the Stirling term of `B(a,a)`: what the
//! incomplete beta (`beta`) and Temme's symmetric expansion (`temme`) share. A leaf module, so
//! `beta` can call `temme` and `temme` can use these without importing `beta`.

use super::gamma::stirling_delta;

/// A point of `[0, 1]` together with its complement, in the form the evaluation needs.
///
/// Exactly one of `x`, `y = 1 − x` is the *defining* value (`x_exact`); the other is its rounded
/// complement and is never used where its rounding error would matter: the logs are
/// `ln x = ln(x)`, `ln y = log1p(−x)` when `x` defines the point, and symmetrically otherwise.
/// (At `b = 5·10⁵` the rounding of `1 − x` alone would cost `b·2⁻⁵⁴ ≈ 3·10⁻¹¹` relative error.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Point {
    pub(crate) x: f64,
    pub(crate) y: f64,
    pub(crate) ln_x: f64,
    pub(crate) ln_y: f64,
    pub(crate) x_exact: bool,
}

impl Point {
    /// The point `x` (for `x > ½`, `1 − x` is exact and becomes the defining value).
    pub(crate) fn from_x(x: f64) -> Self {
        if x <= 0.5 {
            Point {
                x,
                y: 1.0 - x,
                ln_x: x.ln(),
                ln_y: (-x).ln_1p(),
                x_exact: true,
            }
        } else {
            Point::from_y(1.0 - x)
        }
    }

    /// The point with complement `y` (`y` exact).
    pub(crate) fn from_y(y: f64) -> Self {
        if y <= 0.5 {
            Point {
                x: 1.0 - y,
                y,
                ln_x: (-y).ln_1p(),
                ln_y: y.ln(),
                x_exact: false,
            }
        } else {
            Point::from_x(1.0 - y)
        }
    }

    /// The reflected point `1 − x` (for `I_x(a,b) = 1 − I_{1−x}(b,a)`).
    pub(crate) fn reflect(self) -> Self {
        Point {
            x: self.y,
            y: self.x,
            ln_x: self.ln_y,
            ln_y: self.ln_x,
            x_exact: !self.x_exact,
        }
    }

    /// `x·(a+b) − a = b − y·(a+b)`, with one rounding (fused multiply-add on the exact value,
    /// `a + b` split into its rounded sum and the exact rounding error).
    pub(crate) fn deviation(&self, a: f64, b: f64) -> f64 {
        let (s, err) = two_sum(a, b);
        if self.x_exact {
            self.x.mul_add(s, -a) + self.x * err
        } else {
            -(self.y.mul_add(s, -b) + self.y * err)
        }
    }
}

/// Error-free sum (Knuth's TwoSum): `a + b = s + err` exactly, `s = fl(a + b)`.
pub(crate) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// `δ(2a) − 2δ(a)` for `a ≥ 10` (the Stirling correction of `B(a,a)`).
pub(crate) fn symmetric_delta(a: f64) -> f64 {
    stirling_delta(2.0 * a) - 2.0 * stirling_delta(a)
}
