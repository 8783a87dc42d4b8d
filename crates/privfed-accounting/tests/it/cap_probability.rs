//! Reconstruction-protection cap probability against 50-digit mpmath
//! (`scripts/reference/cap_probability_mpmath.py`).

use privfed_accounting::analysis::ln_cap_probability;

/// Relative tolerance on ln P₀ (|ln P₀| up to 1.4e5 at k = 1e6: the prefactor's lgamma terms and
/// ln(1 − t²) carry ~1e-16 relative each, and the continued fraction converges to 1e-16).
const LN_P0_REL: f64 = 1e-11;
/// Absolute floor for ln P₀ near ln ½.
const LN_P0_ABS: f64 = 1e-12;

#[test]
fn cap_probability_matches_mpmath() {
    let data: serde_json::Value =
        serde_json::from_str(include_str!("../data/cap_probability_reference.json")).unwrap();
    for c in data["cases"].as_array().unwrap() {
        let k = c["k"].as_u64().unwrap();
        let t = c["t"].as_f64().unwrap();
        let want = c["ln_p0"].as_f64().unwrap();
        let got = ln_cap_probability(k, t).unwrap();
        assert!(
            (got - want).abs() <= LN_P0_REL * want.abs() + LN_P0_ABS,
            "k={k} t={t}: {got} vs mpmath {want}"
        );
    }
}
