// REQUIRES: ptxas
// fa-compile --kv-splits: the split-KV forward for decoding (fa-split-kv, a
// run-time split count): two launches in one PTX (the split kernel into the
// f32 partials, then the merge), the partials as workspace whose sizes name
// the launch device's SMS, the package's reader accepts the manifest, and
// ptxas assembles both kernels without spills.
// RUN: rm -rf %t && mkdir -p %t
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --kv-splits=auto -o %t > /dev/null
// RUN: fa-compile --head-dim=64 --dtype=f16 --causal --chip=sm_80 --kv-splits=4 -o %t > /dev/null
// RUN: FileCheck %s < %t/fa_fwd_d128_bf16_splitkv_sm90a.json
// RUN: FileCheck %s --check-prefix=FIXED < %t/fa_fwd_d64_f16_causal_splitkv4_sm80.json
// RUN: python3 %S/check-manifests.py %t
// RUN: FileCheck %s --check-prefix=ENTRIES < %t/fa_fwd_d128_bf16_splitkv_sm90a.ptx
// RUN: %ptxas -arch=sm_90a -v %t/fa_fwd_d128_bf16_splitkv_sm90a.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: not fa-compile --head-dim=64 --kv-splits=0 -o %t 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-compile --kind=backward --head-dim=64 --kv-splits=auto -o %t 2>&1 | FileCheck %s --check-prefix=BWD

// 64-row query blocks and 64-key blocks unless given.
// CHECK-DAG:  "block_kv": 64
// CHECK-DAG:  "block_q": 64
// CHECK:      "kernels": [
// CHECK:        "entry": "fa_fwd_kernel",
// S = max(min(2 * SMS / tiles, key blocks, 64), 1) chunks per query block.
// CHECK-NEXT:   "grid": [
// CHECK-NEXT:     "ceildiv(Nq, 64) * max(min(min(SMS * 2 // (B * Hq * ceildiv(Nq, 64)), ceildiv(Nk, 64)), 64), 1)",
// CHECK-NEXT:     "Hq",
// CHECK-NEXT:     "B"
// The SM count is a kernel parameter (it fixes S inside the kernel).
// CHECK:          "name": "size_{{[0-9]+}}",
// CHECK-NEXT:     "type": "i64",
// CHECK-NEXT:     "value": "SMS"
// CHECK:          "name": "out_partial",
// CHECK:        "entry": "fa_fwd_merge_kernel",
// CHECK-NEXT:   "grid": [
// CHECK-NEXT:     "Nq",
// CHECK-NEXT:     "Hq",
// CHECK-NEXT:     "B"
// CHECK:      "kv_splits": "auto"
// CHECK:      "workspace": [
// CHECK:          "B",
// CHECK-NEXT:     "Hq * max(min(min(SMS * 2 // (B * Hq * ceildiv(Nq, 64)), ceildiv(Nk, 64)), 64), 1)",
// CHECK-NEXT:     "Nq",
// CHECK-NEXT:     "128"
// CHECK:        "dtype": "f32",
// CHECK-NEXT:   "name": "out_partial"
// CHECK:        "name": "lse_partial"

// A fixed count: no SMS anywhere.
// FIXED-NOT:  SMS
// FIXED:      "Hq * 4"
// FIXED-NOT:  SMS
// FIXED:      "kv_splits": 4
// FIXED-NOT:  SMS

// Both kernels in one PTX, neither spilling.
// ENTRIES-DAG: .entry fa_fwd_kernel(
// ENTRIES-DAG: .entry fa_fwd_merge_kernel(
// PTXAS-COUNT-2: 0 bytes spill stores, 0 bytes spill loads

// BAD: fa-compile: --kv-splits must be none, auto or a number in [1, 1024], got '0'
// BWD: fa-compile: --kv-splits is a forward option
