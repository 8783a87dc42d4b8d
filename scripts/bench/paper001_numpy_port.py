#!/usr/bin/env python3
"""A NumPy port, written for privfed, of the client and server steps of paper 001's own pipeline
(google-research/federated `distributed_dp/`: `compression_query.CompressionSumQuery` around
`distributed_skellam_query.DistributedSkellamSumQuery`, with `modular_clipping_factory.
modular_clip_by_value` as in their `dme_utils.compute_dp_average`). It is NOT their code: each
function below follows one of their TensorFlow functions step by step, in the same order and with
the same arithmetic (float32 rotation, reshape-and-matmul Walsh-Hadamard, conditional stochastic
rounding by rejection, int32 record, two Poisson draws per coordinate, float modular clip), so
that its cost is what their steps cost outside TensorFlow. Used by
`scripts/bench/paper001_side_by_side.py`; the clip step is added (their query expects clipped
input; TFF clips before it).

Randomness comes from one `numpy.random.Generator` (their code seeds from `tf.timestamp()`).
"""
import numpy as np

DEFAULT_BETA = np.exp(-0.5)


def clip_by_l2_norm(x, clip):
    """Clip to l2 norm `clip` (their FL pipeline does this before the query)."""
    norm = np.linalg.norm(x)
    return x * np.float32(min(1.0, clip / max(norm, 1e-30)))


def pad_zeros(x):
    """compression_utils.pad_zeros: zero-pad to the next power of two."""
    dim = x.shape[0]
    pad_dim = 2 ** int(np.ceil(np.log2(dim)))
    return np.pad(x, (0, max(0, pad_dim - dim)))


def sample_rademacher(shape, dtype, rng):
    """compression_utils.sample_rademacher: sign(uniform - 0.5)."""
    return np.sign(rng.random(shape, dtype=np.float32) - 0.5).astype(dtype)


