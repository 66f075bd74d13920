// REQUIRES: ptxas
// RUN: fa-opt %s --split-input-file --fa-gpu-backward="chip=sm_80 toolkit=%cuda_root" -o %t.sm_80.mlir
// RUN: FileCheck %s --check-prefixes=CHECK,SM80 < %t.sm_80.mlir
// RUN: python3 %S/extract-ptx.py %t.sm_80.mlir %t.sm_80 --ptxas %ptxas --arch sm_80 | FileCheck %s --check-prefix=PTXAS
// RUN: fa-opt %s --split-input-file --fa-gpu-backward="chip=sm_90a toolkit=%cuda_root" -o %t.sm_90a.mlir
// RUN: FileCheck %s --check-prefixes=CHECK,SM90A < %t.sm_90a.mlir
// RUN: python3 %S/extract-ptx.py %t.sm_90a.mlir %t.sm_90a --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS

// The backward GPU pipeline on a batch of 1 with a single head and a single
// query block (Nq = Br = 64), fast and deterministic. The foralls of
// fa-tile-attention-backward carry #gpu.block mappings (batch on z, heads on
// y, key blocks or query blocks on x), which the conversion reads to assign
// block ids and size the grids: every unit dimension is a 1 in its grid, and
// every kernel assembles (3 kernels per binary: preprocess, key block, and
// the dQ conversion or the deterministic dQ kernel).

// PTXAS-COUNT-6: ptxas info    : Used {{[0-9]+}} registers

!m = memref<1x1x64x64xf16>
!k = memref<1x1x?x64xf16>
!t = tensor<1x1x64x64xf16>
!kt = tensor<1x1x?x64xf16>

// Fast: the key-block kernel's grid is (key blocks, kv heads, batch).
// CHECK-LABEL: func.func @fast
// CHECK:         %[[NK:.*]] = memref.dim %arg1, %c2
// CHECK:         %[[KB:.*]] = arith.ceildivsi %[[NK]], %c{{64|128}}
// CHECK:         gpu.launch_func @fast_kernels::@fast_preprocess_kernel blocks in (%c1, %c1, %c1)
// CHECK:         gpu.launch_func @fast_kernels::@fast_kernel blocks in (%[[KB]], %c1, %c1)
// CHECK:         gpu.launch_func @fast_kernels::@fast_dq_convert_kernel blocks in (%c1, %c1, %c1)
func.func @fast(%q: !m, %k: !k, %v: !k, %o: !m, %do: !m, %lse: memref<1x1x64xf32>,
                %dq: !m, %dk: !k, %dv: !k) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !k to !kt
  %vt = bufferization.to_tensor %v restrict : !k to !kt
  %ot = bufferization.to_tensor %o restrict : !m to !t
  %dot = bufferization.to_tensor %do restrict : !m to !t
  %lt = bufferization.to_tensor %lse restrict : memref<1x1x64xf32> to tensor<1x1x64xf32>
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal>
      : (!t, !kt, !kt, !t, tensor<1x1x64xf32>, !t) -> (!t, !kt, !kt)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !m) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!kt, !k) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!kt, !k) -> ()
  return
}

// -----

!m = memref<1x1x64x64xf16>
!k = memref<1x1x?x64xf16>
!t = tensor<1x1x64x64xf16>
!kt = tensor<1x1x?x64xf16>

// Deterministic: the dK/dV forall (batch, kv head, key block) and the dQ
// forall (batch, query head, query block), each with its unit dimensions;
// on sm_90a the warp-specialized kernel's one-pass nest, its dQ added in a
// fixed order, then converted.
// CHECK-LABEL: func.func @deterministic
// CHECK:         %[[NK:.*]] = memref.dim %arg1, %c2
// CHECK:         %[[KB:.*]] = arith.ceildivsi %[[NK]], %c{{64|128}}
// CHECK:         gpu.launch_func @deterministic_kernels::@deterministic_preprocess_kernel blocks in (%c1, %c1, %c1)
// CHECK:         gpu.launch_func @deterministic_kernels::@deterministic_kernel blocks in (%[[KB]], %c1, %c1)
// SM80:          gpu.launch_func @deterministic_kernels::@deterministic_dq_kernel blocks in (%c1, %c1, %c1)
// SM90A:         gpu.launch_func @deterministic_kernels::@deterministic_dq_convert_kernel blocks in (%c1, %c1, %c1)
func.func @deterministic(%q: !m, %k: !k, %v: !k, %o: !m, %do: !m, %lse: memref<1x1x64xf32>,
                         %dq: !m, %dk: !k, %dv: !k) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !k to !kt
  %vt = bufferization.to_tensor %v restrict : !k to !kt
  %ot = bufferization.to_tensor %o restrict : !m to !t
  %dot = bufferization.to_tensor %do restrict : !m to !t
  %lt = bufferization.to_tensor %lse restrict : memref<1x1x64xf32> to tensor<1x1x64xf32>
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> deterministic
      : (!t, !kt, !kt, !t, tensor<1x1x64xf32>, !t) -> (!t, !kt, !kt)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !m) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!kt, !k) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!kt, !k) -> ()
  return
}
