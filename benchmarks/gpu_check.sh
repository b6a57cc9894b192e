#!/usr/bin/env bash
# The whole GPU check in one command, its results in one folder (at most 7 files):
#
#     bash benchmarks/gpu_check.sh OUT_DIR [SECONDS]        # SECONDS: the whole run's budget (default 540)
#     ONLY=bench_decode_gpu,test_decode_gpu bash benchmarks/gpu_check.sh OUT_DIR 240   # some parts only
#
#   1 benchmarks/bench_gpu.py at n = 8192 only, 5 repeats (n8192/gpu.json, n8192/gpu.md): the attention
#     kernels and every backward kernel ("simt", "mma", "mma_tf32") against torch, with their errors;
#     first, as it is short and its kernels' compilation is cached for the parts after it
#   2 benchmarks/bench_decode_gpu.py --quick: micro-costs, the teacher-forced comparison over 64 steps,
#     decode tok/s for the readable path, the eager kernels and the CUDA graph, each kernel's time,
#     HF eager and HF static-compiled in the same process (decode_gpu.json, decode_gpu.md)
#   3 the decode step's GPU tests (tests/test_decode_gpu.py)
#   4 the attention kernels' GPU tests (tests/test_flash_cuda.py -k gpu): forward and backward against
#     the float64 references, on the device
#   5 benchmarks/bench_gpu.py's whole attention part again (n = 1k … 32k), the SmolLM2 part taken from
#     the published gpu.json (gpu.json, gpu.md)
#   6 every other test that runs on CuPy (-k "gpu or cupy"): without the model wheels they skip
# Each part has its own time limit inside the budget, so a part that hangs cannot take the next one's
# time; everything printed goes to OUT_DIR/log.txt. A machine without the package's pure-Python needs gets
# them from wheels in .whl/ (`pip download` them there first).
set -o pipefail
OUT=${1:-gpu-check}
BUDGET=${2:-540}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LOG="$OUT/log.txt"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

part() {  # part NAME SECONDS COMMAND...: runs COMMAND for at most SECONDS, and never past the budget
  local name=$1 limit=$2; shift 2
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then return; fi
  local left=$((BUDGET - SECONDS - 5))
  if [ "$left" -lt 20 ]; then echo "=== $name: skipped, ${left}s of the budget left" | tee -a "$LOG"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name (at ${SECONDS}s, limit ${limit}s): $*" | tee -a "$LOG"
  timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
  echo "=== $name: exit ${PIPESTATUS[0]} at ${SECONDS}s" | tee -a "$LOG"
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; uname -r; nproc
  $PY -c "import cupy, numpy, torch, sys; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__, 'python', sys.version.split()[0])"
} 2>&1 | tee -a "$LOG"
part bench_gpu_8192 120 $PY benchmarks/bench_gpu.py --ns 8192 --repeats 5 --skip-model --out "$OUT/n8192"
part bench_decode_gpu 270 $PY benchmarks/bench_decode_gpu.py --quick --out "$OUT"
part test_decode_gpu 90 $PY -m pytest -q -p no:cacheprovider tests/test_decode_gpu.py
part test_flash_gpu 150 $PY -m pytest -q -p no:cacheprovider -k gpu tests/test_flash_cuda.py
part bench_gpu_attention 150 $PY benchmarks/bench_gpu.py --model-from benchmarks/results/gpu.json --out "$OUT"
part tests_cupy 60 $PY -m pytest -q -p no:cacheprovider -rs -k "gpu or cupy" tests/test_llama.py tests/test_bert.py \
    tests/test_counting.py tests/test_wordpiece.py tests/test_backend.py
echo "=== done at ${SECONDS}s" | tee -a "$LOG"
