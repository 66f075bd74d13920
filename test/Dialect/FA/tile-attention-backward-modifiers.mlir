// RUN: fa-opt %s --split-input-file --fa-differentiate-score-mod --fa-tile-attention-backward="block-q=16 block-kv=16" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tiled-attention="block-q=16 block-kv=16" | FileCheck %s --check-prefix=LINALG

// fa-tile-attention-backward carries the modifiers into every
// fa.attention_backward_step: the regions (with the score_mod's derivative
// score_mod_grad) cloned, the captures passed on, the tile's batch and
// query head as `at(...)`, its positions as `masked(...)`.

// A mask_mod bounds each key block's query-block loop to the blocks it may
// see for some head of the group (a scan of its block verdicts in front of
// the loop: by chunks of 8 blocks, then block by block at both ends), and
// is decided per (query block, key block) as in fa-specialize-masks: a
// block it may not see keeps the accumulators, one it cannot hide runs the
// step without it.
// CHECK-LABEL: func.func @mask_mod
// CHECK:         scf.for {{.*}} -> (index, index) {
// CHECK:         %[[FIRST:.*]] = scf.for {{.*}} -> (index) {
// CHECK:         %[[LAST:.*]] = scf.for {{.*}} -> (index) {
// CHECK:         %[[BEGIN:.*]] = arith.select {{.*}}, %[[FIRST]] : index
// CHECK:         %[[END:.*]] = arith.select {{.*}}, %[[LAST]] : index
// CHECK:         %[[LO:.*]] = arith.divui %[[BEGIN]], %{{.*}} : index
// CHECK:         %[[HI:.*]] = arith.ceildivui %{{.*}}, %{{.*}} : index
// CHECK:         scf.for %{{.*}} = %[[LO]] to %[[HI]] step
// CHECK:         %[[HIDE:.*]] = arith.ori
// CHECK:         %[[SEE:.*]] = arith.ori
// CHECK:         scf.if %[[SEE]] -> (
// CHECK:           scf.if %[[HIDE]] -> (
// CHECK:             fa.attention_backward_step {{.*}} masked({{.*}}) at({{.*}}) scale {{.*}} mask_mod(
// CHECK:               arith.cmpi ule
// CHECK:           } else {
// CHECK-NOT:         mask_mod
// CHECK:             fa.attention_backward_step {{.*}} masked({{.*}}) scale {{.*}} : tensor
// CHECK:         } else {
// CHECK-NEXT:      scf.yield %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
// The decomposition ANDs it into the visibility of the recomputed P.
// LINALG-LABEL: func.func @mask_mod
// LINALG-NOT:     fa.attention_backward_step
// LINALG:         arith.cmpi ule
// LINALG:         arith.andi
func.func @mask_mod(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}

// -----

// A score_mod with its derivative (fa-differentiate-score-mod; the tiled
// pipeline runs it first): both regions in the step, the derivative
// multiplying dS after the decomposition.
// CHECK-LABEL: func.func @score_mod
// CHECK:         fa.attention_backward_step {{.*}} at({{.*}}) {{.*}} score_mod(
// CHECK:         score_mod_grad(
// LINALG-LABEL: func.func @score_mod
// LINALG-NOT:     fa.attention_backward_step
// LINALG:         math.tanh
func.func @score_mod(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %t = math.tanh %s : f32
        fa.yield %t : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}

// -----

// Deterministic dQ: each query block's key loop is bounded the same way
// (the scan along the keys, at the block's query head).
// CHECK-LABEL: func.func @mask_mod_deterministic
// CHECK:         scf.forall
// CHECK:         scf.forall
// CHECK:         scf.for {{.*}} -> (index, index) {
// CHECK:         %[[LO:.*]] = arith.divui
// CHECK:         %[[HI:.*]] = arith.ceildivui
// CHECK:         scf.for %{{.*}} = %[[LO]] to %[[HI]] step {{.*}} -> (tensor<16x32xf32>)
// CHECK:           fa.attention_backward_step {{.*}} dq({{.*}}) masked({{.*}}) at({{.*}}) scale {{.*}} mask_mod(
func.func @mask_mod_deterministic(%q: tensor<1x2x64x32xf32>, %lse: tensor<1x2x64xf32>)
    -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q deterministic
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>, tensor<1x2x64x32xf32>) -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>
}
