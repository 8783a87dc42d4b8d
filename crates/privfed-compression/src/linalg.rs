//! Small dense linear algebra for the designer (systems of at most a few hundred unknowns).

/// Solves the square system `A z = b` (row-major `A`, `k × k`) by Gaussian elimination with
/// full pivoting, treating pivots below `tol · max|A|` as zero (a rank-deficient but consistent
/// system gets a particular solution with the free unknowns set to 0). Returns `None` if the
/// system is inconsistent beyond `tol` or a value is not finite.
pub(crate) fn solve_consistent(a: &[f64], b: &[f64], k: usize, tol: f64) -> Option<Vec<f64>> {
    let mut m = a.to_vec();
    let mut rhs = b.to_vec();
    let mut col_perm: Vec<usize> = (0..k).collect();
    let scale = m
        .iter()
        .fold(0.0f64, |s, v| s.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let mut rank = 0;
    for r in 0..k {
        // Full pivot in the trailing block.
        let (mut pr, mut pc, mut best) = (r, r, 0.0f64);
        for i in r..k {
            for j in r..k {
                let v = m[i * k + j].abs();
                if v > best {
                    best = v;
                    pr = i;
                    pc = j;
                }
            }
        }
        if best <= tol * scale {
            break;
        }
        if pr != r {
            for j in 0..k {
                m.swap(r * k + j, pr * k + j);
            }
            rhs.swap(r, pr);
        }
        if pc != r {
            for i in 0..k {
                m.swap(i * k + r, i * k + pc);
            }
            col_perm.swap(r, pc);
        }
        let piv = m[r * k + r];
        for i in r + 1..k {
            let f = m[i * k + r] / piv;
            if f != 0.0 {
                for j in r..k {
                    m[i * k + j] -= f * m[r * k + j];
                }
                rhs[i] -= f * rhs[r];
            }
        }
        rank += 1;
    }
    let rhs_scale = b.iter().fold(1.0f64, |s, v| s.max(v.abs()));
    if rhs[rank..].iter().any(|v| v.abs() > 1e-6 * rhs_scale) {
        return None;
    }
    let mut z = vec![0.0; k];
    for r in (0..rank).rev() {
        let mut s = rhs[r];
        for j in r + 1..rank {
            s -= m[r * k + j] * z[j];
        }
        z[r] = s / m[r * k + r];
    }
    let mut out = vec![0.0; k];
    for (r, &c) in col_perm.iter().enumerate() {
        out[c] = z[r];
    }
    out.iter().all(|v| v.is_finite()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_regular_and_singular_consistent_systems() {
        let a = [2.0, 1.0, 1.0, 3.0];
        let z = solve_consistent(&a, &[3.0, 5.0], 2, 1e-13).unwrap();
        assert!((z[0] - 0.8).abs() < 1e-14 && (z[1] - 1.4).abs() < 1e-14);
        // Rank 1, consistent.
        let a = [1.0, 2.0, 2.0, 4.0];
        let z = solve_consistent(&a, &[1.0, 2.0], 2, 1e-13).unwrap();
        assert!((z[0] + 2.0 * z[1] - 1.0).abs() < 1e-14);
        // Inconsistent.
        assert!(solve_consistent(&a, &[1.0, 3.0], 2, 1e-13).is_none());
    }
}
