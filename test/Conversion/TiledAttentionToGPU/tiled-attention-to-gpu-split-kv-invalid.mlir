// RUN: fa-opt %s --split-input-file --fa-convert-tiled-attention-to-gpu -verify-diagnostics

// Fuzzer finding (seventh session): a tiled nest whose results are returned
// as tensors (neither materialized into memrefs nor partials of a split-KV
// merge) and whose tiles are not memref slices is refused with the reason;
// the split-KV workspace step used to rewrite it first and crash.

#map = affine_map<(d0) -> (-d0 + 128)>
#map1 = affine_map<(d0) -> (-d0 + 64)>
  func.func @with_kernel_config(%arg0: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %arg0, %c0 : tensor<?x?x?x64xf16>
    %c1 = arith.constant 1 : index
    %dim_0 = tensor.dim %arg0, %c1 : tensor<?x?x?x64xf16>
    %c2 = arith.constant 2 : index
    %dim_1 = tensor.dim %arg0, %c2 : tensor<?x?x?x64xf16>
    %c1_2 = arith.constant 1 : index
    %dim_3 = tensor.dim %arg0, %c1_2 : tensor<?x?x?x64xf16>
    %c2_4 = arith.constant 2 : index
    %dim_5 = tensor.dim %arg0, %c2_4 : tensor<?x?x?x64xf16>
    %c0_6 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c64 = arith.constant 64 : index
    %0 = arith.divui %dim_0, %dim_3 : index
    %1 = arith.ceildivui %dim_1, %c128 : index
    %2 = tensor.empty(%dim, %dim_0, %dim_1) : tensor<?x?x?x64xf16>
    %3 = tensor.empty(%dim, %dim_0, %dim_1) : tensor<?x?x?xf32>
    // expected-error @+1 {{K/V tiles must be slices of memrefs}}
    %4:2 = scf.forall (%arg1, %arg2, %arg3) in (%dim, %dim_0, %1) shared_outs(%arg4 = %2, %arg5 = %3) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>) {
      %5 = arith.muli %arg3, %c128 : index
      %6 = arith.subi %dim_1, %5 : index
      %7 = arith.minsi %6, %c128 : index
      %8 = arith.divui %arg2, %0 : index
      %extracted_slice = tensor.extract_slice %arg0[%arg1, %arg2, %5, 0] [1, 1, %7, 64] [1, 1, 1, 1] : tensor<?x?x?x64xf16> to tensor<?x64xf16>
      %cst = arith.constant 0.000000e+00 : f16
      %c0_7 = arith.constant 0 : index
      %dim_8 = tensor.dim %extracted_slice, %c0_7 : tensor<?x64xf16>
      %9 = affine.apply #map(%dim_8)
      %padded = tensor.pad %extracted_slice low[0, 0] high[%9, 0] {
      ^bb0(%arg6: index, %arg7: index):
        tensor.yield %cst : f16
      } : tensor<?x64xf16> to tensor<128x64xf16>
      %10 = tensor.empty() : tensor<128x64xf32>
      %cst_9 = arith.constant 0.000000e+00 : f32
      %11 = linalg.fill ins(%cst_9 : f32) outs(%10 : tensor<128x64xf32>) -> tensor<128x64xf32>
      %12 = tensor.empty() : tensor<128xf32>
      %cst_10 = arith.constant 0xFF800000 : f32
      %13 = linalg.fill ins(%cst_10 : f32) outs(%12 : tensor<128xf32>) -> tensor<128xf32>
      %14 = tensor.empty() : tensor<128xf32>
      %cst_11 = arith.constant 0.000000e+00 : f32
      %15 = linalg.fill ins(%cst_11 : f32) outs(%14 : tensor<128xf32>) -> tensor<128xf32>
      %16:3 = scf.for %arg6 = %c0_6 to %dim_5 step %c64 iter_args(%arg7 = %11, %arg8 = %13, %arg9 = %15) -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>) {
        %17 = arith.subi %dim_5, %arg6 : index
        %18 = arith.minsi %17, %c64 : index
        %extracted_slice_14 = tensor.extract_slice %arg0[%arg1, %8, %arg6, 0] [1, 1, %18, 64] [1, 1, 1, 1] : tensor<?x?x?x64xf16> to tensor<?x64xf16>
        %cst_15 = arith.constant 0.000000e+00 : f16
        %c0_16 = arith.constant 0 : index
        %dim_17 = tensor.dim %extracted_slice_14, %c0_16 : tensor<?x64xf16>
        %19 = affine.apply #map1(%dim_17)
        %padded_18 = tensor.pad %extracted_slice_14 low[0, 0] high[%19, 0] {
        ^bb0(%arg10: index, %arg11: index):
          tensor.yield %cst_15 : f16
        } : tensor<?x64xf16> to tensor<64x64xf16>
        %extracted_slice_19 = tensor.extract_slice %arg0[%arg1, %8, %arg6, 0] [1, 1, %18, 64] [1, 1, 1, 1] : tensor<?x?x?x64xf16> to tensor<?x64xf16>
        %cst_20 = arith.constant 0.000000e+00 : f16
        %c0_21 = arith.constant 0 : index
        %dim_22 = tensor.dim %extracted_slice_19, %c0_21 : tensor<?x64xf16>
        %20 = affine.apply #map1(%dim_22)
        %padded_23 = tensor.pad %extracted_slice_19 low[0, 0] high[%20, 0] {
        ^bb0(%arg10: index, %arg11: index):
          tensor.yield %cst_20 : f16
        } : tensor<?x64xf16> to tensor<64x64xf16>
        %new_acc, %new_max, %new_sum = fa.online_attention %padded, %padded_18, %padded_23 into %arg7, %arg8, %arg9   scale 1.250000e-01 : tensor<128x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>, tensor<128xf32>
        scf.yield %new_acc, %new_max, %new_sum : tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>
      }
      %out, %lse = fa.online_attention_finalize %16#0, %16#1, %16#2 : tensor<128x64xf32>, tensor<128xf32> -> tensor<128x64xf16>
      %extracted_slice_12 = tensor.extract_slice %out[0, 0] [%7, 64] [1, 1] : tensor<128x64xf16> to tensor<?x64xf16>
      %extracted_slice_13 = tensor.extract_slice %lse[0] [%7] [1] : tensor<128xf32> to tensor<?xf32>
      scf.forall.in_parallel {
      }
    } {fa.kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 64, warps = 4, stages = 2>, mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
    return %4#0 : tensor<?x?x?x64xf16>
  }

