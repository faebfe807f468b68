#!/bin/bash
# Packs build/trials/'s eight programs (steps 11 and 12, -m -tl -rw -dt) into build/trials-pack.tar.xz.
set -e
cd "$(dirname "$0")/../../.."
rm -rf /tmp/qp && mkdir -p /tmp/qp/gpu-pack/bin
for v in m tl rw dt; do cp build/trials/step11_persistent-$v build/trials/step12_fp8_cache-$v /tmp/qp/gpu-pack/bin/; done
strip /tmp/qp/gpu-pack/bin/*
tar -C /tmp/qp -cf - gpu-pack | xz -T2 --lzma2=preset=6,dict=512MiB > build/trials-pack.tar.xz
ls -la build/trials-pack.tar.xz
