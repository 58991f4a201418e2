#!/usr/bin/env bash
# One device check of the GPU path, as run on a lent GPU machine (see asv_bench/README.md):
# environment report, the `gpu` tests, the DLPack hand-over from other frameworks, the command
# line on the GPU in two fresh processes (CUDA compile cache cold, then warm) and the quick GPU
# timings. Wheels the image lacks travel in .whl/ (pooch, platformdirs).
# Usage, from the repository root:  bash asv_bench/gpu_session.sh [OUTDIR]
set -u
source "$(dirname "$0")/_gpu_env.sh" "$@"
python3 -m nyhopt info 2>&1 | tee -a "$out/device.txt"
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -p no:randomly --timeout=120 -rfE 2>&1 | tail -60 | tee "$out/gpu_tests.txt"
timeout 60 python3 asv_bench/gpu_interop.py 2>&1 | tee "$out/interop.txt"
export CUPY_CACHE_DIR=/tmp/nyhopt-cupy-cache-demo
rm -rf "$CUPY_CACHE_DIR"
for pass in cold warm; do
  t0=$(date +%s.%N)
  timeout 60 python3 -m nyhopt demo --device gpu --epochs 20 --quiet 2>&1 | tail -3 | tee -a "$out/cli.txt"
  echo "demo --device gpu, $pass compile cache: $(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$t0") s wall" | tee -a "$out/cli.txt"
done
unset CUPY_CACHE_DIR
timeout 90 python3 asv_bench/gpu_report.py quick 2>&1 | tee "$out/report.txt"
