#!/bin/bash
# The 16-core scaling run of docs/performance.md (round 2), as sent to the nvidia-h200 machine with the `run`
# tool from the repository root, carrying `.whl` (wheels for its Python 3.12 that its PyTorch environment
# lacks: click, rich and its requirements, packaging, isal, lz4, zstandard; fetched here with
# `pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl ...`).
# $OUT collects the results. It builds its wheels from the PyTorch installation there (no network), checks
# that -j 1 and -j 16 give the same audit, then runs benchmarks/scaling.py for 1, 2, 4, 8, 16 workers, and
# the same wheel with worker threads instead of processes (CUDASHIP_PROCESSES=never, the round-2 design),
# and the timeline of one real audit per -j in TIMELINE_JOBS (benchmarks/audit_timeline.py).
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
T0=$(date +%s)
python3 -m compileall -q src > /dev/null
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
SP=$(python3 -c "import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))")
echo "cpus $(nproc); python $(python3 -V); site $SP"; python3 -c "import isal; print('isal', isal.__version__)"
mkdir -p /tmp/w /tmp/d
W=/tmp/w/torch-1.0-py3-none-manylinux_2_28_x86_64.whl
[ -f $W ] || python3 benchmarks/scaling.py --make-wheel $SP/torch $W
[ -n "${SKIP_DIR:-}" ] || [ -f /tmp/d/jax-1.0-py3-none-any.whl ] || python3 benchmarks/scaling.py --make-wheels $SP /tmp/d numpy scipy pandas pyarrow cupy torchvision torchaudio onnxruntime cv2 sklearn llvmlite numba h5py matplotlib PIL grpc lxml tokenizers safetensors jax
echo "setup done after $(( $(date +%s) - T0 )) s"
python3 -m cudaship audit --offline -j 1 --no-progress --format json -o $OUT/audit-j1.json $W; python3 -m cudaship audit --offline -j 16 --no-progress --format json -o $OUT/audit-j16.json $W
cmp $OUT/audit-j1.json $OUT/audit-j16.json && echo "audit -j1 and -j16 reports identical"
echo "checks done after $(( $(date +%s) - T0 )) s"
DIRARG="--dir /tmp/d"; [ -n "${SKIP_DIR:-}" ] && DIRARG=""
timeout $(( 560 - ($(date +%s) - T0) )) python3 benchmarks/scaling.py --wheel $W $DIRARG --jobs ${JOBS:-1,2,4,8,16} --repeat ${REPEAT:-2} --json $OUT/scaling.json 2>&1 | tee $OUT/scaling.log
[ -n "${SKIP_PHASES:-}" ] || timeout $(( 570 - ($(date +%s) - T0) )) python3 benchmarks/audit_phases.py $W -j 16 --repeat 2 2>&1 | tee $OUT/phases.log
for j in ${TIMELINE_JOBS:-16}; do
  CUDASHIP_PROCESSES=always timeout $(( 575 - ($(date +%s) - T0) )) python3 benchmarks/audit_timeline.py -- --offline -j $j --no-progress --format json -o /tmp/t.json $W 2>&1 | sed "s/^/-j $j /" | tee -a $OUT/timeline.log
done
[ -n "${THREADS:-}" ] && CUDASHIP_PROCESSES=never timeout $(( 580 - ($(date +%s) - T0) )) python3 benchmarks/scaling.py --wheel $W --jobs 4,16 --repeat 2 --json $OUT/scaling-threads.json 2>&1 | tee $OUT/scaling-threads.log
echo "all done after $(( $(date +%s) - T0 )) s"
