// RUN: fa-opt %s --split-input-file --fa-split-kv="splits=2" -verify-diagnostics

// A loop nest that is not fa-tile-attention's (here: a 2-d forall) is
// refused, not skipped: the partials would be missing.

func.func @not_tiled(%acc: tensor<16x64xf32>, %m: tensor<16xf32>, %s: tensor<16xf32>) -> tensor<4x16x64xf16> {
  %o0 = tensor.empty() : tensor<4x16x64xf16>
  // expected-error @+1 {{fa-split-kv: expected the loop nest of fa-tile-attention}}
  %r = scf.forall (%i, %j) in (4, 1) shared_outs(%o = %o0) -> (tensor<4x16x64xf16>) {
    %out, %lse = fa.online_attention_finalize %acc, %m, %s : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %o[%i, 0, 0] [1, 16, 64] [1, 1, 1] : tensor<16x64xf16> into tensor<4x16x64xf16>
    }
  }
  return %r : tensor<4x16x64xf16>
}

// -----

// A query block whose steps carry a score_mod or mask_mod is refused with
// its own message: no kernel runs the modifiers, the tiled CPU pipeline runs
// them unsplit.
func.func @modifiers(%q: tensor<1x1x16x64xf16>, %acc: tensor<16x64xf32>, %m: tensor<16xf32>) -> (tensor<1x1x16x64xf16>, tensor<1x1x16xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %oi = tensor.empty() : tensor<1x1x16x64xf16>
  %li = tensor.empty() : tensor<1x1x16xf32>
  %qt = tensor.extract_slice %q[0, 0, 0, 0] [1, 1, 16, 64] [1, 1, 1, 1] : tensor<1x1x16x64xf16> to tensor<16x64xf16>
  // expected-error @below {{fa-split-kv: a query block with score_mod or mask_mod is not split (no kernel runs the modifiers yet; the tiled CPU pipeline runs them unsplit)}}
  %r:2 = scf.forall (%b, %h, %qb) in (1, 1, 1) shared_outs(%o = %oi, %l = %li) -> (tensor<1x1x16x64xf16>, tensor<1x1x16xf32>) {
    %s:3 = scf.for %k0 = %c0 to %c16 step %c16 iter_args(%a = %acc, %mm = %m, %ss = %m) -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
      %n:3 = fa.online_attention %qt, %qt, %qt into %a, %mm, %ss masked(%c0, %k0, %c16, %c16) at(%b, %h) scale 0.125
          mask_mod(%bb: index, %hh: index, %i: index, %j: index) {
            %v = arith.cmpi ule, %j, %i : index
            fa.yield %v : i1
          } : tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x64xf16> -> tensor<16x64xf32>, tensor<16xf32>
      scf.yield %n#0, %n#1, %n#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
    }
    %out, %lse = fa.online_attention_finalize %s#0, %s#1, %s#2 : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %o[%b, %h, 0, 0] [1, 1, 16, 64] [1, 1, 1, 1] : tensor<16x64xf16> into tensor<1x1x16x64xf16>
      tensor.parallel_insert_slice %lse into %l[%b, %h, 0] [1, 1, 16] [1, 1, 1] : tensor<16xf32> into tensor<1x1x16xf32>
    }
  }
  return %r#0, %r#1 : tensor<1x1x16x64xf16>, tensor<1x1x16xf32>
}
