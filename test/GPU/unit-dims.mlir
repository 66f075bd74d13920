// REQUIRES: ptxas
// RUN: fa-opt %s --split-input-file --fa-gpu-forward="chip=sm_90a block-q=128 block-kv=64 tile-scheduler=grid toolkit=%cuda_root" -o %t.sm_90a.mlir
// RUN: FileCheck %s < %t.sm_90a.mlir
// RUN: python3 %S/extract-ptx.py %t.sm_90a.mlir %t.sm_90a --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS
// RUN: fa-opt %s --split-input-file --fa-gpu-forward="chip=sm_80 block-q=128 block-kv=64 toolkit=%cuda_root" -o %t.sm_80.mlir
// RUN: FileCheck %s < %t.sm_80.mlir
// RUN: python3 %S/extract-ptx.py %t.sm_80.mlir %t.sm_80 --ptxas %ptxas --arch sm_80 | FileCheck %s --check-prefix=PTXAS

// The forward GPU pipeline on a batch of 1, a single head, a single query
// block (Nq = Br = 128) and all three at once: batch 1 is the common
// inference shape. The canonicalization after tiling used to fold the unit
// dimensions of the (batch, head, query block) scf.forall, which the
// conversion then rejected ("expected a normalized 3-d scf.forall with 2
// results"); the forall now carries its #gpu.block mapping, which keeps
// them, and the conversion assigns block ids from it. The grid is (query
// blocks, heads, batch) with 1 for each unit dimension, and every kernel
// assembles.

// PTXAS-COUNT-4: ptxas info    : Used {{[0-9]+}} registers

!q1 = memref<1x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l1 = memref<1x?x?xf32, strided<[?, ?, ?], offset: ?>>

// CHECK-LABEL: func.func @batch1
// CHECK-DAG:     %[[H:.*]] = memref.dim %arg0, %c1
// CHECK-DAG:     %[[NQ:.*]] = memref.dim %arg0, %c2
// CHECK:         %[[QB:.*]] = arith.ceildivui %[[NQ]], %c128
// CHECK:         gpu.launch_func @batch1_kernel::@batch1_kernel blocks in (%[[QB]], %[[H]], %c1)
func.func @batch1(%q: !q1, %k: !q1, %v: !q1, %o: !q1, %lse: !l1) {
  %qt = bufferization.to_tensor %q restrict : !q1 to tensor<1x?x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : !q1 to tensor<1x?x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : !q1 to tensor<1x?x?x64xf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<1x?x?x64xf16>, tensor<1x?x?x64xf16>, tensor<1x?x?x64xf16>) -> (tensor<1x?x?x64xf16>, tensor<1x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<1x?x?x64xf16>, !q1) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<1x?x?xf32>, !l1) -> ()
  return
}

// -----

!q = memref<?x1x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x1x?xf32, strided<[?, ?, ?], offset: ?>>

// CHECK-LABEL: func.func @one_head
// CHECK-DAG:     %[[B:.*]] = memref.dim %arg0, %c0
// CHECK-DAG:     %[[QB:.*]] = arith.ceildivui
// CHECK:         gpu.launch_func @one_head_kernel::@one_head_kernel blocks in (%[[QB]], %c1, %[[B]])
func.func @one_head(%q: !q, %k: !q, %v: !q, %o: !q, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !q to tensor<?x1x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : !q to tensor<?x1x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : !q to tensor<?x1x?x64xf16>
  %out, %l = fa.attention %qt, %kt, %vt : (tensor<?x1x?x64xf16>, tensor<?x1x?x64xf16>, tensor<?x1x?x64xf16>) -> (tensor<?x1x?x64xf16>, tensor<?x1x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x1x?x64xf16>, !q) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x1x?xf32>, !l) -> ()
  return
}

// -----

!q = memref<?x?x128x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!k = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x128xf32, strided<[?, ?, ?], offset: ?>>

// CHECK-LABEL: func.func @one_query_block
// CHECK-DAG:     %[[B:.*]] = memref.dim %arg0, %c0
// CHECK-DAG:     %[[H:.*]] = memref.dim %arg0, %c1
// CHECK:         gpu.launch_func @one_query_block_kernel::@one_query_block_kernel blocks in (%c1, %[[H]], %[[B]])
func.func @one_query_block(%q: !q, %k: !k, %v: !k, %o: !q, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !q to tensor<?x?x128x64xf16>
  %kt = bufferization.to_tensor %k restrict : !k to tensor<?x?x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : !k to tensor<?x?x?x64xf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<?x?x128x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x128x64xf16>, tensor<?x?x128xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x128x64xf16>, !q) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x128xf32>, !l) -> ()
  return
}

// -----

!q = memref<1x1x128x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!k = memref<1x1x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<1x1x128xf32, strided<[?, ?, ?], offset: ?>>

// CHECK-LABEL: func.func @all_unit
// CHECK:         gpu.launch_func @all_unit_kernel::@all_unit_kernel blocks in (%c1, %c1, %c1)
func.func @all_unit(%q: !q, %k: !k, %v: !k, %o: !q, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !q to tensor<1x1x128x64xf16>
  %kt = bufferization.to_tensor %k restrict : !k to tensor<1x1x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : !k to tensor<1x1x?x64xf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<1x1x128x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) -> (tensor<1x1x128x64xf16>, tensor<1x1x128xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<1x1x128x64xf16>, !q) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<1x1x128xf32>, !l) -> ()
  return
}
