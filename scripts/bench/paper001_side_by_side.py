#!/usr/bin/env python3
"""Paper 001 side by side (BENCHMARKS.md): client encode and server decode at d = 2^20, one run,
single thread each:

1. privfed: `target/release/examples/bench_encode` (clip, scale, rotate, conditional rounding,
   Skellam, wrap; decode; the floors);
2. the authors' own TensorFlow code, unmodified, when `--federated DIR` points at a checkout of
   google-research/federated and TensorFlow + tensorflow_privacy import (eager, as their DME
   harness calls it, and inside `tf.function`, as TFF would run it);
3. `paper001_numpy_port.py`, a NumPy port of the same steps written for privfed.

Setting (as bench_encode): b = 16, n = 100, c = 1, local σ = 0.1, k = 4, β = e^{-1/2}; the scale s
is the one privfed's planner chose (read from bench_encode's output) and is given to all three.

    cargo build --release -p privfed-distributed --example bench_encode
    OMP_NUM_THREADS=1 python scripts/bench/paper001_side_by_side.py [--federated /path/to/federated]
"""
import argparse, os, re, statistics, subprocess, sys, time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paper001_numpy_port as port

p = argparse.ArgumentParser()
p.add_argument("--bin", default="target/release/examples/bench_encode")
p.add_argument("--repeats", type=int, default=7)
p.add_argument("--federated", default=None, help="checkout of google-research/federated")
a = p.parse_args()

D, BITS, N, CLIP, SIGMA, BETA = 1 << 20, 16, 100, 1.0, 0.1, float(np.exp(-0.5))


def median_ms(f, repeats):
    f()  # warm-up (tf.function traces here)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return min(times), statistics.median(times)


rows = []
print(f"uptime: {os.popen('uptime').read().strip()}", file=sys.stderr)

# 1. privfed.
out = subprocess.run([a.bin, str(a.repeats)], capture_output=True, text=True, check=True).stdout
print(out, file=sys.stderr)
scale = float(re.search(r"s = ([0-9.]+)", out).group(1))
for name, key in [("privfed encode", "encode"), ("privfed decode", "decode"),
                  ("privfed decode_into (buffers reused)", "decode_into (own buffers)"),
                  ("privfed encode floor (FWHT + noise)", None), ("privfed decode floor", "decode floor")]:
    if key is None:
        fl = float(re.search(r"floor = FWHT \+ noise = ([0-9.]+) ms", out).group(1))
        rows.append((name, None, fl))
        continue
    m = re.search(rf"^{re.escape(key)}\s.*?min\s+([0-9.]+) ms\s+median\s+([0-9.]+) ms", out, re.M)
    rows.append((name, float(m.group(1)), float(m.group(2))))

x = (((np.arange(D) % 97) - 48.0) / 1e5).astype(np.float32)
l2_bound = port.rounded_l2_norm_bound((CLIP + 1e-5) * scale, BETA, D)
l1_bound = port.rounded_l1_norm_bound(l2_bound, D)

# 2. The authors' TensorFlow code, unmodified.
if a.federated:
    try:
        sys.path.insert(0, a.federated)
        from unittest import mock
        # modular_clipping_factory imports tensorflow_federated only for its aggregator classes;
        # modular_clip_by_value itself is plain TensorFlow. TFF does not install beside a current
        # TensorFlow, so the import is satisfied by a stand-in module.
        sys.modules.setdefault("tensorflow_federated", mock.MagicMock())
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        from distributed_dp import ddpquery_utils
        from distributed_dp.modular_clipping_factory import modular_clip_by_value

        template = tf.zeros([D], tf.float32)
        query = ddpquery_utils.build_ddp_query("dskellam", SIGMA, l2_norm_bound=CLIP, beta=BETA,
                                               padded_dim=D, scale=scale, client_template=template)
        gs = query.initial_global_state()
        params = query.derive_sample_params(gs)
        lo, hi = -(2 ** (BITS - 1)), 2 ** (BITS - 1)
        xt = tf.constant(x)

        def encode_eager():
            rec = tf.clip_by_norm(xt, CLIP)
            rec = query.preprocess_record(params, rec)
            return modular_clip_by_value(rec, lo, hi)

        encode_graph = tf.function(encode_eager)
        state = query.accumulate_preprocessed_record(query.initial_sample_state(template),
                                                     encode_eager())

        def decode_eager():
            s = modular_clip_by_value(state, lo, hi)
            return query.get_noised_result(s, gs)[0]

        decode_graph = tf.function(decode_eager)
        for name, f in [("TF (theirs) encode, eager", encode_eager),
                        ("TF (theirs) encode, tf.function", encode_graph),
                        ("TF (theirs) decode, eager", decode_eager),
                        ("TF (theirs) decode, tf.function", decode_graph)]:
            mn, med = median_ms(lambda: f().numpy(), a.repeats)
            rows.append((name, mn, med))
        print(f"TensorFlow {tf.__version__}", file=sys.stderr)
    except Exception as e:  # report and carry on with the port
        print(f"their TensorFlow code did not run: {type(e).__name__}: {e}", file=sys.stderr)

# 3. The NumPy port.
rng = np.random.default_rng(1)
holder = {}


def np_encode():
    holder["rec"], holder["signs"] = port.client_encode(x, CLIP, scale, SIGMA, l1_bound, l2_bound,
                                                        BITS, BETA, rng)


np_encode()
mn, med = median_ms(np_encode, a.repeats)
rows.append(("NumPy port encode", mn, med))
agg = holder["rec"].astype(np.int64)
mn, med = median_ms(lambda: port.server_decode(agg, BITS, scale, holder["signs"], D), a.repeats)
rows.append(("NumPy port decode", mn, med))

print(f"uptime: {os.popen('uptime').read().strip()}", file=sys.stderr)
print(f"d = 2^20, b = {BITS}, n = {N}, c = {CLIP}, local sigma = {SIGMA}, s = {scale}")
print("| step | min ms | median ms |")
print("|---|---|---|")
for name, mn, med in rows:
    print(f"| {name} | {'' if mn is None else f'{mn:.1f}'} | {med:.1f} |")
med = {name: m for name, _, m in rows}
for ours, prefix in [("privfed encode", "encode"), ("privfed decode", "decode"),
                     ("privfed decode_into (buffers reused)", "decode")]:
    for name, m in med.items():
        if not name.startswith("privfed") and prefix in name:
            print(f"{name} / {ours}: {m / med[ours]:.1f}x")
