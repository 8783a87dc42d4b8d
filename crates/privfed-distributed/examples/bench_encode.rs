//! Client encode and server decode at d = 2^20 against their floors, single core: encode's is one
//! FWHT pass plus d Skellam draws (2d Poisson draws) from the same generator; decode's is one
//! FWHT pass plus the unscaling (integer to float times 1/s). Decode is timed both as `decode`
//! (new result vectors) and as `decode_into` (buffers reused, as a server decoding every round).
//!
//! `cargo run --release -p privfed-distributed --example bench_encode [-- REPEATS]`

use privfed_distributed::{
    ModularSum, NoiseTarget, PlanRequest, SkellamDecoder, SkellamEncoder, plan, rotation_seed,
};
use privfed_mechanisms::hadamard::fwht_normalized;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use privfed_mechanisms::skellam::Skellam;
use std::time::Instant;

fn time_ms(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn summary(name: &str, mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let med = v[v.len() / 2];
    println!("{name:<28} min {:8.2} ms   median {:8.2} ms", v[0], med);
    med
}

fn main() {
    let repeats: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let d = 1 << 20;
    let p = plan(&PlanRequest {
        dim: d,
        clip: 1.0,
        bits: 16,
        clients: 100,
        max_contributors: None,
        k: 4.0,
        beta: (-0.5f64).exp(),
        noise: NoiseTarget::LocalStddev(0.1),
        delta: None,
        sampling_rate: 1.0,
        rounds: 1,
        share: Default::default(),
        colluding_fraction: 0.0,
    })
    .expect("plan");
    println!(
        "d = 2^20, b = 16, n = 100, σ = 0.1, s = {:.1}, local Skellam μ = {:.0}",
        p.scale, p.local_mu
    );
    let seed = rotation_seed(b"bench", 0);
    let enc = SkellamEncoder::new(p.params, seed).expect("encoder");
    let dec = SkellamDecoder::new(p.params, seed).expect("decoder");
    let mut rng = seeded_rng_for_experiments(1);
    let x: Vec<f64> = (0..d).map(|i| ((i % 97) as f64 - 48.0) / 1e5).collect();
    let t = Instant::now();
    let sk = Skellam::new(p.local_mu).expect("skellam");
    println!(
        "Skellam::new (builds the Poisson table: {}) {:.3} ms",
        sk.uses_table(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let (mut fwht, mut noise, mut encode, mut decode) = (vec![], vec![], vec![], vec![]);
    let mut decode_floor = vec![];
    let mut decode_into = vec![];
    let (mut scratch, mut dsum, mut dmean) = (vec![0.0f64; d], vec![0.0f64; d], vec![0.0f64; d]);
    let inv_scale = 1.0 / p.scale;
    let mut buf = vec![0.0f64; d];
    let mut ints = vec![0i64; d];
    let mut out = vec![0u64; d];
    let mut sum = ModularSum::new(16, d).expect("sum");
    for _ in 0..repeats {
        buf.copy_from_slice(&x);
        fwht.push(time_ms(&mut || fwht_normalized(&mut buf).expect("fwht")));
        noise.push(time_ms(&mut || sk.fill(&mut ints, &mut rng)));
        encode.push(time_ms(&mut || {
            enc.encode_into(&x, &mut out, &mut rng).expect("encode");
        }));
        sum.add(&out).expect("add");
        decode.push(time_ms(&mut || {
            dec.decode(sum.value(), 1).expect("decode");
        }));
        decode_into.push(time_ms(&mut || {
            dec.decode_into(sum.value(), 1, &mut scratch, &mut dsum, &mut dmean)
                .expect("decode_into");
        }));
        decode_floor.push(time_ms(&mut || {
            for (b, &v) in buf.iter_mut().zip(sum.value()) {
                // Signed representative of v mod 2^16 (sign extension), then unscale.
                *b = (((v << 48) as i64) >> 48) as f64 * inv_scale;
            }
            fwht_normalized(&mut buf).expect("fwht");
        }));
    }
    let f = summary("FWHT (2^20)", fwht);
    let n = summary("Skellam noise (2^20)", noise);
    let e = summary("encode (clip..wrap)", encode);
    let d_med = summary("decode", decode);
    let di_med = summary("decode_into (own buffers)", decode_into);
    let d_floor = summary("decode floor", decode_floor);
    println!(
        "floor = FWHT + noise = {:.2} ms; encode / floor = {:.2}; decode / decode floor = {:.2}; \
         decode_into / decode floor = {:.2}",
        f + n,
        e / (f + n),
        d_med / d_floor,
        di_med / d_floor
    );
}
