#!/bin/bash
# H200, end of the eighth session: the default set built from main's last
# kernel-affecting commit (the persistent Dv != D forwards, the dynamic
# scheduler, the tiling refactor), the GPU test suites. Carry
# build/kernels-final.tar.xz.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels-final ] || tar -xJf build/kernels-final.tar.xz -C build
$PY test/Tools/check-manifests.py build/kernels-final | tail -1
export FLASHMLIR_KERNEL_DIR=$PWD/build/kernels-final FLASHMLIR_REQUIRE_KERNELS=1
for t in test_gpu_attention test_gpu_head_dims test_gpu_decode test_gpu_backward \
    test_gpu_launch test_gpu_tensormap; do
  timeout 150 $PY -m pytest -q -p no:cacheprovider python/tests/$t.py 2>&1 | tail -1
  echo "$t $(elapsed)"
done
