#!/bin/sh
# Every figure of EXPERIMENTS.md, as SVG and PNG, from the CSVs committed in experiments/, with
# `privfed plot` (no other tool). One command:
#   cargo build --release -p privfed && sh scripts/figures.sh [path/to/privfed]
# Each `fig NAME ...` writes experiments/NAME.svg and experiments/NAME.png from the same figure.
set -e
P=${1:-target/release/privfed}
E=experiments

fig() {
  name=$1
  shift
  "$P" plot "$@" --out "$E/$name.svg"
  "$P" plot "$@" --out "$E/$name.png"
}

# ---- Paper 004 ----
# Scalar DME (Fig. 2): variance of one report against the input, one panel per ε.
fig paper004_scalar $E/paper004_scalar.csv --x x --y empirical_variance --series mechanism \
  --panel epsilon --log-y --size 300x300 --x-label "input x" \
  --y-label "variance of one report" \
  --title "Scalar DME: empirical variance of n = 100,000 reports (paper 004 Fig. 2)"
# Vector DME (Fig. 3): MSE against ε, mean of the 10 trials with its 95% t-interval.
fig paper004_vector $E/paper004_vector.csv --x epsilon --y mse --average --errors bars \
  --series mechanism --panel data --log-y --size 360x320 --x-label "ε" \
  --y-label "squared error of the mean (sum over d)" \
  --title "Vector DME, d = 128, n = 10,000: MVU (3 bits a coordinate) against the baselines (95% intervals)"
# The designer against the paper's own: variance over that of unbiased gRR, one panel per bit
# width. The two 5-bit settings where the reference returned no valid design are left out.
fig paper004_designer $E/paper004_reference_designs.csv --x epsilon \
  --y privfed_over_grr,ref_over_grr --where ref_accepted_by_privfed=yes --panel bits --log-y \
  --size 280x300 --x-label "ε" --y-label "variance / variance of unbiased gRR" \
  --title "MVU designs: privfed's designer and paper 004's (trust-constr), relative to gRR"

# ---- Paper 003: Draw and Discard ----
# Theorem 1: intra-model variance over the updates stays at (k/2)σ² (95% normal bands).
fig ddml_variance_stabilization $E/ddml_variance_stabilization.csv --x step \
  --y measured_mean,predicted --se std_error --se-times 1.96 --panel k --size 280x260 \
  --x-label "updates" --y-label "intra-model variance" \
  --title "Variance stabilization: measured (1,000 runs, 95% band) and (k/2)σ²"
# MNIST, 5 passes, mean ± 1 s.e. of 3 runs.
fig ddml_mnist_k $E/ddml_mnist_k.csv --x k --y accuracy_mean --se accuracy_se --errors bars \
  --log-x --size 420x300 --x-label "k (instances)" --y-label "test accuracy after 5 passes" \
  --title "MNIST, no noise: accuracy against k (mean ± s.e. of 3 runs)"
fig ddml_mnist_k_curves $E/ddml_mnist_k_curves.csv --x pass --y accuracy_mean --se accuracy_se \
  --series config --size 420x320 --x-label "pass over the 60,000 training images" \
  --y-label "test accuracy" --title "MNIST, no noise: accuracy by pass and k (mean ± s.e., 3 runs)"
fig ddml_mnist_epsilon_curves $E/ddml_mnist_epsilon_curves.csv --x pass --y accuracy_mean \
  --se accuracy_se --series config --size 420x320 --x-label "pass over the 60,000 training images" \
  --y-label "test accuracy" --title "MNIST, k = 10: accuracy by pass and client ε (mean ± s.e., 3 runs)"
fig ddml_mnist_batching_curves $E/ddml_mnist_batching_curves.csv --x pass --y accuracy_mean \
  --se accuracy_se --series config --size 420x320 --x-label "pass over the 60,000 training images" \
  --y-label "test accuracy" \
  --title "MNIST: server-side batching (Ns) against Draw-and-Discard (k) (mean ± s.e., 3 runs)"
fig ddml_mnist_strategies_curves $E/ddml_mnist_strategies_curves.csv --x pass --y accuracy_mean \
  --se accuracy_se --series config --size 420x320 --x-label "pass over the 60,000 training images" \
  --y-label "test accuracy" --title "MNIST, k = 20: update strategies (mean ± s.e., 3 runs)"
# MNIST, 20 passes, single runs (no intervals).
for grid in k epsilon batching strategies; do
  fig ddml_mnist_${grid}_curves_20 $E/passes20/ddml_mnist_${grid}_curves.csv --x pass \
    --y accuracy --series config --size 420x320 --x-label "pass over the 60,000 training images" \
    --y-label "test accuracy" --title "MNIST, 20 passes ($grid grid; single runs)"
