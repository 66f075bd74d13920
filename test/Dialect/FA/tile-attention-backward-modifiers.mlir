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

// -----

// query_ranges (a document mask, GQA 2:1): per key block the query blocks of
// the union of the ranges of the key groups it spans (groups of 8 keys: two
// per 16-key block), read at the block's batch and kv head.
// CHECK-LABEL: func.func @query_ranges
// CHECK:         scf.forall (%[[B:.*]], %[[KVH:.*]]) in
// CHECK:         scf.for %[[KB:[a-z0-9_]+]] = {{.*}} -> (tensor<2x64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>)
// CHECK:           %[[KS:.*]] = arith.muli %[[KB]], %c16
// CHECK:           arith.divui %[[KS]], %c8
// CHECK:           tensor.extract %{{.*}}[%[[B]], %[[KVH]], %{{.*}}, %c0{{.*}}] : tensor<1x1x8x2xi32>
// CHECK:           tensor.extract %{{.*}}[%[[B]], %[[KVH]], %{{.*}}, %c1{{.*}}] : tensor<1x1x8x2xi32>
// CHECK:           tensor.extract %{{.*}}[%[[B]], %[[KVH]], %{{.*}}, %c0{{.*}}] : tensor<1x1x8x2xi32>
// CHECK:           tensor.extract %{{.*}}[%[[B]], %[[KVH]], %{{.*}}, %c1{{.*}}] : tensor<1x1x8x2xi32>
// CHECK-NOT:       tensor<1x1x8x2xi32>
// CHECK:           %[[LO:.*]] = arith.maxsi %c0{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %[[HI0:.*]] = arith.minsi %c4{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %[[HI:.*]] = arith.maxsi %[[HI0]], %[[LO]]
// CHECK:           scf.for
// CHECK:             scf.for %{{.*}} = %[[LO]] to %[[HI]]
// CHECK:               fa.attention_backward_step
func.func @query_ranges(%q: tensor<1x2x64x32xf32>, %k: tensor<1x1x64x32xf32>,
                        %lse: tensor<1x2x64xf32>, %r: tensor<1x1x8x2xi32>,
                        %doc: tensor<64xi32>)
    -> (tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %k, %q, %lse, %q
      query_ranges(%r rows 8) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<64xi32>) {
        %di = tensor.extract %d[%i] : tensor<64xi32>
        %dj = tensor.extract %d[%j] : tensor<64xi32>
        %v = arith.cmpi eq, %di, %dj : i32
        fa.yield %v : i1
      }
      : (tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>, tensor<1x2x64x32xf32>, tensor<1x1x8x2xi32>, tensor<64xi32>) -> (tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>
}

// -----

// Deterministic: the dK / dV nest reads query_ranges as above, the dQ nest
// the forward's key_ranges (groups of 32 query rows: one per 16-row block)
// at its batch and query head.
// CHECK-LABEL: func.func @key_ranges_deterministic
// CHECK:         scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in
// CHECK:           tensor.extract %{{.*}} : tensor<1x1x4x2xi32>
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK:           tensor.extract %{{.*}}[%[[B]], %[[H]], %{{.*}}, %c0{{.*}}] : tensor<1x2x2x4xi32>
// CHECK:           tensor.extract %{{.*}}[%[[B]], %[[H]], %{{.*}}, %c1{{.*}}] : tensor<1x2x2x4xi32>
// CHECK:           %[[LO:.*]] = arith.maxsi %c0{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %[[HI0:.*]] = arith.minsi %c4{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %[[HI:.*]] = arith.maxsi %[[HI0]], %[[LO]]
// CHECK:           scf.for %{{.*}} = %[[LO]] to %[[HI]] step {{.*}} -> (tensor<16x32xf32>)
// CHECK:             fa.attention_backward_step {{.*}} dq(
func.func @key_ranges_deterministic(%q: tensor<1x2x64x32xf32>, %k: tensor<1x1x64x32xf32>,
                                    %lse: tensor<1x2x64xf32>, %qr: tensor<1x1x4x2xi32>,
                                    %kr: tensor<1x2x2x4xi32>, %doc: tensor<64xi32>)
    -> (tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %k, %q, %lse, %q deterministic
      query_ranges(%qr rows 16) key_ranges(%kr rows 32) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<64xi32>) {
        %di = tensor.extract %d[%i] : tensor<64xi32>
        %dj = tensor.extract %d[%j] : tensor<64xi32>
        %v = arith.cmpi eq, %di, %dj : i32
        fa.yield %v : i1
      }
      : (tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>, tensor<1x2x64x32xf32>, tensor<1x1x4x2xi32>, tensor<1x2x2x4xi32>, tensor<64xi32>) -> (tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>
}
