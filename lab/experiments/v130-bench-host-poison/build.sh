#!/bin/bash
# Builds fill_check against build/cuda's common library (run from the repository root after
# `ninja -C build/cuda pagedattn_common`): build/diag/fill_check.
set -eu
mkdir -p build/diag
nvcc -std=c++20 -O2 -I. -o build/diag/fill_check lab/experiments/v130-bench-host-poison/fill_check.cpp \
  build/cuda/common/libpagedattn_common.a -cudart static -ldl -lpthread -lrt
