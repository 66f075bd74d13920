// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=3" 2>&1 | FileCheck %s --check-prefix=WARPS
// WARPS: error: fa-convert-tiled-attention-backward-to-gpu: block-kv must be a multiple of 16 * warps
// RUN: not fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=HUGEWARPS
// HUGEWARPS: error: fa-convert-tiled-attention-backward-to-gpu: warps must be in [1, 32], got 9223372036854775807
// A fixed dQ order (a deterministic op tiled for the warp_specialized
// schedule) needs that kernel's dQ warp: the mma.sync kernels refuse it.
// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse | sed 's/{fa.dq_accumulation}/{fa.dq_accumulation = "ordered"}/' | not fa-opt --split-input-file --fa-convert-tiled-attention-backward-to-gpu 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: error: fa-convert-tiled-attention-backward-to-gpu: a fixed dQ order (fa.dq_accumulation = "ordered") needs the warp_specialized kernel's dQ warp

// The tensor cores take f16 or bf16.
!q = memref<?x?x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf32>
!lt = tensor<?x?x?xf32>
func.func @f32(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: mma.sync needs f16 or bf16 inputs}}
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// Tiles must come from memrefs: a tensor argument has no buffer to read.
!t = tensor<2x2x128x64xf16>
!lt = tensor<2x2x128xf32>
func.func @tensors(%q: !t, %k: !t, %v: !t, %o: !t, %lse: !lt, %do: !t) -> (!t, !t, !t) {
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: the step's tiles must be row slices of memrefs (through bufferization.to_tensor) or of the delta generic}}
  %gq, %gk, %gv = fa.attention_backward %q, %k, %v, %o, %lse, %do : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  return %gq, %gk, %gv : !t, !t, !t
}

// -----

