#!/bin/sh
# Paper 001's figures (SVG) from the CSVs in experiments/, with `privfed plot`.
#   cargo build --release -p privfed && sh scripts/paper001_plots.sh [path/to/privfed]
set -e
P=${1:-target/release/privfed}
E=experiments
# DME (paper 001 Fig. 4 layout): MSE against ε, one curve per mechanism and bit width, one panel per n.
$P plot $E/paper001_dme.csv --x epsilon_target --y mse_per_coord \
  --interval mse_per_coord_lo,mse_per_coord_hi --series mechanism,bits --dash-by mechanism \
  --panel clients,dim --log-y --size 460x360 --x-label "ε (δ = 1e-5)" \
  --y-label "MSE per coordinate" \
  --title "Distributed mean estimation: Skellam and DDG against the analytic Gaussian (95% bands, 50 trials)" \
  --out $E/paper001_dme_vs_epsilon.svg
# The same against bit width at ε ∈ {1, 3, 6}; the Gaussian has no bit width (horizontal line).
$P plot $E/paper001_dme.csv --x bits --y mse_per_coord \
  --interval mse_per_coord_lo,mse_per_coord_hi --errors bars --series mechanism \
  --panel clients,epsilon_target --where "epsilon_target=1|6" --log-y --size 300x300 \
  --x-label "bits b" --y-label "MSE per coordinate" \
  --title "Distributed mean estimation against bit width (d = 250; 95% intervals, 50 trials)" \
  --out $E/paper001_dme_vs_bits.svg
# ε against noise under each accounting method (paper 001 Fig. 2).
$P plot $E/paper001_epsilon_vs_noise.csv --x sigma --y epsilon --series method \
  --panel scale,clients --log-x --log-y --x-label "central noise σ (sensitivity 1)" \
  --y-label "ε at δ = 1e-5 (one release)" \
  --title "ε against noise for a sensitivity-1 query, by accounting method" \
  --out $E/paper001_epsilon_vs_noise.svg
# Ours against the authors' code (Skellam, n = 100), when their run's CSV is there.
if [ -f $E/paper001_dme_theirs.csv ]; then
  $P plot $E/paper001_dme_side_by_side.csv --x epsilon_target --y mse_per_coord \
    --interval mse_per_coord_lo,mse_per_coord_hi --series source,mechanism \
    --dash-by source --color-by source --panel bits --where clients=100 \
    --where mechanism=skellam --log-y \
    --size 300x300 --x-label "ε (δ = 1e-5)" --y-label "MSE per coordinate" \
    --title "privfed (50 trials) and the authors' TensorFlow code (10 trials), n = 100, d = 250" \
    --out $E/paper001_dme_side_by_side.svg
fi
