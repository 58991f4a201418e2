#!/usr/bin/env bash
# The device check of the GPU Gram route in one call of under 9 minutes (the device tool allows 10
# per command): the first call of a fresh process with an empty and a warm CUDA compile cache,
# with every compilation logged, the pieces (kernel-block passes, the Gram matrix on tensor cores against float64 with a sweep
# of its block length), the HIGGS tuning run with default settings checked against the
# float64-Gram route at the same parameters and on held-out rows, the exact case beside GPyTorch
# and its pieces,
# and the `gpu` tests, then, in the time left of 560 s, `tune(time_budget=...)` on 10^6 rows of the
# HIGGS generator (its test error beside the 20-step run's). Every stage has its own time limit
# and writes to OUTDIR (default $OUT); a stage that fails or runs out of time leaves the others running.
# Usage, from the repository root:  bash asv_bench/gpu_higgs.sh [OUTDIR] [--tiny]
#   --tiny: toy sizes (checks the script itself; without a GPU the GPU-only stages say so).
set -u
script_start=$(date +%s)
tiny=""
for a in "$@"; do [ "$a" = "--tiny" ] && tiny="--tiny"; done
set -- $(for a in "$@"; do [ "$a" != "--tiny" ] && echo "$a"; done)
source "$(dirname "$0")/_gpu_env.sh" "$@"
export OUT="$out"
stage() {  # stage NAME SECONDS COMMAND...: run with a time limit, output to $out/NAME.txt
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  echo "stage $name: rc=$rc, $(( $(date +%s) - t0 )) s (limit $limit s)" | tee -a "$out/stages.txt"
  tail -n 30 "$out/$name.txt"
}
if [ -z "$tiny" ]; then
  export CUPY_CACHE_DIR=/tmp/nyhopt-cupy-cache-first-call
  rm -rf "$CUPY_CACHE_DIR"
  for pass in cold warm; do
    t0=$(date +%s.%N)
    if [ $pass = cold ]; then  # the cold run logs every compilation (asv_bench/gpu_profile.py)
      timeout 40 python3 asv_bench/gpu_profile.py first-call > "$out/first_call_compiles.txt" 2>&1
    else
      timeout 20 python3 -m nyhopt demo --device gpu --epochs 5 --quiet >/dev/null 2>&1
    fi
    rc=$?
    echo "first call in a fresh process (demo --device gpu, 5 epochs), $pass compile cache: rc=$rc $(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0") s wall (target <= 8 s cold)" | tee -a "$out/first_call.txt"
  done
  unset CUPY_CACHE_DIR
fi
stage blocks 45 python3 asv_bench/gpu_report.py blocks $tiny
stage gram 75 python3 asv_bench/gpu_report.py gram $tiny
# The HIGGS run on the int8 tensor-core Gram route (NYHOPT_GRAM_ROUTE=float64 for the float64 one).
export NYHOPT_GRAM_ROUTE=${NYHOPT_GRAM_ROUTE:-int8}
stage higgs 175 python3 asv_bench/gpu_report.py higgs 75 $tiny
unset NYHOPT_GRAM_ROUTE
if [ -z "$tiny" ]; then
  stage exact28 45 python3 asv_bench/gpu_report.py exact28
  stage exact_pieces 40 python3 asv_bench/gpu_profile.py exact
  stage gpu_tests 130 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:randomly -rfE --timeout=100
fi
# The time budget on the card: whatever is left of 560 s, less 40 s for the data, the setup and the predictions.
left=$(( 560 - ($(date +%s) - script_start) ))
if [ -n "$tiny" ]; then
  stage budget 60 python3 asv_bench/gpu_report.py budget 15 --tiny
elif [ "$left" -ge 100 ]; then
  stage budget "$left" python3 asv_bench/gpu_report.py budget $(( left - 40 ))
else
  echo "stage budget: skipped, ${left} s left of 560" | tee -a "$out/stages.txt"
fi
