// RUN: fa-opt %s --split-input-file --fa-convert-tiled-attention-to-gpu --fa-convert-tiled-attention-backward-to-gpu --verify-diagnostics

// The conversions take each induction variable's block id from the forall's
// #gpu.block mapping (x, y or z, each once); a forall without a mapping must
// have the tiling passes' rank. Anything else is rejected before any IR
// changes. Only the ops the checks reach are spelled out below.

!acc = tensor<64x64xf32>
!row = tensor<64xf32>
!o = tensor<1x1x64x64xf16>
!l = tensor<1x1x64xf32>

func.func @thread_mapping(%acc: !acc, %m: !row, %o: !o, %l: !l) -> (!o, !l) {
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: expected a mapping of distinct #gpu.block<x|y|z>, or none on a 3-d scf.forall over (batch, head, query block)}}
  %r:2 = scf.forall (%b, %h, %x) in (1, 1, 1) shared_outs(%oo = %o, %ll = %l) -> (!o, !l) {
    %out, %lse = fa.online_attention_finalize %acc, %m, %m : !acc, !row -> tensor<64x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %oo[%b, %h, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<64x64xf16> into !o
      tensor.parallel_insert_slice %lse into %ll[%b, %h, 0] [1, 1, 64] [1, 1, 1] : !row into !l
    }
  } {mapping = [#gpu.thread<z>, #gpu.thread<y>, #gpu.thread<x>]}
  return %r#0, %r#1 : !o, !l
}

// -----

!acc = tensor<64x64xf32>
!row = tensor<64xf32>
!o = tensor<1x1x64x64xf16>
!l = tensor<1x1x64xf32>

func.func @linear_block_mapping(%acc: !acc, %m: !row, %o: !o, %l: !l) -> (!o, !l) {
  // expected-error @below {{expected a mapping of distinct #gpu.block<x|y|z>}}
  %r:2 = scf.forall (%b, %h, %x) in (1, 1, 1) shared_outs(%oo = %o, %ll = %l) -> (!o, !l) {
    %out, %lse = fa.online_attention_finalize %acc, %m, %m : !acc, !row -> tensor<64x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %oo[%b, %h, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<64x64xf16> into !o
      tensor.parallel_insert_slice %lse into %ll[%b, %h, 0] [1, 1, 64] [1, 1, 1] : !row into !l
    }
  } {mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return %r#0, %r#1 : !o, !l
}

// -----

!acc = tensor<64x64xf32>
!row = tensor<64xf32>
!o = tensor<1x1x64x64xf16>
!l = tensor<1x1x64xf32>

// Two induction variables on one block id would visit a tile pair twice.
func.func @duplicate_block(%acc: !acc, %m: !row, %o: !o, %l: !l) -> (!o, !l) {
  // expected-error @below {{expected a mapping of distinct #gpu.block<x|y|z>}}
  %r:2 = scf.forall (%b, %h, %x) in (1, 1, 1) shared_outs(%oo = %o, %ll = %l) -> (!o, !l) {
    %out, %lse = fa.online_attention_finalize %acc, %m, %m : !acc, !row -> tensor<64x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %oo[%b, %h, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<64x64xf16> into !o
      tensor.parallel_insert_slice %lse into %ll[%b, %h, 0] [1, 1, 64] [1, 1, 1] : !row into !l
    }
  } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<x>]}
  return %r#0, %r#1 : !o, !l
}

// -----

!acc = tensor<64x64xf32>
!row = tensor<64xf32>
!o = tensor<1x1x64x64xf16>
!l = tensor<1x1x64xf32>

// Without a mapping the dimensions are positional, (batch, head, query
// block): a forall whose unit dimensions were folded away says nothing about
// which ones are left.
func.func @unmapped_2d(%acc: !acc, %m: !row, %o: !o, %l: !l) -> (!o, !l) {
  // expected-error @below {{expected a mapping of distinct #gpu.block<x|y|z>, or none on a 3-d scf.forall over (batch, head, query block)}}
  %r:2 = scf.forall (%h, %x) in (1, 1) shared_outs(%oo = %o, %ll = %l) -> (!o, !l) {
    %out, %lse = fa.online_attention_finalize %acc, %m, %m : !acc, !row -> tensor<64x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %oo[0, %h, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1] : tensor<64x64xf16> into !o
      tensor.parallel_insert_slice %lse into %ll[0, %h, 0] [1, 1, 64] [1, 1, 1] : !row into !l
    }
  }
  return %r#0, %r#1 : !o, !l
}

