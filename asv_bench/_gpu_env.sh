# Sourced by the GPU session scripts: OUTDIR ($1, else $OUT), wheels the image lacks (.whl/),
# the repository on PYTHONPATH, and the card's name in $out/device.txt.
out=${1:-${OUT:-/tmp/nyhopt-gpu}}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi -L | tee "$out/device.txt"
