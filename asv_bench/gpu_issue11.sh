#!/usr/bin/env bash
# The device check of issue #11 in one call of at most ~9.5 minutes (the device tool allows 10 per
# command and 15 per session): the `gpu` tests, the HIGGS-size passes (today's cuBLAS path, fused
# products, kernel held in float16), the exact-objective case beside GPyTorch, the first call of
# a fresh process with a cold and a warm CUDA compile cache, and as many HIGGS tuning steps per
# route as the rest of the time allows (projected to 20). Outputs go to OUTDIR (default $OUT).
# Usage, from the repository root:  bash asv_bench/gpu_issue11.sh [OUTDIR]
set -u
source "$(dirname "$0")/_gpu_env.sh" "$@"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider --timeout=100 -rfE 2>&1 | tail -40 | tee "$out/gpu_tests.txt"
export CUPY_CACHE_DIR=/tmp/nyhopt-cupy-cache-first-call
rm -rf "$CUPY_CACHE_DIR"
for pass in cold warm; do
  t0=$(date +%s.%N)
  timeout 60 python3 -m nyhopt demo --device gpu --epochs 5 --quiet >/dev/null 2>&1
  echo "first call in a fresh process (demo --device gpu, 5 epochs), $pass compile cache: $(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0") s wall" | tee -a "$out/first_call.txt"
done
unset CUPY_CACHE_DIR
timeout 100 python3 asv_bench/gpu_report.py fused 2>&1 | tee "$out/fused.txt"
timeout 60 python3 asv_bench/gpu_report.py exact28 2>&1 | tee "$out/exact28.txt"
timeout 180 python3 asv_bench/gpu_report.py higgs 20 2>&1 | tee "$out/higgs.txt"
