//! The one privatization pass of the additive-noise randomizers ([`crate::laplace`],
//! [`crate::gaussian`]): `x + noise` drawn per block of coordinates from the streams of a fresh
//! key, so that a privatization can use several threads and its output does not depend on their
//! number (`docs/RANDOMNESS.md`).

use crate::domain::Domain;
use crate::error::Result;
use crate::rng::{NoiseRng, StreamKey, Threads, for_each_block};
use crate::sampling::block_of;
use crate::{CryptoRng, Rng, check_out_len};

/// `out ← x + noise` on `domain`: the lengths checked, then for every block `b` of `out` (on up
/// to `threads` threads) `add(stream, x_b, out_b)` writes `x_b + noise` with the noise from
/// `key.stream(b)` of a key freshly drawn from `rng`. `x` is validated from its norm, summed per
/// block in the same pass: nothing is returned before the domain accepts it.
pub(crate) fn privatize_additive<R, F>(
    domain: Domain,
    x: &[f64],
    out: &mut [f64],
    rng: &mut R,
    threads: Threads,
    add: F,
) -> Result<()>
where
    R: Rng + CryptoRng + ?Sized,
    F: Fn(&mut NoiseRng, &[f64], &mut [f64]) + Sync,
{
    check_out_len(out, domain.dim())?;
    domain.check_len(x)?;
    let key = StreamKey::draw(rng);
    let parts = for_each_block(&key, out, threads, |b, stream, chunk| {
        let xs = block_of(x, b, chunk.len());
        add(stream, xs, chunk);
        domain.norm_partial(xs)
    });
    domain.accept_norm(x, domain.norm_of_blocks(&parts))?;
    Ok(())
}
