// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-convert-tiled-attention-to-gpu --verify-diagnostics
// The same diagnostics after fa-specialize-masks (which nests a mask_mod's
// steps in per-block scf.if):
// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-convert-tiled-attention-to-gpu --verify-diagnostics

// Score and mask modifiers reach the tile step (fa-tile-attention carries
// them); the kernels read the captures from memrefs, and inline arith and
// math ops only.
func.func @score_mod(%q: memref<1x2x128x64xf16>, %o: memref<1x2x128x64xf16>,
                     %l: memref<1x2x128xf32>, %slopes: tensor<2xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: the captures of score_mod and mask_mod must be memrefs (through bufferization.to_tensor)}}
  %out, %lse = fa.attention %qt, %qt, %qt captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<2xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %r = arith.addf %s, %slope : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>,
         tensor<2xf32>) -> (tensor<1x2x128x64xf16>, tensor<1x2x128xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<1x2x128x64xf16>, memref<1x2x128x64xf16>) -> ()
  bufferization.materialize_in_destination %lse in restrict writable %l : (tensor<1x2x128xf32>, memref<1x2x128xf32>) -> ()
  return
}

// -----

// A mask_mod with an op the kernels do not inline (after fa-specialize-masks
// too: its steps nested in scf.if).
func.func @mask_mod(%q: memref<1x2x128x64xf16>, %o: memref<1x2x128x64xf16>,
                    %l: memref<1x2x128xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: the kernels inline arith and math ops and reads of the captures (tensor.extract, tensor.dim) in score_mod and mask_mod, not affine.apply}}
  %out, %lse = fa.attention %qt, %qt, %qt
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %c16 = arith.constant 16 : index
        %half = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%j)
        %v = arith.cmpi ult, %half, %c16 : index
        fa.yield %v : i1
      }
      : (tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>)
      -> (tensor<1x2x128x64xf16>, tensor<1x2x128xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<1x2x128x64xf16>, memref<1x2x128x64xf16>) -> ()
  bufferization.materialize_in_destination %lse in restrict writable %l : (tensor<1x2x128xf32>, memref<1x2x128xf32>) -> ()
  return
}
