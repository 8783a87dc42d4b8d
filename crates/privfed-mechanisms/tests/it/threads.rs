//! Vectors split across generator streams and threads: bit-for-bit independence of the thread
//! count, independence of the block streams, and the noise law on the multi-block path.

use privfed_mechanisms::domain::Domain;
use privfed_mechanisms::gaussian::Gaussian;
use privfed_mechanisms::laplace::Laplace;
use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::rng::{BLOCK_LEN, Threads, seeded_rng_for_experiments};
use privfed_mechanisms::sampling::uniform_on_sphere;
use privfed_mechanisms::special::norm_cdf;
use privfed_mechanisms::{AnyRandomizer, LocalRandomizer};
use privfed_testkit::{assert_ks_fits, assert_z};

/// Three whole blocks and a ragged tail.
const D: usize = 3 * BLOCK_LEN + 5;

fn mechanisms() -> Vec<AnyRandomizer> {
    vec![
        PrivUnit2::optimized(4.0, D).unwrap().into(),
        PrivUnitG::optimized(4.0, D).unwrap().into(),
        Gaussian::new(
            1.0,
            1e-6,
            Domain::L2Ball {
                dim: D,
                radius: 1.0,
            },
        )
        .unwrap()
        .into(),
        // ‖u‖₁ ≤ √D ≈ 222 for a unit u.
        Laplace::new(
            1.0,
            Domain::L1Ball {
                dim: D,
                radius: 250.0,
            },
        )
        .unwrap()
        .into(),
    ]
}

#[test]
fn outputs_are_identical_for_every_thread_count() {
    let u = uniform_on_sphere(D, &mut seeded_rng_for_experiments(1)).unwrap();
    for m in mechanisms() {
        let reference = m.privatize(&u, &mut seeded_rng_for_experiments(2)).unwrap();
        for t in [1, 2, 3, 7] {
            let mut out = vec![0.0; D];
            m.privatize_into_threads(
                &u,
                &mut out,
                &mut seeded_rng_for_experiments(2),
                Threads::new(t),
            )
            .unwrap();
            assert!(
                reference
                    .iter()
                    .zip(&out)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{}: {t} threads differ from one",
                m.name()
            );
        }
        // A different seed gives a different vector (the key comes from the caller's generator).
        let other = m.privatize(&u, &mut seeded_rng_for_experiments(3)).unwrap();
        assert_ne!(reference, other, "{}", m.name());
    }
}

#[test]
fn bad_inputs_get_the_same_typed_errors_on_every_thread_count() {
    // PrivUnit2 and PrivUnitG take ‖x‖ from their parallel Gaussian pass instead of a separate
    // check: the errors must be those of `Domain::check` (same variant, same index, same
    // dimensions) for any thread count.
    use privfed_mechanisms::MechanismError;
    let u = uniform_on_sphere(D, &mut seeded_rng_for_experiments(1)).unwrap();
    for m in mechanisms() {
        let mut nan = u.clone();
        nan[2 * BLOCK_LEN + 3] = f64::NAN;
        let mut inf = u.clone();
        inf[7] = f64::NEG_INFINITY;
        let long: Vec<f64> = u.iter().map(|v| v * 300.0).collect();
        let cases: [(&[f64], &str); 4] = [
            (&nan, "nan"),
            (&inf, "inf"),
            (&u[..D - 1], "short"),
            (&long, "too long a vector"),
        ];
        for (x, what) in cases {
            let want = m.domain().check(x).unwrap_err();
            for t in [1, 2, 3] {
                let mut out = vec![0.0; D];
                let got = m
                    .privatize_into_threads(
                        x,
                        &mut out,
                        &mut seeded_rng_for_experiments(2),
                        Threads::new(t),
                    )
                    .unwrap_err();
                // Same variant; the same fields except an out-of-domain message, which quotes
                // the norm as summed in a different order.
                assert_eq!(
                    std::mem::discriminant(&got),
                    std::mem::discriminant(&want),
                    "{} {what} {t} threads: {got:?} vs {want:?}",
                    m.name()
                );
                if !matches!(want, MechanismError::OutOfDomain(_)) {
                    assert_eq!(format!("{got:?}"), format!("{want:?}"));
                }
                if what == "nan" {
                    assert!(matches!(
                        got,
                        MechanismError::NonFiniteInput { index, .. } if index == 2 * BLOCK_LEN + 3
                    ));
                }
            }
        }
    }
}

