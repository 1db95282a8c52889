#!/usr/bin/env bash
# Rebuild examples/libvecadd.so, the library the README inspects:
#   SASS for sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a, PTX for compute_120, the CUDA runtime linked dynamically.
# Needs nvcc (CUDA 13.x). Usage: bash examples/build_example.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nvcc -O2 -shared -Xcompiler -fPIC -cudart shared \
  -gencode arch=compute_75,code=sm_75 \
  -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_86,code=sm_86 \
  -gencode arch=compute_89,code=sm_89 \
  -gencode arch=compute_90a,code=sm_90a \
  -gencode arch=compute_120a,code=sm_120a \
  -gencode arch=compute_120,code=compute_120 \
  -o "$here/libvecadd.so" "$here/vecadd.cu"
strip --strip-unneeded "$here/libvecadd.so"
ls -l "$here/libvecadd.so"