// Valid with the default 4 warps; with warps=3 (second RUN line) the 64-key
// block does not split into 16-row warp tiles.
!q = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>
func.func @warps(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// The fast nest's key-block loop without `fa.dq_accumulation` (the tiled IR
// as fa-tile-attention-backward + cse print it, the marker removed): nothing
// says its iterations may run as concurrent thread blocks adding dQ with
// atomics.
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @unmarked(%arg0: memref<1x1x64x16xf16>, %arg1: memref<1x1x64x16xf16>, %arg2: memref<1x1x64x16xf16>, %arg3: memref<1x1x64x16xf16>, %arg4: memref<1x1x64x16xf16>, %arg5: memref<1x1x64xf32>, %arg6: memref<1x1x64x16xf16>, %arg7: memref<1x1x64x16xf16>, %arg8: memref<1x1x64x16xf16>) {
  %0 = bufferization.to_tensor %arg0 restrict : memref<1x1x64x16xf16> to tensor<1x1x64x16xf16>
  %1 = bufferization.to_tensor %arg1 restrict : memref<1x1x64x16xf16> to tensor<1x1x64x16xf16>
  %2 = bufferization.to_tensor %arg2 restrict : memref<1x1x64x16xf16> to tensor<1x1x64x16xf16>
  %3 = bufferization.to_tensor %arg3 restrict : memref<1x1x64x16xf16> to tensor<1x1x64x16xf16>
  %4 = bufferization.to_tensor %arg4 restrict : memref<1x1x64x16xf16> to tensor<1x1x64x16xf16>
  %5 = bufferization.to_tensor %arg5 restrict : memref<1x1x64xf32> to tensor<1x1x64xf32>
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %6 = tensor.empty() : tensor<1x1x64xf32>
  %cst = arith.constant 0.000000e+00 : f32
  %7 = linalg.fill ins(%cst : f32) outs(%6 : tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
  %8 = linalg.generic {indexing_maps = [#map, #map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%4, %3 : tensor<1x1x64x16xf16>, tensor<1x1x64x16xf16>) outs(%7 : tensor<1x1x64xf32>) {
  ^bb0(%in: f16, %in_0: f16, %out: f32):
    %11 = arith.extf %in_0 : f16 to f32
    %12 = arith.extf %in : f16 to f32
    %13 = arith.mulf %12, %11 : f32
    %14 = arith.addf %out, %13 : f32
    linalg.yield %14 : f32
  } -> tensor<1x1x64xf32>
  %c0 = arith.constant 0 : index
  %9 = tensor.empty() : tensor<1x1x64x16xf16>
  %10:3 = scf.forall (%arg9, %arg10) in (1, 1) shared_outs(%arg11 = %9, %arg12 = %9, %arg13 = %9) -> (tensor<1x1x64x16xf16>, tensor<1x1x64x16xf16>, tensor<1x1x64x16xf16>) {
    %11 = tensor.empty() : tensor<1x64x16xf32>
    %12 = linalg.fill ins(%cst : f32) outs(%11 : tensor<1x64x16xf32>) -> tensor<1x64x16xf32>
    %extracted_slice = tensor.extract_slice %arg12[%arg9, %arg10, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x1x64x16xf16> to tensor<64x16xf16>
    %extracted_slice_0 = tensor.extract_slice %arg13[%arg9, %arg10, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x1x64x16xf16> to tensor<64x16xf16>
    // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: a key-block loop carrying dQ must be marked fa.dq_accumulation}}
    %13:3 = scf.for %arg14 = %c0 to %c1 step %c1 iter_args(%arg15 = %12, %arg16 = %extracted_slice, %arg17 = %extracted_slice_0) -> (tensor<1x64x16xf32>, tensor<64x16xf16>, tensor<64x16xf16>) {
      %17 = arith.muli %arg14, %c64 : index
      %extracted_slice_1 = tensor.extract_slice %1[%arg9, %arg10, %17, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x1x64x16xf16> to tensor<64x16xf16>
      %extracted_slice_2 = tensor.extract_slice %2[%arg9, %arg10, %17, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x1x64x16xf16> to tensor<64x16xf16>
      %18 = tensor.empty() : tensor<64x16xf32>
      %19 = linalg.fill ins(%cst : f32) outs(%18 : tensor<64x16xf32>) -> tensor<64x16xf32>
      %20 = arith.muli %arg10, %c1 : index
      %21:3 = scf.for %arg18 = %c0 to %c1 step %c1 iter_args(%arg19 = %19, %arg20 = %19, %arg21 = %arg15) -> (tensor<64x16xf32>, tensor<64x16xf32>, tensor<1x64x16xf32>) {
        %25 = arith.addi %20, %arg18 : index
        %26:3 = scf.for %arg22 = %c0 to %c1 step %c1 iter_args(%arg23 = %arg19, %arg24 = %arg20, %arg25 = %arg21) -> (tensor<64x16xf32>, tensor<64x16xf32>, tensor<1x64x16xf32>) {
          %27 = arith.muli %arg22, %c64 : index
          %extracted_slice_4 = tensor.extract_slice %0[%arg9, %25, %27, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x1x64x16xf16> to tensor<64x16xf16>
          %extracted_slice_5 = tensor.extract_slice %4[%arg9, %25, %27, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x1x64x16xf16> to tensor<64x16xf16>
          %extracted_slice_6 = tensor.extract_slice %5[%arg9, %25, %27] [1, 1, 64] [1, 1, 1] : tensor<1x1x64xf32> to tensor<64xf32>
          %extracted_slice_7 = tensor.extract_slice %8[%arg9, %25, %27] [1, 1, 64] [1, 1, 1] : tensor<1x1x64xf32> to tensor<64xf32>
          %extracted_slice_8 = tensor.extract_slice %arg25[%arg18, %27, 0] [1, 64, 16] [1, 1, 1] : tensor<1x64x16xf32> to tensor<64x16xf32>
          %new_dk, %new_dv, %new_dq = fa.attention_backward_step %extracted_slice_4, %extracted_slice_1, %extracted_slice_2, %extracted_slice_5, %extracted_slice_6, %extracted_slice_7 dkv(%arg23, %arg24) dq(%extracted_slice_8) scale 2.500000e-01 : tensor<64x16xf16>, tensor<64x16xf16>, tensor<64x16xf16>, tensor<64x16xf16>, tensor<64xf32> -> tensor<64x16xf32>, tensor<64x16xf32>, tensor<64x16xf32>
          %inserted_slice_9 = tensor.insert_slice %new_dq into %arg25[%arg18, %27, 0] [1, 64, 16] [1, 1, 1] : tensor<64x16xf32> into tensor<1x64x16xf32>
          scf.yield %new_dk, %new_dv, %inserted_slice_9 : tensor<64x16xf32>, tensor<64x16xf32>, tensor<1x64x16xf32>
        }
        scf.yield %26#0, %26#1, %26#2 : tensor<64x16xf32>, tensor<64x16xf32>, tensor<1x64x16xf32>
      }
      %22 = tensor.empty() : tensor<64x16xf16>
      %23 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%21#0 : tensor<64x16xf32>) outs(%22 : tensor<64x16xf16>) {
      ^bb0(%in: f32, %out: f16):
        %cst_4 = arith.constant 2.500000e-01 : f32
        %25 = arith.mulf %in, %cst_4 : f32
        %26 = arith.truncf %25 : f32 to f16
        linalg.yield %26 : f16
      } -> tensor<64x16xf16>
      %inserted_slice = tensor.insert_slice %23 into %arg16[%17, 0] [64, 16] [1, 1] : tensor<64x16xf16> into tensor<64x16xf16>
      %24 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]} ins(%21#1 : tensor<64x16xf32>) outs(%22 : tensor<64x16xf16>) {
      ^bb0(%in: f32, %out: f16):
        %25 = arith.truncf %in : f32 to f16
        linalg.yield %25 : f16
      } -> tensor<64x16xf16>
      %inserted_slice_3 = tensor.insert_slice %24 into %arg17[%17, 0] [64, 16] [1, 1] : tensor<64x16xf16> into tensor<64x16xf16>
      scf.yield %21#2, %inserted_slice, %inserted_slice_3 : tensor<1x64x16xf32>, tensor<64x16xf16>, tensor<64x16xf16>
    }
    %14 = tensor.empty() : tensor<1x64x16xf16>
    %15 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%13#0 : tensor<1x64x16xf32>) outs(%14 : tensor<1x64x16xf16>) {
    ^bb0(%in: f32, %out: f16):
      %cst_1 = arith.constant 2.500000e-01 : f32
      %17 = arith.mulf %in, %cst_1 : f32
      %18 = arith.truncf %17 : f32 to f16
      linalg.yield %18 : f16
    } -> tensor<1x64x16xf16>
    %16 = arith.muli %arg10, %c1 : index
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %15 into %arg11[%arg9, %16, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<1x64x16xf16> into tensor<1x1x64x16xf16>
      tensor.parallel_insert_slice %13#1 into %arg12[%arg9, %arg10, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<64x16xf16> into tensor<1x1x64x16xf16>
      tensor.parallel_insert_slice %13#2 into %arg13[%arg9, %arg10, 0, 0] [1, 1, 64, 16] [1, 1, 1, 1] : tensor<64x16xf16> into tensor<1x1x64x16xf16>
    }
  }
  bufferization.materialize_in_destination %10#0 in restrict writable %arg6 : (tensor<1x1x64x16xf16>, memref<1x1x64x16xf16>) -> ()
  bufferization.materialize_in_destination %10#1 in restrict writable %arg7 : (tensor<1x1x64x16xf16>, memref<1x1x64x16xf16>) -> ()
  bufferization.materialize_in_destination %10#2 in restrict writable %arg8 : (tensor<1x1x64x16xf16>, memref<1x1x64x16xf16>) -> ()
  return
}

// -----

// A mask_mod reaches the backward tile steps (fa-tile-attention-backward
// carries it); the kernels inline arith and math ops only: refused, not
// dropped.
!q = memref<1x2x128x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<1x2x128xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<1x2x128x64xf16>
!lt = tensor<1x2x128xf32>
func.func @mask_mod(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: the kernels inline arith and math ops and reads of the captures (tensor.extract, tensor.dim) in score_mod and mask_mod, not affine.apply}}
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %i2 = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%i)
        %vis = arith.cmpi ule, %j, %i2 : index
        fa.yield %vis : i1
      }
      : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}
