// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu | FileCheck %s --check-prefix=BWD

// The conversions assign block ids from the #gpu.block mapping of each
// scf.forall (fa-tile-attention and fa-tile-attention-backward attach it),
// not from the dimensions' positions.

// Batch 1, one head, one query block (Nq = Br): canonicalization keeps the
// mapped unit dimensions of the forall (an unmapped forall would lose them),
// so the nest still converts, to a launch with a grid of ones.

// CHECK-LABEL: func.func @unit_dims
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c1{{(_[0-9]+)?}}, %{{.*}} = %c1{{(_[0-9]+)?}}, %{{.*}} = %c1{{(_[0-9]+)?}}) threads
func.func @unit_dims(%q: memref<1x1x64x64xf16>, %k: memref<1x1x?x64xf16>, %v: memref<1x1x?x64xf16>, %o: memref<1x1x64x64xf16>, %lse: memref<1x1x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x?x64xf16> to tensor<1x1x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x?x64xf16> to tensor<1x1x?x64xf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) -> (tensor<1x1x64x64xf16>, tensor<1x1x64xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<1x1x64x64xf16>, memref<1x1x64x64xf16>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<1x1x64xf32>, memref<1x1x64xf32>) -> ()
  return
}

// -----

// The same for the backward: the fast mode's (batch, kv head) forall, with
// the key-block loop inside it on x; batch 1 and one head.