#[test]
fn gaussian_noise_on_the_threaded_path_is_iid_normal() {
    // Gaussian mechanism at x = 0 with 2 threads: the D coordinates of one output, divided by σ,
    // pass KS against N(0,1) (α = 1e-6); and the blocks are independent streams: for each pair
    // of blocks, Σ_j g[a·B + j]·g[b·B + j] / √B is N(0,1) under independence (and ≈ √B if two
    // streams coincided); z-tests at α = 1e-6 for the 3 pairs.
    let m = Gaussian::with_sigma(
        2.0,
        1e-6,
        Domain::L2Ball {
            dim: D,
            radius: 1.0,
        },
    )
    .unwrap();
    let x = vec![0.0; D];
    let mut out = vec![0.0; D];
    m.privatize_into_threads(
        &x,
        &mut out,
        &mut seeded_rng_for_experiments(5),
        Threads::new(2),
    )
    .unwrap();
    let mut g: Vec<f64> = out.iter().map(|v| v / 2.0).collect();
    for (a, b) in [(0usize, 1usize), (0, 2), (1, 2)] {
        let s: f64 = (0..BLOCK_LEN)
            .map(|j| g[a * BLOCK_LEN + j] * g[b * BLOCK_LEN + j])
            .sum();
        assert_z(
            s / (BLOCK_LEN as f64).sqrt(),
            1e-6,
            &format!("blocks {a} and {b} correlated"),
        );
    }
    assert_ks_fits(&mut g, norm_cdf, 1e-6, "threaded Gaussian noise");
}

#[test]
fn laplace_noise_on_the_threaded_path_is_iid_laplace() {
    // Laplace mechanism at x = 0 with 3 threads: the coordinates of one output divided by the
    // scale pass KS against Laplace(1) (α = 1e-6).
    let m = Laplace::new(
        2.0,
        Domain::L1Ball {
            dim: D,
            radius: 1.0,
        },
    )
    .unwrap();
    let x = vec![0.0; D];
    let mut out = vec![0.0; D];
    m.privatize_into_threads(
        &x,
        &mut out,
        &mut seeded_rng_for_experiments(6),
        Threads::new(3),
    )
    .unwrap();
    let b = m.scale();
    let mut z: Vec<f64> = out.iter().map(|v| v / b).collect();
    let cdf = |t: f64| {
        if t < 0.0 {
            0.5 * t.exp()
        } else {
            1.0 - 0.5 * (-t).exp()
        }
    };
    assert_ks_fits(&mut z, cdf, 1e-6, "threaded Laplace noise");
}

#[test]
fn privunit2_direction_on_the_threaded_path_is_uniform() {
    // PrivUnit2's output direction, projected on a unit vector e orthogonal to u, has the law of
    // ⟨V, e⟩ for V uniform on the cap/complement: given t = ⟨V,u⟩ it is √(1−t²)·(first
    // coordinate of a uniform point on S^{d−2}) ≈ N(0, (1−t²)/(d−1)). Over 400 draws with
    // 2 threads, √(d−1)·⟨V,e⟩/√(1−t²) passes KS against N(0,1) at α = 1e-6 (the normal
    // approximation of the sphere coordinate is off by O(1/d) ≈ 2e-5 in CDF, far below the KS
    // critical value ≈ 0.13 at n = 400).
    let d = D;
    let mech = PrivUnit2::optimized(4.0, d).unwrap();
    let mut rng = seeded_rng_for_experiments(7);
    let u = uniform_on_sphere(d, &mut rng).unwrap();
    // e: a uniform vector made orthogonal to u.
    let mut e = uniform_on_sphere(d, &mut rng).unwrap();
    let c: f64 = e.iter().zip(&u).map(|(a, b)| a * b).sum();
    e.iter_mut().zip(&u).for_each(|(a, b)| *a -= c * b);
    let ne = e.iter().map(|a| a * a).sum::<f64>().sqrt();
    e.iter_mut().for_each(|a| *a /= ne);
    let mut out = vec![0.0; d];
    let mut zs = Vec::new();
    for _ in 0..400 {
        mech.privatize_into_threads(&u, &mut out, &mut rng, Threads::new(2))
            .unwrap();
        let t: f64 = out.iter().zip(&u).map(|(a, b)| a * b).sum::<f64>() * mech.m();
        let pe: f64 = out.iter().zip(&e).map(|(a, b)| a * b).sum::<f64>() * mech.m();
        zs.push(pe * ((d - 1) as f64).sqrt() / (1.0 - t * t).sqrt());
    }
    assert_ks_fits(&mut zs, norm_cdf, 1e-6, "PrivUnit2 direction, 2 threads");
}
