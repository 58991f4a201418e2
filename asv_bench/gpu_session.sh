#!/usr/bin/env bash
# One device check of the GPU path, as run on a lent GPU machine (see asv_bench/README.md):
# environment report, the `gpu` tests, the DLPack hand-over from other frameworks, the command
# line on the GPU in two fresh processes (CUDA compile cache cold, then warm) and the quick GPU
# timings. Wheels the image lacks travel in .whl/ (pooch, platformdirs).
# Usage, from the repository root:  bash asv_bench/gpu_session.sh [OUTDIR]
set -u
out=${1:-${OUT:-/tmp/nyhopt-gpu}}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$out/device.txt"
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
