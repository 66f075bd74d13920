#!/bin/bash
# H200, eighth session: the dynamic tile scheduler (tile_scheduler =
# dynamic). Folders (carry build/dyn-sched.tar.xz):
#   build/kernels  the package's sm_90a set with the new default (masked
#                  forwards at D = Dv = 128 dynamic; D = 64 falls back to
#                  the grid kernel, the dynamic one spills);
#   build/dyn      kernels with the D = 64 masked forwards forced dynamic;
#   build/grid     kernels with every masked sm_90a forward at D = Dv on
#                  the grid (the previous default).
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[ -d build/kernels ] || tar -xJf build/dyn-sched.tar.xz -C build
for v in dyn grid; do
  [ -d build/$v ] || { cp -r build/kernels build/$v && cp build/$v-over/* build/$v/; }
done
for dir in build/kernels build/dyn build/grid; do
  $PY test/Tools/check-manifests.py "$dir" > /dev/null || { echo "invalid manifests in $dir"; exit 1; }
done
echo "manifests $(elapsed)"
acc() {  # acc DIR SMS
  FLASHMLIR_SMS=$2 FLASHMLIR_KERNEL_DIR=$PWD/build/$1 timeout 200 $PY -m pytest -q -p no:cacheprovider \
    python/tests/test_gpu_attention.py 2>&1 | tail -3 | tee "$OUT/acc-$1-sms$2.txt"
  echo "accuracy $1 SMS=$2 $(elapsed)"
}
acc kernels 5; acc kernels ""; acc dyn 5
FLASHMLIR_KERNEL_DIR=$PWD/build/kernels timeout 150 $PY -m pytest -q -p no:cacheprovider \
  python/tests/test_gpu_decode.py 2>&1 | tail -2
echo "decode $(elapsed)"
for d in 64 128; do for m in causal; do for tool in racecheck synccheck memcheck; do
  FLASHMLIR_SMS=2 FLASHMLIR_KERNEL_DIR=$PWD/build/dyn timeout 60 compute-sanitizer --tool $tool \
    $PY scripts/sanitize-one.py $d $m 2>&1 | grep -E "max err|SUMMARY|rror" | head -3 | sed "s/^/$tool d$d $m: /"
done; done; done
echo "sanitizers $(elapsed)"
ab() {  # ab A B
  timeout 240 $PY bench/bench_kernel_ab.py --direction fwd --rep 200 --a build/$1 --b build/$2 \
    --headdims 64 128 --seqlens 512 2048 4096 16384 --masks causal window=512,512 \
    --json "$OUT/ab-$1-vs-$2.json" 2>&1 | grep -E "B/A|rror" | sed 's/ {.*//' | head -24
  echo "ab $1 $2 done $(elapsed)"
}
ab grid dyn; ab dyn grid