def fast_walsh_hadamard_transform(x):
    """compression_utils.fast_walsh_hadamard_transform for x of shape [a, dim] (dim = 2^k):
    log2(dim) steps of reshape to [-1, 2], matmul by [[1, 1], [1, -1]], reshape to
    [-1, dim/2, 2] and swap the last two axes; then divide by sqrt(dim)."""
    a, dim = x.shape
    log2 = int(np.ceil(np.log2(dim)))
    if dim == 1:
        return x.copy()
    h_core = np.array([[1.0, 1.0], [1.0, -1.0]], dtype=x.dtype)
    x = x.reshape(-1, 2, dim // 2)
    for _ in range(log2):
        x = x.reshape(-1, 2) @ h_core
        x = x.reshape(-1, dim // 2, 2)
        x = np.ascontiguousarray(np.transpose(x, (0, 2, 1)))
    x = x.reshape(-1, dim)
    return x / np.sqrt(np.asarray(dim, dtype=x.dtype))


def randomized_hadamard_transform(x, rng):
    """compression_utils.randomized_hadamard_transform (repeat = 1); returns the signs too
    (the server regenerates them from the shared seed)."""
    padded = pad_zeros(x)
    signs = sample_rademacher(padded.shape, padded.dtype, rng)
    return fast_walsh_hadamard_transform((signs * padded)[None, :])[0], signs


def inverse_randomized_hadamard_transform(x, original_dim, signs):
    """compression_utils.inverse_randomized_hadamard_transform (repeat = 1)."""
    unrotated = fast_walsh_hadamard_transform(x[None, :])[0]
    return (signs * unrotated)[:original_dim]


def post_rounding_l2_norm_bound(x, l2_norm_bound, beta):
    """compression_utils.stochastic_rounding.post_rounding_l2_norm_bound (Prop. 4.2)."""
    dim = np.float32(x.size)
    x_norm = np.float32(l2_norm_bound)
    bound1 = x_norm + np.sqrt(dim)
    squared_bound2 = np.square(x_norm) + 0.25 * dim
    squared_bound2 += np.sqrt(2.0 * np.log(1.0 / beta)) * (x_norm + 0.5 * np.sqrt(dim))
    return min(bound1, np.sqrt(squared_bound2))


def stochastic_rounding(x, conditional, l2_norm_bound, beta, rng):
    """compression_utils.stochastic_rounding: retry while the rounded norm exceeds the bound."""
    threshold = post_rounding_l2_norm_bound(x, l2_norm_bound, beta)
    floored = np.floor(x)
    decimal = x - floored
    while True:
        rounded = floored + (rng.random(x.shape, dtype=np.float32) < decimal).astype(x.dtype)
        if not (conditional and np.linalg.norm(rounded) > threshold):
            return rounded


def scaled_quantization(x, scale, l2_norm_bound, beta, rng):
    """compression_utils.scaled_quantization with stochastic, conditional rounding."""
    scale = np.float32(scale)
    return stochastic_rounding(x * scale, beta > 0, np.float32(l2_norm_bound) * scale, beta, rng)


def rounded_l2_norm_bound(l2_norm_bound, beta, dim):
    """accounting_utils.rounded_l2_norm_bound: the norm bound after (conditional) rounding."""
    bound_1 = l2_norm_bound + np.sqrt(dim)
    if beta == 0:
        return bound_1
    squared_bound_2 = np.square(l2_norm_bound) + 0.25 * dim
    squared_bound_2 += np.sqrt(2.0 * np.log(1.0 / beta)) * (l2_norm_bound + 0.5 * np.sqrt(dim))
    return min(bound_1, np.sqrt(squared_bound_2))


def rounded_l1_norm_bound(l2_norm_bound, dim):
    """accounting_utils.rounded_l1_norm_bound: L1 <= min(sqrt(d), L2) * L2 on integers."""
    return l2_norm_bound * min(np.sqrt(dim), l2_norm_bound)


def add_skellam_noise(record, local_stddev, rng):
    """DistributedSkellamSumQuery.add_noise_to_sample: two Poisson(σ²/2) draws per coordinate
    (int64), their difference added to the record."""
    lam = 0.5 * local_stddev * local_stddev
    poissons = rng.poisson(lam, size=record.shape + (2,))
    return record + (poissons[..., 0] - poissons[..., 1]).astype(record.dtype)


def modular_clip_by_value(v, lo, hi):
    """modular_clipping_factory.modular_clip_by_value."""
    width = hi - lo
    period = np.floor(v / width - lo / width).astype(v.dtype)
    return v - period * width


def client_encode(x, clip, scale, local_stddev, l1_bound, l2_bound, bits, beta, rng):
    """One client's record, as in their DME harness: clip, then CompressionSumQuery.
    preprocess_record (rotate, scale, round, cast to int32, inner query: norm checks, Skellam
    noise), then the client's modular clip."""
    x = clip_by_l2_norm(x.astype(np.float32), clip)
    rotated, signs = randomized_hadamard_transform(x, rng)
    quantized = scaled_quantization(rotated, scale, clip, beta, rng).astype(np.int32)
    # DistributedSkellamSumQuery.preprocess_record: the norm assertions, then the noise.
    assert np.abs(quantized).sum() <= l1_bound
    assert np.linalg.norm(quantized.astype(np.float32)) <= l2_bound
    noised = add_skellam_noise(quantized, local_stddev * scale, rng)
    return modular_clip_by_value(noised, -(2 ** (bits - 1)), 2 ** (bits - 1)), signs


def server_decode(agg, bits, scale, signs, original_dim):
    """Server: modular clip of the sum, then CompressionSumQuery._decode_agg_record (float32,
    unscale, inverse rotation, unpad)."""
    agg = modular_clip_by_value(agg, -(2 ** (bits - 1)), 2 ** (bits - 1))
    deq = agg.astype(np.float32) / np.float32(scale)
    return inverse_randomized_hadamard_transform(deq, original_dim, signs)