// -----

// Fuzzer finding (ninth session): split partials of a nest over tensor
// arguments (no bufferization op in the input) crashed while the workspace
// was given its bufferization.to_tensor read (the dialect was not loaded:
// now a dependent dialect); the tiles then name the reason.
func.func @split_of_tensor_arguments(%q: tensor<1x1x16x64xbf16>, %k: tensor<1x1x15x64xbf16>, %v: tensor<1x1x15x64xbf16>) -> (tensor<1x1x16x64xbf16>, tensor<1x1x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %po = tensor.empty() : tensor<1x2x16x64xf32>
  %pl = tensor.empty() : tensor<1x2x16xf32>
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: K/V tiles must be slices of memrefs (through bufferization.to_tensor) at the loop's key offset}}
  %r:2 = scf.forall (%b, %h, %x) in (1, 1, 2) shared_outs(%o = %po, %l = %pl) -> (tensor<1x2x16x64xf32>, tensor<1x2x16xf32>) {
    %qs = tensor.extract_slice %q[0, 0, 0, 0] [1, 1, 16, 64] [1, 1, 1, 1] : tensor<1x1x16x64xbf16> to tensor<16x64xbf16>
    %e = tensor.empty() : tensor<16x64xf32>
    %acc0 = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
    %e1 = tensor.empty() : tensor<16xf32>
    %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
    %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
    %st:3 = scf.for %k0 = %c0 to %c15 step %c16 iter_args(%acc = %acc0, %m = %m0, %s = %s0) -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
      %ks = tensor.extract_slice %k[0, 0, 0, 0] [1, 1, 15, 64] [1, 1, 1, 1] : tensor<1x1x15x64xbf16> to tensor<15x64xbf16>
      %vs = tensor.extract_slice %v[0, 0, 0, 0] [1, 1, 15, 64] [1, 1, 1, 1] : tensor<1x1x15x64xbf16> to tensor<15x64xbf16>
      %kt = tensor.pad %ks low[0, 0] high[1, 0] {
      ^bb0(%i: index, %j: index):
        %p = arith.constant 0.000000e+00 : bf16
        tensor.yield %p : bf16
      } : tensor<15x64xbf16> to tensor<16x64xbf16>
      %vt = tensor.pad %vs low[0, 0] high[1, 0] {
      ^bb0(%i: index, %j: index):
        %p = arith.constant 0.000000e+00 : bf16
        tensor.yield %p : bf16
      } : tensor<15x64xbf16> to tensor<16x64xbf16>
      %na, %nm, %ns = fa.online_attention %qs, %kt, %vt into %acc, %m, %s masked(%c0, %k0, %c16, %c15) scale 1.250000e-01 : tensor<16x64xbf16>, tensor<16x64xbf16>, tensor<16x64xbf16> -> tensor<16x64xf32>, tensor<16xf32>
      scf.yield %na, %nm, %ns : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
    }
    %out, %lse = fa.online_attention_finalize %st#0, %st#1, %st#2 : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %o[0, %x, 0, 0] [1, 1, 16, 64] [1, 1, 1, 1] : tensor<16x64xf32> into tensor<1x2x16x64xf32>
      tensor.parallel_insert_slice %lse into %l[0, %x, 0] [1, 1, 16] [1, 1, 1] : tensor<16xf32> into tensor<1x2x16xf32>
    }
  } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
  %eo = tensor.expand_shape %r#0 [[0], [1, 2], [3], [4]] output_shape [1, 1, 2, 16, 64] : tensor<1x2x16x64xf32> into tensor<1x1x2x16x64xf32>
  %el = tensor.expand_shape %r#1 [[0], [1, 2], [3]] output_shape [1, 1, 2, 16] : tensor<1x2x16xf32> into tensor<1x1x2x16xf32>
  %mo, %ml = fa.attention_merge_splits %eo, %el : tensor<1x1x2x16x64xf32>, tensor<1x1x2x16xf32> -> tensor<1x1x16x64xbf16>, tensor<1x1x16xf32>
  return %mo, %ml : tensor<1x1x16x64xbf16>, tensor<1x1x16xf32>
}
