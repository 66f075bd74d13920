// REQUIRES: ptxas
// RUN: fa-opt %s --split-input-file --fa-gpu-forward="chip=sm_80 block-q=128 block-kv=32 warps=4 toolkit=%cuda_root" -o %t.sm_80.mlir
// RUN: python3 %S/extract-ptx.py %t.sm_80.mlir %t.sm_80 --ptxas %ptxas --arch sm_80 | FileCheck %s --check-prefix=PTXAS
// RUN: cat %t.sm_80-0.ptx %t.sm_80-1.ptx %t.sm_80-2.ptx %t.sm_80-3.ptx | FileCheck %s --check-prefix=PTX
// RUN: fa-opt %s --split-input-file --fa-gpu-forward="chip=sm_90a block-q=128 block-kv=32 warps=4 toolkit=%cuda_root" -o %t.sm_90a.mlir
// RUN: python3 %S/extract-ptx.py %t.sm_90a.mlir %t.sm_90a --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS
// RUN: cat %t.sm_90a-0.ptx %t.sm_90a-1.ptx %t.sm_90a-2.ptx %t.sm_90a-3.ptx | FileCheck %s --check-prefix=PTX

// D = 128: Br = 128, Bc = 32, 4 warps (FlashAttention-2's sm8x tile for D = 128;
// Bc = 64 with 4 warps spills, see docs/GPU.md).
// Every kernel (bf16/f16 x non-causal/causal) must use the tensor-core path
// and assemble with ptxas for sm_80 and sm_90a without register spills.

// PTX:         .target sm_{{80|90a}}
// PTX:         .visible .entry bf16_d128_kernel(
// PTX-DAG:     cp.async.cg.shared.global
// PTX-DAG:     cp.async.wait_group
// PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX-DAG:     ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-DAG:     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG:     shfl.sync.bfly.b32
// PTX-DAG:     ex2.approx
// PTX:         .visible .entry f16_d128_kernel(
// PTX:         mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// PTXAS-COUNT-4: 0 bytes spill stores, 0 bytes spill loads
// PTXAS-NOT:     bytes spill stores

func.func @bf16_d128(%q: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %out, %l = fa.attention %qt, %kt, %vt : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x128xbf16>, memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

func.func @bf16_causal_d128(%q: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x128xbf16>, memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

func.func @f16_d128(%q: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xf16>
  %out, %l = fa.attention %qt, %kt, %vt : (tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>) -> (tensor<?x?x?x128xf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x128xf16>, memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

func.func @f16_causal_d128(%q: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>) -> (tensor<?x?x?x128xf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x128xf16>, memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}