done

# ---- Paper 001 ----
# DME (paper 001 Fig. 4 layout): MSE against ε, one curve per mechanism and bit width, one panel per n.
fig paper001_dme_vs_epsilon $E/paper001_dme.csv --x epsilon_target --y mse_per_coord \
  --interval mse_per_coord_lo,mse_per_coord_hi --series mechanism,bits --dash-by mechanism \
  --panel clients,dim --log-y --size 460x360 --x-label "ε (δ = 1e-5)" \
  --y-label "MSE per coordinate" \
  --title "Distributed mean estimation: Skellam and DDG against the analytic Gaussian (95% bands, 50 trials)"
# The same against bit width at ε ∈ {1, 6}; the Gaussian has no bit width (horizontal line).
fig paper001_dme_vs_bits $E/paper001_dme.csv --x bits --y mse_per_coord \
  --interval mse_per_coord_lo,mse_per_coord_hi --errors bars --series mechanism \
  --panel clients,epsilon_target --where "epsilon_target=1|6" --log-y --size 300x300 \
  --x-label "bits b" --y-label "MSE per coordinate" \
  --title "Distributed mean estimation against bit width (d = 250; 95% intervals, 50 trials)"
# ε against noise under each accounting method (paper 001 Fig. 2).
fig paper001_epsilon_vs_noise $E/paper001_epsilon_vs_noise.csv --x sigma --y epsilon \
  --series method --panel scale,clients --log-x --log-y \
  --x-label "central noise σ (sensitivity 1)" --y-label "ε at δ = 1e-5 (one release)" \
  --title "ε against noise for a sensitivity-1 query, by accounting method"
# Ours against the authors' code (Skellam, n = 100), when their run's CSV is there.
if [ -f $E/paper001_dme_theirs.csv ]; then
  fig paper001_dme_side_by_side $E/paper001_dme_side_by_side.csv --x epsilon_target \
    --y mse_per_coord --interval mse_per_coord_lo,mse_per_coord_hi --series source,mechanism \
    --dash-by source --color-by source --panel bits --where clients=100 \
    --where mechanism=skellam --log-y \
    --size 300x300 --x-label "ε (δ = 1e-5)" --y-label "MSE per coordinate" \
    --title "privfed (50 trials) and the authors' TensorFlow code (10 trials), n = 100, d = 250"
fi

# ---- Federated learning (`privfed fl experiment NAME --out experiments/fl`) ----
# (paper000-logistic's figure is the one `fl experiment` draws: its ε = ∞ reference is a row of
# the same series, which `privfed plot` does not mix with points.)
# The reference runs (central Gaussian: no quantization) have bits = inf in the CSV; `privfed plot`
# draws a series whose only row has an empty x as a horizontal line, so inf becomes empty here.
flfig() {
  name=$1
  shift
  tmp=$(mktemp)
  sed 's/,inf,/,,/; s/^inf,/,/' "$E/fl/$name.csv" > "$tmp"
  "$P" plot "$tmp" "$@" --out "$E/fl/$name.svg"
  "$P" plot "$tmp" "$@" --out "$E/fl/$name.png"
  rm -f "$tmp"
}
if [ -f "$E/fl/paper001-mnist.csv" ]; then
  flfig paper001-mnist --x bits --y final_accuracy --series noise --average --x-label "bits b" \
    --y-label "test accuracy after 50 rounds" \
    --title "Paper 001, MNIST (LeNet-5, clip 0.1): ε = 6, mean of 5 seeds with 95% intervals"
fi
if [ -f "$E/fl/paper001-shakespeare.csv" ]; then
  flfig paper001-shakespeare --x bits --y final_accuracy --series noise --average --x-label "bits b" \
    --y-label "next-character accuracy after 30 rounds" \
    --title "Paper 001, Shakespeare by role (GRU): ε = 6 for a hypothetical 10^6 clients, mean of 3 seeds"
fi

# ---- Auditing ----
# How tight each guarantee is (docs/AUDIT.md): ε_lb / ε_claimed per row of
# `scripts/audit_table.sh N BIN experiments/audit_tightness.csv`, pure ε-DP and δ > 0 claims as
# two series (the lines only join the rows in table order).
fig audit_tightness $E/audit_tightness.csv --x index --y ratio --series kind --size 520x300 \
  --x-label "mechanism (row of the table in docs/AUDIT.md)" --y-label "ε_lb / ε_claimed" \
  --title "How tight each guarantee is: 99% lower bound over the claim (10⁶ samples per input)"
