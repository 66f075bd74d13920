// No GPU kernel computes score_mod or mask_mod yet: fa-compile refuses the
// op with a precise error rather than compile it without its modifier.
// RUN: not fa-compile %s --chip=sm_80 -o %t 2>&1 | FileCheck %s
// CHECK: error: 'fa.attention' op fa-compile: no GPU kernel computes score_mod or mask_mod yet (the fa-reference-cpu pipeline lowers them)

func.func @fa_fwd(%q: memref<1x2x128x64xf16>, %out: memref<1x2x128x64xf16>, %lse: memref<1x2x128xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  %o, %l = fa.attention %qt, %qt, %qt
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : (tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>)
      -> (tensor<1x2x128x64xf16>, tensor<1x2x128xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<1x2x128x64xf16>, memref<1x2x128x64xf16>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<1x2x128xf32>, memref<1x2x128xf32>) -> ()
  return
}
