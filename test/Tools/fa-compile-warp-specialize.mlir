// REQUIRES: ptxas
// The warp-specialized wgmma forward (docs/HOPPER.md; the sm_90a default at
// D = 128, also asked for by --warp-specialize). The manifest describes the two
// tensor maps the runtime encodes (read back from the host IR's
// fagpu.host_tensor_map ops), the block has the producer's 128 threads
// more, the package's reader accepts it and ptxas assembles it without
// spills.

// RUN: rm -rf %t && mkdir -p %t
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --warp-specialize --tile-scheduler=grid -o %t > /dev/null
// RUN: FileCheck %s < %t/fa_fwd_d128_bf16_sm90a.json
// RUN: python3 %S/check-manifests.py %t
// RUN: %ptxas -arch=sm_90a -v %t/fa_fwd_d128_bf16_sm90a.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=PTX < %t/fa_fwd_d128_bf16_sm90a.ptx
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --tile-scheduler=grid -o %t/default > /dev/null
// RUN: cmp %t/fa_fwd_d128_bf16_sm90a.ptx %t/default/fa_fwd_d128_bf16_sm90a.ptx
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a -o %t/full > /dev/null
// RUN: FileCheck %s --check-prefix=FULL < %t/full/fa_fwd_d128_bf16_sm90a.json
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --schedule=cooperative -o %t/coop > /dev/null
// RUN: FileCheck %s --check-prefix=COOP < %t/coop/fa_fwd_d128_bf16_sm90a.json
// RUN: not fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --schedule=pingpong -o %t/bad 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --causal --tile-scheduler=persistent -o %t/persist > /dev/null
// RUN: FileCheck %s --check-prefix=PERSIST < %t/persist/fa_fwd_d128_bf16_causal_sm90a.json
// RUN: python3 %S/check-manifests.py %t/persist
// RUN: FileCheck %s --check-prefix=PERSIST-PTX < %t/persist/fa_fwd_d128_bf16_causal_sm90a.ptx
// RUN: not fa-compile --head-dim=96 --dtype=bf16 --chip=sm_90a --tile-scheduler=persistent -o %t/bad 2>&1 | FileCheck %s --check-prefix=PERSIST-D96
// RUN: fa-compile --head-dim=128 --dtype=bf16 --chip=sm_90a --causal -o %t/dynamic > /dev/null
// RUN: FileCheck %s --check-prefix=DYNAMIC < %t/dynamic/fa_fwd_d128_bf16_causal_sm90a.json
// RUN: python3 %S/check-manifests.py %t/dynamic
// RUN: %ptxas -arch=sm_90a -v %t/dynamic/fa_fwd_d128_bf16_causal_sm90a.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=DYNAMIC-PTX < %t/dynamic/fa_fwd_d128_bf16_causal_sm90a.ptx
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_90a -o %t/d64 > /dev/null
// RUN: FileCheck %s --check-prefix=D64 < %t/d64/fa_fwd_d64_bf16_sm90a.json
// RUN: %ptxas -arch=sm_90a -v %t/d64/fa_fwd_d64_bf16_sm90a.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// The warp-specialized backward: its dQ warp's tensor map of the dq_accum
// workspace buffer is a manifest parameter the runtime encodes.
// RUN: fa-compile --kind=backward --head-dim=128 --dtype=bf16 --chip=sm_90a --causal --schedule=warp_specialized -o %t/bwd > /dev/null
// RUN: FileCheck %s --check-prefix=BWD < %t/bwd/fa_bwd_d128_bf16_causal_sm90a.json
// RUN: python3 %S/check-manifests.py %t/bwd
// RUN: %ptxas -arch=sm_90a -v %t/bwd/fa_bwd_d128_bf16_causal_sm90a.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s --check-prefix=BWD-PTX < %t/bwd/fa_bwd_d128_bf16_causal_sm90a.ptx

// CHECK:      "block": [
// CHECK-NEXT:   384,
// CHECK:        "box": [
// CHECK-NEXT:     1,
// CHECK-NEXT:     1,
// CHECK-NEXT:     128,
// CHECK-NEXT:     64
// CHECK-NEXT:   ],
// CHECK-NEXT:   "dtype": "bf16",
// CHECK-NEXT:   "l2_promotion": "128B",
// CHECK-NEXT:   "name": "k_map",
// CHECK-NEXT:   "oob_fill": "zero",
// CHECK-NEXT:   "swizzle": "128B",
// CHECK-NEXT:   "tensor": "k",
// CHECK-NEXT:   "type": "tensormap"
// CHECK:        "name": "v_map",
// CHECK:        "tensor": "v",
// CHECK-NEXT:   "type": "tensormap"
// CHECK:      "schedule": "warp_specialized",

// PTXAS: 0 bytes spill stores, 0 bytes spill loads

// Dynamic shared memory after the static mbarriers (fa-extern-dynamic-shared-memory).
// PTX:      .extern .shared .align 16 .b8 __dynamic_shmem__0[];
// PTX:      .param .align 64 .b8 fa_fwd_kernel_param_{{[0-9]+}}[128]
// PTX:      .maxntid 384, 1, 1
// PTX-DAG:  setmaxnreg.dec.sync.aligned.u32 24
// PTX-DAG:  setmaxnreg.inc.sync.aligned.u32 240
// PTX-DAG:  cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG:  bar.sync 1, 256;

// --schedule=cooperative: every warp copies and computes, no tensor maps.
// COOP:      "block": [
// COOP-NEXT:   256,
// COOP-NOT:  "tensormap"
// COOP:      "schedule": "cooperative",

// BAD: fa-select-kernel-config: schedule must be auto, cooperative or warp_specialized, got 'pingpong'

