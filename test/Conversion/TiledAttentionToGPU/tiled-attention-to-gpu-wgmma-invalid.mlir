// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=4 wgmma=true" --verify-diagnostics
//
// The tile shape and warps are fixed per RUN line, so the errors they cause
// get RUN lines of their own, each checked on @valid (the last case):
// RUN: not fa-opt %s --split-input-file --fa-tile-attention="block-q=32 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=2 wgmma=true" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not fa-opt %s --split-input-file --fa-tile-attention="block-q=128 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=4 wgmma=true" 2>&1 | FileCheck %s --check-prefix=BLOCKQ
// Warps beyond a thread block (fuzzer finding: INT64_MAX overflowed the
// tile arithmetic), with and without wgmma:
// RUN: not fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=HUGEWARPS
// RUN: not fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=36 wgmma=true" 2>&1 | FileCheck %s --check-prefix=WARPS36
// HUGEWARPS: error: fa-convert-tiled-attention-to-gpu: warps must be in [1, 32], got 9223372036854775807
// WARPS36: error: fa-convert-tiled-attention-to-gpu: warps must be in [1, 32], got 36

// S = Q K^T has N = block-kv, at most 256 for one wgmma. fa-tile-attention
// caps block-kv at 256 itself, so this is the tiled IR it prints (with
// fa-specialize-masks, fa-use-exp2, canonicalize, cse; the RUN line leaves it
// as is) for block-kv=256, with the key tiles doubled to 512 rows. mma.sync
// converts it.
#map = affine_map<(d0) -> (-d0 + 64)>
#map1 = affine_map<(d0) -> (-d0 + 512)>
func.func @block_kv_512(%arg0: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg1: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg2: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg3: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %arg4: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %cst = arith.constant 0xFF800000 : f32
  %cst_0 = arith.constant 0.000000e+00 : f32
  %cst_1 = arith.constant 0.000000e+00 : bf16
  %c512 = arith.constant 512 : index
  %c64 = arith.constant 64 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %0 = bufferization.to_tensor %arg0 restrict : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xbf16>
  %1 = bufferization.to_tensor %arg1 restrict : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xbf16>
  %2 = bufferization.to_tensor %arg2 restrict : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xbf16>
  %dim = memref.dim %arg0, %c0 : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  %dim_2 = memref.dim %arg0, %c1 : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  %dim_3 = memref.dim %arg0, %c2 : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  %dim_4 = memref.dim %arg1, %c1 : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  %dim_5 = memref.dim %arg1, %c2 : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
  %3 = arith.divui %dim_2, %dim_4 : index
  %4 = arith.ceildivui %dim_3, %c64 : index
  %5 = tensor.empty(%dim, %dim_2, %dim_3) : tensor<?x?x?x64xbf16>
  %6 = tensor.empty(%dim, %dim_2, %dim_3) : tensor<?x?x?xf32>
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: wgmma's N is at most 256: block-kv and the value head dim must be at most 256}}
  %7:2 = scf.forall (%arg5, %arg6, %arg7) in (%dim, %dim_2, %4) shared_outs(%arg8 = %5, %arg9 = %6) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>) {
    %8 = arith.muli %arg7, %c64 : index
    %9 = arith.subi %dim_3, %8 : index
    %10 = arith.minsi %9, %c64 : index
    %11 = arith.divui %arg6, %3 : index
    %extracted_slice = tensor.extract_slice %0[%arg5, %arg6, %8, 0] [1, 1, %10, 64] [1, 1, 1, 1] : tensor<?x?x?x64xbf16> to tensor<?x64xbf16>
    %dim_6 = tensor.dim %extracted_slice, %c0 : tensor<?x64xbf16>
    %12 = affine.apply #map(%dim_6)
    %padded = tensor.pad %extracted_slice low[0, 0] high[%12, 0] {
    ^bb0(%arg10: index, %arg11: index):
      tensor.yield %cst_1 : bf16
    } : tensor<?x64xbf16> to tensor<64x64xbf16>
    %13 = tensor.empty() : tensor<64x64xf32>
    %14 = linalg.fill ins(%cst_0 : f32) outs(%13 : tensor<64x64xf32>) -> tensor<64x64xf32>
    %15 = tensor.empty() : tensor<64xf32>
    %16 = linalg.fill ins(%cst : f32) outs(%15 : tensor<64xf32>) -> tensor<64xf32>
    %17 = linalg.fill ins(%cst_0 : f32) outs(%15 : tensor<64xf32>) -> tensor<64xf32>
    %18 = arith.maxsi %dim_5, %c0 : index
    %19 = arith.ceildivui %18, %c512 : index
    %20 = arith.muli %19, %c512 : index
    %21 = arith.minsi %20, %dim_5 : index
    %22 = arith.divui %18, %c512 : index
    %23 = arith.muli %22, %c512 : index
    %24 = arith.maxsi %23, %c0 : index
    %25 = arith.minsi %24, %21 : index
    %26:3 = scf.for %arg10 = %c0 to %25 step %c512 iter_args(%arg11 = %14, %arg12 = %16, %arg13 = %17) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
      %28 = arith.subi %dim_5, %arg10 : index
      %29 = arith.minsi %28, %c512 : index
      %extracted_slice_9 = tensor.extract_slice %1[%arg5, %11, %arg10, 0] [1, 1, %29, 64] [1, 1, 1, 1] : tensor<?x?x?x64xbf16> to tensor<?x64xbf16>
      %dim_10 = tensor.dim %extracted_slice_9, %c0 : tensor<?x64xbf16>
      %30 = affine.apply #map1(%dim_10)
      %padded_11 = tensor.pad %extracted_slice_9 low[0, 0] high[%30, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : bf16
      } : tensor<?x64xbf16> to tensor<512x64xbf16>
      %extracted_slice_12 = tensor.extract_slice %2[%arg5, %11, %arg10, 0] [1, 1, %29, 64] [1, 1, 1, 1] : tensor<?x?x?x64xbf16> to tensor<?x64xbf16>
      %dim_13 = tensor.dim %extracted_slice_12, %c0 : tensor<?x64xbf16>
      %31 = affine.apply #map1(%dim_13)
      %padded_14 = tensor.pad %extracted_slice_12 low[0, 0] high[%31, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : bf16
      } : tensor<?x64xbf16> to tensor<512x64xbf16>
      %new_acc, %new_max, %new_sum = fa.online_attention %padded, %padded_11, %padded_14 into %arg11, %arg12, %arg13 scale 1.250000e-01 exp2 : tensor<64x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16> -> tensor<64x64xf32>, tensor<64xf32>
      scf.yield %new_acc, %new_max, %new_sum : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
    }
    %27:3 = scf.for %arg10 = %25 to %21 step %c512 iter_args(%arg11 = %26#0, %arg12 = %26#1, %arg13 = %26#2) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
      %28 = arith.subi %dim_5, %arg10 : index
      %29 = arith.minsi %28, %c512 : index
      %extracted_slice_9 = tensor.extract_slice %1[%arg5, %11, %arg10, 0] [1, 1, %29, 64] [1, 1, 1, 1] : tensor<?x?x?x64xbf16> to tensor<?x64xbf16>
      %dim_10 = tensor.dim %extracted_slice_9, %c0 : tensor<?x64xbf16>
      %30 = affine.apply #map1(%dim_10)
      %padded_11 = tensor.pad %extracted_slice_9 low[0, 0] high[%30, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : bf16
      } : tensor<?x64xbf16> to tensor<512x64xbf16>
      %extracted_slice_12 = tensor.extract_slice %2[%arg5, %11, %arg10, 0] [1, 1, %29, 64] [1, 1, 1, 1] : tensor<?x?x?x64xbf16> to tensor<?x64xbf16>
      %dim_13 = tensor.dim %extracted_slice_12, %c0 : tensor<?x64xbf16>
      %31 = affine.apply #map1(%dim_13)
      %padded_14 = tensor.pad %extracted_slice_12 low[0, 0] high[%31, 0] {
      ^bb0(%arg14: index, %arg15: index):
        tensor.yield %cst_1 : bf16
      } : tensor<?x64xbf16> to tensor<512x64xbf16>
      %new_acc, %new_max, %new_sum = fa.online_attention %padded, %padded_11, %padded_14 into %arg11, %arg12, %arg13 masked(%8, %arg10, %dim_3, %dim_5) scale 1.250000e-01 exp2 : tensor<64x64xbf16>, tensor<512x64xbf16>, tensor<512x64xbf16> -> tensor<64x64xf32>, tensor<64xf32>
      scf.yield %new_acc, %new_max, %new_sum : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
    }
    %out, %lse = fa.online_attention_finalize %27#0, %27#1, %27#2 exp2 : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xbf16>
    %extracted_slice_7 = tensor.extract_slice %out[0, 0] [%10, 64] [1, 1] : tensor<64x64xbf16> to tensor<?x64xbf16>
    %extracted_slice_8 = tensor.extract_slice %lse[0] [%10] [1] : tensor<64xf32> to tensor<?xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %extracted_slice_7 into %arg8[%arg5, %arg6, %8, 0] [1, 1, %10, 64] [1, 1, 1, 1] : tensor<?x64xbf16> into tensor<?x?x?x64xbf16>
      tensor.parallel_insert_slice %extracted_slice_8 into %arg9[%arg5, %arg6, %8] [1, 1, %10] [1, 1, 1] : tensor<?xf32> into tensor<?x?x?xf32>
    }
  }
  bufferization.materialize_in_destination %7#0 in restrict writable %arg3 : (tensor<?x?x?x64xbf16>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %7#1 in restrict writable %arg4 : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

// Valid with block-q=64, block-kv=64 on 4 warps (first RUN line). The other
// RUN lines break one requirement each:
// - warps=2 (block-q=32): wgmma is issued by whole warpgroups of 4 warps;
// - block-q=128 on 4 warps: each warp would own 32 query rows, one
//   warpgroup wgmma covers 64.
!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>
func.func @valid(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  // WARPS: :[[@LINE+2]]:{{[0-9]+}}: error: fa-convert-tiled-attention-to-gpu: wgmma needs whole warpgroups: warps must be a multiple of 4
  // BLOCKQ: :[[@LINE+1]]:{{[0-9]+}}: error: fa-convert-tiled-attention-to-gpu: with wgmma each warp owns 16 query rows: block-q must be 16 * warps
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