// BWD-LABEL: func.func @backward_unit_dims
// BWD:         %[[NK:.*]] = tensor.dim %{{.*}}, %c2 : tensor<1x1x?x64xf16>
// BWD:         %[[KB:.*]] = arith.ceildivsi %[[NK]], %c64
// BWD:         gpu.launch {{.*}} function(@backward_unit_dims_preprocess_kernel)
// BWD:         gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[KB]], %{{.*}} = %c1{{(_[0-9]+)?}}, %{{.*}} = %c1{{(_[0-9]+)?}}) {{.*}} function(@backward_unit_dims_kernel)
// BWD:         gpu.launch {{.*}} function(@backward_unit_dims_dq_convert_kernel)
func.func @backward_unit_dims(%q: memref<1x1x64x64xf16>, %k: memref<1x1x?x64xf16>, %v: memref<1x1x?x64xf16>, %o: memref<1x1x64x64xf16>, %do: memref<1x1x64x64xf16>, %lse: memref<1x1x64xf32>, %dq: memref<1x1x64x64xf16>, %dk: memref<1x1x?x64xf16>, %dv: memref<1x1x?x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x?x64xf16> to tensor<1x1x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x?x64xf16> to tensor<1x1x?x64xf16>
  %ot = bufferization.to_tensor %o restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %dot = bufferization.to_tensor %do restrict : memref<1x1x64x64xf16> to tensor<1x1x64x64xf16>
  %lt = bufferization.to_tensor %lse restrict : memref<1x1x64xf32> to tensor<1x1x64xf32>
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> : (tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x64x64xf16>, tensor<1x1x64xf32>, tensor<1x1x64x64xf16>) -> (tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (tensor<1x1x64x64xf16>, memref<1x1x64x64xf16>) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (tensor<1x1x?x64xf16>, memref<1x1x?x64xf16>) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (tensor<1x1x?x64xf16>, memref<1x1x?x64xf16>) -> ()
  return
}

// -----

// A hand-written nest (what fa-tile-attention, fa-specialize-masks and
// fa-use-exp2 give for 1x2x?x64 f16, blocks of 64) whose forall maps heads
// to x and query blocks to y: the grid is (heads, query blocks, batch), the
// query tile starts at block id y * 64 and out is written at head block id x.

// CHECK-LABEL: func.func @heads_on_x
// CHECK:         %[[NQB:.*]] = arith.ceildivui
// CHECK:         gpu.launch blocks(%[[BX:.*]], %[[BY:.*]], %{{.*}}) in (%{{.*}} = %c2{{(_[0-9]+)?}}, %{{.*}} = %[[NQB]], %{{.*}} = %c1{{(_[0-9]+)?}}) threads
// CHECK:           arith.muli %[[BY]], %{{.*}} : index
// CHECK:           vector.store %{{.*}}, %arg3[%{{.*}}, %[[BX]], %{{.*}}, %{{.*}}]
#map = affine_map<(d0) -> (-d0 + 64)>
func.func @heads_on_x(%arg0: memref<1x2x?x64xf16>, %arg1: memref<1x2x?x64xf16>, %arg2: memref<1x2x?x64xf16>, %arg3: memref<1x2x?x64xf16>, %arg4: memref<1x2x?xf32>) {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 0.000000e+00 : f16
  %c64 = arith.constant 64 : index
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %0 = bufferization.to_tensor %arg0 restrict : memref<1x2x?x64xf16> to tensor<1x2x?x64xf16>
  %1 = bufferization.to_tensor %arg1 restrict : memref<1x2x?x64xf16> to tensor<1x2x?x64xf16>
  %2 = bufferization.to_tensor %arg2 restrict : memref<1x2x?x64xf16> to tensor<1x2x?x64xf16>
  %dim = memref.dim %arg0, %c2 : memref<1x2x?x64xf16>
  %dim_2 = memref.dim %arg1, %c2 : memref<1x2x?x64xf16>
  %3 = arith.ceildivui %dim, %c64 : index
  %4 = tensor.empty(%dim) : tensor<1x2x?x64xf16>
  %5 = tensor.empty(%dim) : tensor<1x2x?xf32>
  %6:2 = scf.forall (%arg5, %arg6, %arg7) in (1, 2, %3) shared_outs(%arg8 = %4, %arg9 = %5) -> (tensor<1x2x?x64xf16>, tensor<1x2x?xf32>) {
    %7 = arith.muli %arg7, %c64 : index
    %8 = arith.subi %dim, %7 : index
    %9 = arith.minsi %8, %c64 : index
    %extracted_slice = tensor.extract_slice %0[0, %arg6, %7, 0] [1, 1, %9, 64] [1, 1, 1, 1] : tensor<1x2x?x64xf16> to tensor<?x64xf16>
    %dim_3 = tensor.dim %extracted_slice, %c0 : tensor<?x64xf16>
    %10 = affine.apply #map(%dim_3)
    %padded = tensor.pad %extracted_slice low[0, 0] high[%10, 0] {
    ^bb0(%arg10: index, %arg11: index):
      tensor.yield %cst_1 : f16
    } : tensor<?x64xf16> to tensor<64x64xf16>
    %11 = tensor.empty() : tensor<64x64xf32>
    %12 = linalg.fill ins(%cst_0 : f32) outs(%11 : tensor<64x64xf32>) -> tensor<64x64xf32>
    %13 = tensor.empty() : tensor<64xf32>
    %14 = linalg.fill ins(%cst : f32) outs(%13 : tensor<64xf32>) -> tensor<64xf32>
    %15 = linalg.fill ins(%cst_0 : f32) outs(%13 : tensor<64xf32>) -> tensor<64xf32>
    %16 = arith.maxsi %dim_2, %c0 : index
    %17 = arith.ceildivui %16, %c64 : index
    %18 = arith.muli %17, %c64 : index
    %19 = arith.minsi %18, %dim_2 : index
    %20 = arith.divui %16, %c64 : index
    %21 = arith.muli %20, %c64 : index
    %22 = arith.maxsi %21, %c0 : index
    %23 = arith.minsi %22, %19 : index
    %24:3 = scf.for %arg10 = %c0 to %23 step %c64 iter_args(%arg11 = %12, %arg12 = %14, %arg13 = %15) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
      %26 = arith.subi %dim_2, %arg10 : index
      %27 = arith.minsi %26, %c64 : index
      %extracted_slice_6 = tensor.extract_slice %1[0, %arg6, %arg10, 0] [1, 1, %27, 64] [1, 1, 1, 1] : tensor<1x2x?x64xf16> to tensor<?x64xf16>
      %dim_7 = tensor.dim %extracted_slice_6, %c0 : tensor<?x64xf16>
      %28 = affine.apply #map(%dim_7)
      %padded_8 = tensor.pad %extracted_slice_6 low[0, 0] high[%28, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : f16
      } : tensor<?x64xf16> to tensor<64x64xf16>
      %extracted_slice_9 = tensor.extract_slice %2[0, %arg6, %arg10, 0] [1, 1, %27, 64] [1, 1, 1, 1] : tensor<1x2x?x64xf16> to tensor<?x64xf16>
      %dim_10 = tensor.dim %extracted_slice_9, %c0 : tensor<?x64xf16>
      %29 = affine.apply #map(%dim_10)
      %padded_11 = tensor.pad %extracted_slice_9 low[0, 0] high[%29, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : f16
      } : tensor<?x64xf16> to tensor<64x64xf16>
      %new_acc, %new_max, %new_sum = fa.online_attention %padded, %padded_8, %padded_11 into %arg11, %arg12, %arg13 scale 1.250000e-01 exp2 : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
      scf.yield %new_acc, %new_max, %new_sum : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
    }
    %25:3 = scf.for %arg10 = %23 to %19 step %c64 iter_args(%arg11 = %24#0, %arg12 = %24#1, %arg13 = %24#2) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
      %26 = arith.subi %dim_2, %arg10 : index
      %27 = arith.minsi %26, %c64 : index
      %extracted_slice_6 = tensor.extract_slice %1[0, %arg6, %arg10, 0] [1, 1, %27, 64] [1, 1, 1, 1] : tensor<1x2x?x64xf16> to tensor<?x64xf16>
      %dim_7 = tensor.dim %extracted_slice_6, %c0 : tensor<?x64xf16>
      %28 = affine.apply #map(%dim_7)
      %padded_8 = tensor.pad %extracted_slice_6 low[0, 0] high[%28, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : f16
      } : tensor<?x64xf16> to tensor<64x64xf16>
      %extracted_slice_9 = tensor.extract_slice %2[0, %arg6, %arg10, 0] [1, 1, %27, 64] [1, 1, 1, 1] : tensor<1x2x?x64xf16> to tensor<?x64xf16>
      %dim_10 = tensor.dim %extracted_slice_9, %c0 : tensor<?x64xf16>
      %29 = affine.apply #map(%dim_10)
      %padded_11 = tensor.pad %extracted_slice_9 low[0, 0] high[%29, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : f16
      } : tensor<?x64xf16> to tensor<64x64xf16>
      %new_acc, %new_max, %new_sum = fa.online_attention %padded, %padded_8, %padded_11 into %arg11, %arg12, %arg13 masked(%7, %arg10, %dim, %dim_2) scale 1.250000e-01 exp2 : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
      scf.yield %new_acc, %new_max, %new_sum : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
    }
    %out, %lse = fa.online_attention_finalize %25#0, %25#1, %25#2 exp2 : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf16>
    %extracted_slice_4 = tensor.extract_slice %out[0, 0] [%9, 64] [1, 1] : tensor<64x64xf16> to tensor<?x64xf16>
    %extracted_slice_5 = tensor.extract_slice %lse[0] [%9] [1] : tensor<64xf32> to tensor<?xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %extracted_slice_4 into %arg8[0, %arg6, %7, 0] [1, 1, %9, 64] [1, 1, 1, 1] : tensor<?x64xf16> into tensor<1x2x?x64xf16>
      tensor.parallel_insert_slice %extracted_slice_5 into %arg9[0, %arg6, %7] [1, 1, %9] [1, 1, 1] : tensor<?xf32> into tensor<1x2x?xf32>
    }
  } {mapping = [#gpu.block<z>, #gpu.block<x>, #gpu.block<y>]}
  bufferization.materialize_in_destination %6#0 in restrict writable %arg3 : (tensor<1x2x?x64xf16>, memref<1x2x?x64xf16>) -> ()
  bufferization.materialize_in_destination %6#1 in restrict writable %arg4 : (tensor<1x2x?xf32>, memref<1x2x?xf32>) -> ()
  return
}
