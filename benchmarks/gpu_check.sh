#!/usr/bin/env bash
# The whole GPU check in one command, under 5 minutes, its results in one folder:
#
#     bash benchmarks/gpu_check.sh OUT_DIR
#
#   1 the GPU tests: the decode step's graph, its kernels and the readable CuPy path against NumPy
#     (tests/test_decode_gpu.py), and every other test that runs on CuPy (-k "gpu or cupy")
#   2 benchmarks/bench_decode_gpu.py --quick: micro-costs, the teacher-forced comparison over 64 steps,
#     decode tok/s for the readable path, the eager kernels and the CUDA graph, HF eager and HF
#     static-compiled in the same process (decode_gpu.json, decode_gpu.md)
# A machine without the package's pure-Python needs gets them from wheels in .whl/ (pip download there first).
set -o pipefail
OUT=${1:-gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if [ -d .whl ]; then $PY -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -2; fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; uname -r;
  $PY -c "import cupy, sys; print('cupy', cupy.__version__, 'python', sys.version.split()[0])"; } | tee "$OUT/env.txt"
PYTHONUNBUFFERED=1 timeout 150 $PY -m pytest -q -p no:cacheprovider -x tests/test_decode_gpu.py 2>&1 | tee "$OUT/tests_decode.txt"
PYTHONUNBUFFERED=1 timeout 60 $PY -m pytest -q -p no:cacheprovider -k "gpu or cupy" tests/test_llama.py tests/test_bert.py \
    tests/test_counting.py tests/test_wordpiece.py tests/test_backend.py 2>&1 | tail -15 | tee "$OUT/tests_cupy.txt"
PYTHONUNBUFFERED=1 timeout 300 $PY benchmarks/bench_decode_gpu.py --quick --out "$OUT" 2>&1 | tee "$OUT/bench.txt"