// Without a mask the default is the persistent tile scheduler.
// FULL: "schedule": "warp_specialized",
// FULL: "tile_scheduler": "persistent",

// --tile-scheduler=persistent: one block per multiprocessor (SMS, bound by
// the runtime), at most one per tile; registers split 40 / 232 within the
// block's launch allocation.
// PERSIST:      "grid": [
// PERSIST-NEXT:   "min(ceildiv(Nq, 128) * Hq * B, SMS)",
// PERSIST-NEXT:   "1",
// PERSIST-NEXT:   "1"
// PERSIST:      "schedule": "warp_specialized",
// PERSIST:      "tile_scheduler": "persistent",
// PERSIST-PTX-DAG: setmaxnreg.dec.sync.aligned.u32 40
// PERSIST-PTX-DAG: setmaxnreg.inc.sync.aligned.u32 232

// PERSIST-D96: the warp_specialized schedule loads K and V as 64-column TMA panels: head dims must be multiples of 64, got 96 and 96

// With a mask the default is the dynamic tile scheduler: the one launch is
// listed in "kernels" with its counter, a workspace word the launcher
// zeroes ("init": "zero"), which the kernel takes as a memref parameter.
// DYNAMIC:      "kernels": [
// DYNAMIC:          "grid": [
// DYNAMIC-NEXT:       "min(ceildiv(Nq, 128) * Hq * B, SMS)",
// DYNAMIC:            "name": "tile_counter",
// DYNAMIC-NEXT:       "rank": 1,
// DYNAMIC-NEXT:       "type": "memref"
// DYNAMIC:      "tile_scheduler": "dynamic",
// DYNAMIC:      "workspace": [
// DYNAMIC-NEXT:   {
// DYNAMIC-NEXT:     "dims": [
// DYNAMIC-NEXT:       "1"
// DYNAMIC-NEXT:     ],
// DYNAMIC-NEXT:     "dtype": "i32",
// DYNAMIC-NEXT:     "init": "zero",
// DYNAMIC-NEXT:     "name": "tile_counter"
// The producer's atomic (relaxed, one per tile) and the slot's store and
// loads around the Q channel's barriers.
// DYNAMIC-PTX: atom.global
// DYNAMIC-PTX: mbarrier.arrive.shared

// At D = 64 without a mask the persistent kernel, the first candidate,
// fits without spills since its tile decode is in i32 (it spilled holding
// the 64-bit one, and fa-compile took the dynamic kernel); the TMA-store
// epilogue forms its staging addresses from a fenced thread index instead
// of holding them across the tiles.
// D64:          "block_q": 192,
// D64:          "tile_scheduler": "persistent",

// BWD:          "entry": "fa_bwd_kernel",
// BWD:          "name": "dout_map",
// BWD:          "box": [
// BWD-NEXT:       1,
// BWD-NEXT:       1,
// BWD-NEXT:       64,
// BWD-NEXT:       32
// BWD-NEXT:     ],
// BWD-NEXT:     "dtype": "f32",
// BWD-NEXT:     "l2_promotion": "128B",
// BWD-NEXT:     "name": "dq_accum_map",
// BWD-NEXT:     "oob_fill": "zero",
// BWD-NEXT:     "swizzle": "128B",
// BWD-NEXT:     "tensor": "dq_accum",
// BWD-NEXT:     "type": "tensormap"
// BWD:        "schedule": "warp_specialized",

// dQ by bulk tensor reductions; the 8-byte reductions are the dK / dV
// epilogue's of a split GQA group (grid y over the query heads), which a
// fourth kernel converts.
// BWD-PTX:      .entry fa_bwd_kernel(
// BWD-PTX:      cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group
// BWD-PTX:      cp.async.bulk.wait_group.read 0;
// BWD-PTX:      red.global.add.v2.f32
// BWD-PTX:      .entry fa_bwd_dq_convert_kernel(
// BWD-PTX:      .entry fa_bwd_dkv_convert_kernel(

// The split group's accumulators (none, 0 rows, unless it splits) and the
// kernels' grids say when: G >= 2 and fewer blocks than 1.5 waves, or
// (D = 128) G >= 8 and at least 32 key blocks.
// RUN: FileCheck %s --check-prefix=SPLIT < %t/bwd/fa_bwd_d128_bf16_causal_sm90a.json
// SPLIT:        "entry": "fa_bwd_kernel",
// SPLIT-NEXT:   "grid": [
// SPLIT-NEXT:     "ceildiv(Nk, 128)",
// SPLIT-NEXT:     "Hkv * (min(Hq // Hkv - 1, 1) * min(max(SMS * 3 - ceildiv(Nk, 128) * Hkv * B * 2, 0) + min(max(Hq // Hkv - 7, 0), 1) * min(max(ceildiv(Nk, 128) - 31, 0), 1), 1) * (Hq // Hkv - 1) + 1)",
// SPLIT-NEXT:     "B"
// SPLIT:        "entry": "fa_bwd_dkv_convert_kernel",
// SPLIT:        "name": "dk_accum"
// SPLIT:        "name": "dk"
// SPLIT:        "name": "dv_accum"
// SPLIT:        "name": "dv"
// SPLIT:        "workspace": [
// SPLIT:            "Hkv",
// SPLIT-NEXT:       "Nk * (min(Hq // Hkv - 1, 1) * min(max(SMS * 3 - ceildiv(Nk, 128) * Hkv * B * 2, 0) + min(max(Hq // Hkv - 7, 0), 1) * min(max(ceildiv(Nk, 128) - 31, 0), 1), 1))",
// SPLIT-NEXT:       "128"
// SPLIT-NEXT:     ],
// SPLIT-NEXT:     "dtype": "f32",
// SPLIT-NEXT:     "init": "zero",
// SPLIT-NEXT:     "name": "dk_accum"
