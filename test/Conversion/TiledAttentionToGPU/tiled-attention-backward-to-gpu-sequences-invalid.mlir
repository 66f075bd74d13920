// RUN: fa-opt %s --split-input-file --fa-convert-tiled-attention-backward-to-gpu -verify-diagnostics

// Packed sequences: the rows a step covers end at its sequence's end, which
// only a masked step's positions say. (The nest of fa-tile-attention-backward
// on fa.attention_varlen_backward, block-q = block-kv = 16, its step's
// masked(...) positions removed.)

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0) -> (-d0 + 16)>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @unmasked(%arg0: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg1: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg2: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg3: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg4: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg5: memref<2x?xf32, strided<[?, 1], offset: ?>>, %arg6: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg7: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg8: memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>, %arg9: memref<?xi32>, %arg10: memref<?xi32>, %arg11: index, %arg12: index) {
    %0 = bufferization.to_tensor %arg0 restrict : memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x16xf16>
    %1 = bufferization.to_tensor %arg1 restrict : memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x16xf16>
    %2 = bufferization.to_tensor %arg2 restrict : memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x16xf16>
    %3 = bufferization.to_tensor %arg3 restrict : memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x16xf16>
    %4 = bufferization.to_tensor %arg4 restrict : memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x16xf16>
    %5 = bufferization.to_tensor %arg5 restrict : memref<2x?xf32, strided<[?, 1], offset: ?>> to tensor<2x?xf32>
    %6 = bufferization.to_tensor %arg9 restrict : memref<?xi32> to tensor<?xi32>
    %7 = bufferization.to_tensor %arg10 restrict : memref<?xi32> to tensor<?xi32>
    %cst = arith.constant 2.500000e-01 : f32
    %c1 = arith.constant 1 : index
    %dim = tensor.dim %3, %c1 : tensor<2x?x16xf16>
    %8 = tensor.empty(%dim) : tensor<2x?xf32>
    %cst_0 = arith.constant 0.000000e+00 : f32
    %9 = linalg.fill ins(%cst_0 : f32) outs(%8 : tensor<2x?xf32>) -> tensor<2x?xf32>
    %10 = linalg.generic {indexing_maps = [#map, #map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%4, %3 : tensor<2x?x16xf16>, tensor<2x?x16xf16>) outs(%9 : tensor<2x?xf32>) {
    ^bb0(%in: f16, %in_6: f16, %out: f32):
      %22 = arith.extf %in_6 : f16 to f32
      %23 = arith.extf %in : f16 to f32
      %24 = arith.mulf %23, %22 : f32
      %25 = arith.addf %out, %24 : f32
      linalg.yield %25 : f32
    } -> tensor<2x?xf32>
    %c0 = arith.constant 0 : index
    %dim_1 = tensor.dim %0, %c1 : tensor<2x?x16xf16>
    %11 = tensor.empty(%dim_1) : tensor<2x?x16xf16>
    %cst_2 = arith.constant 0.000000e+00 : f16
    %12 = linalg.fill ins(%cst_2 : f16) outs(%11 : tensor<2x?x16xf16>) -> tensor<2x?x16xf16>
    %dim_3 = tensor.dim %1, %c1 : tensor<2x?x16xf16>
    %13 = tensor.empty(%dim_3) : tensor<2x?x16xf16>
    %14 = linalg.fill ins(%cst_2 : f16) outs(%13 : tensor<2x?x16xf16>) -> tensor<2x?x16xf16>
    %dim_4 = tensor.dim %2, %c1 : tensor<2x?x16xf16>
    %15 = tensor.empty(%dim_4) : tensor<2x?x16xf16>
    %16 = linalg.fill ins(%cst_2 : f16) outs(%15 : tensor<2x?x16xf16>) -> tensor<2x?x16xf16>
    %dim_5 = tensor.dim %6, %c0 : tensor<?xi32>
    %17 = arith.subi %dim_5, %c1 : index
    %c16 = arith.constant 16 : index
    %18 = arith.ceildivui %arg12, %c16 : index
    %19 = arith.ceildivui %arg11, %c16 : index
    %20 = arith.muli %19, %c16 : index
    // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: a step of packed sequences must be masked (its lengths bound the rows)}}
    %21:3 = scf.forall (%arg13, %arg14) in (%17, 2) shared_outs(%arg15 = %12, %arg16 = %14, %arg17 = %16) -> (tensor<2x?x16xf16>, tensor<2x?x16xf16>, tensor<2x?x16xf16>) {
      %22 = arith.addi %arg13, %c1 : index
      %extracted = tensor.extract %6[%arg13] : tensor<?xi32>
      %23 = arith.index_cast %extracted : i32 to index
      %extracted_6 = tensor.extract %7[%arg13] : tensor<?xi32>
      %24 = arith.index_cast %extracted_6 : i32 to index
      %extracted_7 = tensor.extract %6[%22] : tensor<?xi32>
      %25 = arith.index_cast %extracted_7 : i32 to index
      %26 = arith.subi %25, %23 : index
      %extracted_8 = tensor.extract %7[%22] : tensor<?xi32>
      %27 = arith.index_cast %extracted_8 : i32 to index
      %28 = arith.subi %27, %24 : index
      %29 = arith.ceildivsi %26, %c16 : index
      %30 = tensor.empty(%20) : tensor<1x?x16xf32>
      %31 = linalg.fill ins(%cst_0 : f32) outs(%30 : tensor<1x?x16xf32>) -> tensor<1x?x16xf32>
      %extracted_slice = tensor.extract_slice %arg16[%arg14, %24, 0] [1, %28, 16] [1, 1, 1] : tensor<2x?x16xf16> to tensor<?x16xf16>
      %extracted_slice_9 = tensor.extract_slice %arg17[%arg14, %24, 0] [1, %28, 16] [1, 1, 1] : tensor<2x?x16xf16> to tensor<?x16xf16>
      %32:3 = scf.for %arg18 = %c0 to %18 step %c1 iter_args(%arg19 = %31, %arg20 = %extracted_slice, %arg21 = %extracted_slice_9) -> (tensor<1x?x16xf32>, tensor<?x16xf16>, tensor<?x16xf16>) {
        %36 = arith.muli %arg18, %c16 : index
        %37 = arith.subi %28, %36 : index
        %38 = arith.minsi %c16, %37 : index
        %39 = arith.maxsi %38, %c0 : index
        %40 = arith.addi %24, %36 : index
        %extracted_slice_12 = tensor.extract_slice %1[%arg14, %40, 0] [1, %39, 16] [1, 1, 1] : tensor<2x?x16xf16> to tensor<?x16xf16>
        %dim_13 = tensor.dim %extracted_slice_12, %c0 : tensor<?x16xf16>
        %41 = affine.apply #map2(%dim_13)
        %padded = tensor.pad %extracted_slice_12 low[0, 0] high[%41, 0] {
        ^bb0(%arg22: index, %arg23: index):
          tensor.yield %cst_2 : f16
        } : tensor<?x16xf16> to tensor<16x16xf16>
        %extracted_slice_14 = tensor.extract_slice %2[%arg14, %40, 0] [1, %39, 16] [1, 1, 1] : tensor<2x?x16xf16> to tensor<?x16xf16>
        %dim_15 = tensor.dim %extracted_slice_14, %c0 : tensor<?x16xf16>
        %42 = affine.apply #map2(%dim_15)
        %padded_16 = tensor.pad %extracted_slice_14 low[0, 0] high[%42, 0] {
        ^bb0(%arg22: index, %arg23: index):
          tensor.yield %cst_2 : f16
        } : tensor<?x16xf16> to tensor<16x16xf16>
        %43 = arith.cmpi sgt, %39, %c0 : index
        %44 = arith.select %43, %29, %c0 : index
        %45 = tensor.empty() : tensor<16x16xf32>
        %46 = linalg.fill ins(%cst_0 : f32) outs(%45 : tensor<16x16xf32>) -> tensor<16x16xf32>
        %47 = arith.muli %arg14, %c1 : index
        %48:3 = scf.for %arg22 = %c0 to %c1 step %c1 iter_args(%arg23 = %46, %arg24 = %46, %arg25 = %arg19) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<1x?x16xf32>) {
          %52 = arith.addi %47, %arg22 : index
          %53:3 = scf.for %arg26 = %c0 to %44 step %c1 iter_args(%arg27 = %arg23, %arg28 = %arg24, %arg29 = %arg25) -> (tensor<16x16xf32>, tensor<16x16xf32>, tensor<1x?x16xf32>) {
            %54 = arith.muli %arg26, %c16 : index
            %55 = arith.subi %26, %54 : index
            %56 = arith.minsi %c16, %55 : index
            %57 = arith.addi %23, %54 : index
            %extracted_slice_20 = tensor.extract_slice %0[%52, %57, 0] [1, %56, 16] [1, 1, 1] : tensor<2x?x16xf16> to tensor<?x16xf16>
            %dim_21 = tensor.dim %extracted_slice_20, %c0 : tensor<?x16xf16>
            %58 = affine.apply #map2(%dim_21)
            %padded_22 = tensor.pad %extracted_slice_20 low[0, 0] high[%58, 0] {
            ^bb0(%arg30: index, %arg31: index):
              tensor.yield %cst_2 : f16
            } : tensor<?x16xf16> to tensor<16x16xf16>
            %extracted_slice_23 = tensor.extract_slice %4[%52, %57, 0] [1, %56, 16] [1, 1, 1] : tensor<2x?x16xf16> to tensor<?x16xf16>
            %dim_24 = tensor.dim %extracted_slice_23, %c0 : tensor<?x16xf16>
            %59 = affine.apply #map2(%dim_24)
            %padded_25 = tensor.pad %extracted_slice_23 low[0, 0] high[%59, 0] {
            ^bb0(%arg30: index, %arg31: index):
              tensor.yield %cst_2 : f16
            } : tensor<?x16xf16> to tensor<16x16xf16>
            %extracted_slice_26 = tensor.extract_slice %5[%52, %57] [1, %56] [1, 1] : tensor<2x?xf32> to tensor<?xf32>
            %cst_27 = arith.constant 0x7F800000 : f32
            %dim_28 = tensor.dim %extracted_slice_26, %c0 : tensor<?xf32>
            %60 = affine.apply #map2(%dim_28)
            %padded_29 = tensor.pad %extracted_slice_26 low[0] high[%60] {
            ^bb0(%arg30: index):
              tensor.yield %cst_27 : f32
            } : tensor<?xf32> to tensor<16xf32>
            %extracted_slice_30 = tensor.extract_slice %10[%52, %57] [1, %56] [1, 1] : tensor<2x?xf32> to tensor<?xf32>
            %dim_31 = tensor.dim %extracted_slice_30, %c0 : tensor<?xf32>
            %61 = affine.apply #map2(%dim_31)
            %padded_32 = tensor.pad %extracted_slice_30 low[0] high[%61] {
            ^bb0(%arg30: index):
              tensor.yield %cst_0 : f32
            } : tensor<?xf32> to tensor<16xf32>
            %extracted_slice_33 = tensor.extract_slice %arg29[%arg22, %54, 0] [1, 16, 16] [1, 1, 1] : tensor<1x?x16xf32> to tensor<16x16xf32>
            %new_dk, %new_dv, %new_dq = fa.attention_backward_step %padded_22, %padded, %padded_16, %padded_25, %padded_29, %padded_32 dkv(%arg27, %arg28) dq(%extracted_slice_33) scale 2.500000e-01 : tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf16>, tensor<16xf32> -> tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
            %inserted_slice_34 = tensor.insert_slice %new_dq into %arg29[%arg22, %54, 0] [1, 16, 16] [1, 1, 1] : tensor<16x16xf32> into tensor<1x?x16xf32>
            scf.yield %new_dk, %new_dv, %inserted_slice_34 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<1x?x16xf32>
          }
          scf.yield %53#0, %53#1, %53#2 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<1x?x16xf32>
        }
        %49 = tensor.empty() : tensor<16x16xf16>
        %50 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel"]} ins(%48#0 : tensor<16x16xf32>) outs(%49 : tensor<16x16xf16>) {
        ^bb0(%in: f32, %out: f16):
          %52 = arith.mulf %in, %cst : f32
          %53 = arith.truncf %52 : f32 to f16
          linalg.yield %53 : f16
        } -> tensor<16x16xf16>
        %extracted_slice_17 = tensor.extract_slice %50[0, 0] [%39, 16] [1, 1] : tensor<16x16xf16> to tensor<?x16xf16>
        %inserted_slice = tensor.insert_slice %extracted_slice_17 into %arg20[%36, 0] [%39, 16] [1, 1] : tensor<?x16xf16> into tensor<?x16xf16>
        %51 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel"]} ins(%48#1 : tensor<16x16xf32>) outs(%49 : tensor<16x16xf16>) {
        ^bb0(%in: f32, %out: f16):
          %52 = arith.truncf %in : f32 to f16
          linalg.yield %52 : f16
        } -> tensor<16x16xf16>
        %extracted_slice_18 = tensor.extract_slice %51[0, 0] [%39, 16] [1, 1] : tensor<16x16xf16> to tensor<?x16xf16>
        %inserted_slice_19 = tensor.insert_slice %extracted_slice_18 into %arg21[%36, 0] [%39, 16] [1, 1] : tensor<?x16xf16> into tensor<?x16xf16>
        scf.yield %48#2, %inserted_slice, %inserted_slice_19 : tensor<1x?x16xf32>, tensor<?x16xf16>, tensor<?x16xf16>
      } {fa.dq_accumulation}
      %dim_10 = tensor.dim %32#0, %c1 : tensor<1x?x16xf32>
      %33 = tensor.empty(%dim_10) : tensor<1x?x16xf16>
      %34 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%32#0 : tensor<1x?x16xf32>) outs(%33 : tensor<1x?x16xf16>) {
      ^bb0(%in: f32, %out: f16):
        %36 = arith.mulf %in, %cst : f32
        %37 = arith.truncf %36 : f32 to f16
        linalg.yield %37 : f16
      } -> tensor<1x?x16xf16>
      %extracted_slice_11 = tensor.extract_slice %34[0, 0, 0] [1, %26, 16] [1, 1, 1] : tensor<1x?x16xf16> to tensor<1x?x16xf16>
      %35 = arith.muli %arg14, %c1 : index
      scf.forall.in_parallel {
        tensor.parallel_insert_slice %extracted_slice_11 into %arg15[%35, %23, 0] [1, %26, 16] [1, 1, 1] : tensor<1x?x16xf16> into tensor<2x?x16xf16>
        tensor.parallel_insert_slice %32#1 into %arg16[%arg14, %24, 0] [1, %28, 16] [1, 1, 1] : tensor<?x16xf16> into tensor<2x?x16xf16>
        tensor.parallel_insert_slice %32#2 into %arg17[%arg14, %24, 0] [1, %28, 16] [1, 1, 1] : tensor<?x16xf16> into tensor<2x?x16xf16>
      }
    } {mapping = [#gpu.block<z>, #gpu.block<y>]}
    bufferization.materialize_in_destination %21#0 in restrict writable %arg6 : (tensor<2x?x16xf16>, memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>) -> ()
    bufferization.materialize_in_destination %21#1 in restrict writable %arg7 : (tensor<2x?x16xf16>, memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>) -> ()
    bufferization.materialize_in_destination %21#2 in restrict writable %arg8 : (tensor<2x?x16xf16>, memref<2x?x16xf16, strided<[?, ?, 1], offset: ?>>) -> ()
    return
  }
}