// -----

!t = tensor<64x64xf16>
!f = tensor<64x64xf32>
!row = tensor<64xf32>
!g = tensor<1x1x64x64xf16>

// The fast backward's key-block loop takes x: the forall around it may not.
func.func @fast_forall_on_x(%q: !t, %lse: !row, %d4: tensor<1x1x64x64xf32>, %init: tensor<1x1x64xf32>, %acc: !f, %out: !g) -> !g {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %delta = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%d4 : tensor<1x1x64x64xf32>) outs(%init : tensor<1x1x64xf32>) {
  ^bb0(%a: f32, %s: f32):
    %sum = arith.addf %a, %s : f32
    linalg.yield %sum : f32
  } -> tensor<1x1x64xf32>
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: expected a mapping of distinct #gpu.block<x|y|z> (x left to a key-block loop), or none on a forall over (batch, kv head[, key block])}}
  %r = scf.forall (%b, %h) in (1, 1) shared_outs(%o = %out) -> (!g) {
    %dt = tensor.extract_slice %delta[%b, %h, 0] [1, 1, 64] [1, 1, 1] : tensor<1x1x64xf32> to !row
    %kl:3 = scf.for %kb = %c0 to %c1 step %c1 iter_args(%dk = %acc, %dv = %acc, %dq = %acc) -> (!f, !f, !f) {
      %hl:3 = scf.for %hh = %c0 to %c1 step %c1 iter_args(%dk1 = %dk, %dv1 = %dv, %dq1 = %dq) -> (!f, !f, !f) {
        %ql:3 = scf.for %qb = %c0 to %c1 step %c1 iter_args(%dk2 = %dk1, %dv2 = %dv1, %dq2 = %dq1) -> (!f, !f, !f) {
          %a, %bb, %c = fa.attention_backward_step %q, %q, %q, %q, %lse, %dt dkv(%dk2, %dv2) dq(%dq2) scale 0.125
              : !t, !t, !t, !t, !row -> !f, !f, !f
          scf.yield %a, %bb, %c : !f, !f, !f
        }
        scf.yield %ql#0, %ql#1, %ql#2 : !f, !f, !f
      }
      scf.yield %hl#0, %hl#1, %hl#2 : !f, !f, !f
    } {fa.dq_accumulation}
    scf.forall.in_parallel {
    }
  } {mapping = [#gpu.block<z>, #gpu.block<x>]}
  return %r : !g
}

// -----

!t = tensor<64x64xf16>
!f = tensor<64x64xf32>
!row = tensor<64xf32>
!g = tensor<1x1x64x64xf16>

func.func @deterministic_dq_thread_mapping(%q: !t, %lse: !row, %d4: tensor<1x1x64x64xf32>, %init: tensor<1x1x64xf32>, %acc: !f, %out: !g) -> !g {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %delta = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%d4 : tensor<1x1x64x64xf32>) outs(%init : tensor<1x1x64xf32>) {
  ^bb0(%a: f32, %s: f32):
    %sum = arith.addf %a, %s : f32
    linalg.yield %sum : f32
  } -> tensor<1x1x64xf32>
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: expected a mapping of distinct #gpu.block<x|y|z>, or none on a 3-d forall over (batch, query head, query block)}}
  %r = scf.forall (%b, %h, %x) in (1, 1, 1) shared_outs(%o = %out) -> (!g) {
    %dt = tensor.extract_slice %delta[%b, %h, 0] [1, 1, 64] [1, 1, 1] : tensor<1x1x64xf32> to !row
    %kl = scf.for %kb = %c0 to %c1 step %c1 iter_args(%dq = %acc) -> (!f) {
      %s = fa.attention_backward_step %q, %q, %q, %q, %lse, %dt dq(%dq) scale 0.125
          : !t, !t, !t, !t, !row -> !f
      scf.yield %s : !f
    }
    scf.forall.in_parallel {
    }
  } {mapping = [#gpu.thread<z>, #gpu.thread<y>, #gpu.thread<x>]}
  return %r : !g
}
