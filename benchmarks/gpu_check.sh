#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one call (a lent GPU machine, or any machine with one):
#   bash benchmarks/gpu_check.sh            # logs under $OUT, else ./gpu_out
# 1. what the machine has (GPU, driver, the versions of torch, numpy, numba);
# 2. the CUDA tests (skipped on machines without a GPU): the device's numbers equal numpy's on any
#    shape and convention, in both device paths, TopkMetrics and a Lightning Trainer on the GPU;
# 3. benchmarks/matrix_bench.py on the device: 20,000 and 60,000 users x 50,000 items against
#    torch.topk + gather and torchmetrics, and its profile against one read of the matrix;
#    benchmarks/accumulator_bench.py (MatrixEvaluator fed batches on the device).
# No step stops the next; each is bounded in time. Figures: docs/guide/performance.md.
set -u -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 TOPKEVAL_JIT=1
PY=${PYTHON:-python3}
step() { echo; echo "=== $1"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$OUT/machine.txt"
$PY -c "import sys, torch, numpy, numba, pandas, pyarrow, scipy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available(), 'numpy', numpy.__version__, 'numba', numba.__version__, 'pandas', pandas.__version__, 'pyarrow', pyarrow.__version__, 'scipy', scipy.__version__)" 2>&1 | tee -a "$OUT/machine.txt"

step "CUDA tests"
timeout "${TEST_SECONDS:-150}" $PY -m pytest -q -p no:cacheprovider -rs -n 12 -k "cuda or gpu" \
    tests/test_matrix.py tests/test_accumulator.py tests/test_lightning.py 2>&1 | tee "$OUT/tests.log"

step "matrix_bench, 20,000 x 50,000"
timeout 75 $PY benchmarks/matrix_bench.py --device cuda --repeat 3 2>&1 | tee "$OUT/bench.log"
step "matrix_bench, 60,000 x 50,000"
timeout 100 $PY benchmarks/matrix_bench.py --device cuda --users 60000 --repeat 3 --tm-users 200 2>&1 | tee -a "$OUT/bench.log"
step "matrix_bench --profile, 60,000 x 50,000"
timeout 60 $PY benchmarks/matrix_bench.py --device cuda --users 60000 --profile 2>&1 | tail -8 | tee -a "$OUT/bench.log"
step "accumulator_bench"
timeout 45 $PY benchmarks/accumulator_bench.py --device cuda 2>&1 | tee -a "$OUT/bench.log"
