// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=16 block-kv=16" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tiled-attention="block-q=16 block-kv=16" | FileCheck %s --check-prefix=LINALG

// fa-tile-attention carries the modifiers into each fa.online_attention:
// the regions cloned, the captures passed on, the tile's batch and query
// head as `at(...)`, and the positions (`masked(...)`) the regions need.
// fa-specialize-masks leaves such a key loop whole (any block may be
// partly hidden); fa-decompose-online-attention inlines the regions into
// the score computation.

// CHECK-LABEL: func.func @alibi
// CHECK-SAME:    %[[Q:.*]]: tensor<1x2x32x64xf16>, %[[SLOPES:.*]]: tensor<2xf32>
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK:           scf.for %[[K0:[a-z0-9_]+]] =
// CHECK:             fa.online_attention {{.*}} masked(%{{.*}}, %[[K0]], %{{.*}}, %{{.*}}) at(%[[B]], %[[H]]) mask<causal>
// CHECK-SAME:          captures(%[[SLOPES]] : tensor<2xf32>) score_mod(%{{.*}}: f32, %{{.*}}: index, %[[HH:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[SL:.*]]: tensor<2xf32>) {
// CHECK:               tensor.extract %[[SL]][%[[HH]]] : tensor<2xf32>
// CHECK:               fa.yield %{{.*}} : f32

// After the whole pipeline: one key loop (no unmasked interior), the
// slope read from the capture at the tile's head, added to the scaled
// score before the exp2 factor.
// LINALG-LABEL: func.func @alibi
// LINALG-SAME:    %{{.*}}: tensor<1x2x32x64xf16>, %[[SLOPES:.*]]: tensor<2xf32>
// LINALG:         scf.forall (%{{.*}}, %[[H:.*]], %{{.*}}) in
// LINALG-COUNT-1: scf.for
// LINALG-NOT:     scf.for
// LINALG:           linalg.generic
// LINALG:             %[[SCALED:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// LINALG:             %[[SLOPE:.*]] = tensor.extract %[[SLOPES]][%[[H]]] : tensor<2xf32>
// LINALG:             %[[MOD:.*]] = arith.addf %[[SCALED]], %[[SLOPE]] : f32
// LINALG:             arith.mulf %[[MOD]], %{{.*}} : f32

func.func @alibi(%q: tensor<1x2x32x64xf16>, %slopes: tensor<2xf32>)
    -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>) {
  %o, %l = fa.attention %q, %q, %q mask<causal> captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<2xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %r = arith.addf %s, %slope : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>,
         tensor<2xf32>) -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>)
  return %o, %l : tensor<1x2x32x64xf16>, tensor<1x2x32xf32>
}

// -----

// A mask_mod alone: AND-ed with the key tail's visibility; its indices are
// the tile's global positions, clamped to the last valid row / key for the
// tile's padding (a modifier never reads past its captures).
// CHECK-LABEL: func.func @mask_only
// CHECK:         fa.online_attention {{.*}} masked({{.*}}) at({{.*}}) scale 1.250000e-01 mask_mod(
// CHECK:           arith.cmpi ule
// LINALG-LABEL: func.func @mask_only
// LINALG:         linalg.generic
// LINALG:           %[[KEY:.*]] = arith.cmpi slt, %[[J:.*]], %{{.*}} : index
// LINALG:           %[[JC:.*]] = arith.minsi %[[J]], %{{.*}} : index
// LINALG:           %[[VIS:.*]] = arith.cmpi ule, %{{.*}}, %{{.*}} : index
// LINALG:           %[[BOTH:.*]] = arith.andi %[[KEY]], %[[VIS]] : i1
// LINALG:           arith.select %[[BOTH]], %{{.*}}, %{{.*}} : f32

func.func @mask_only(%q: tensor<1x2x32x64xf16>)
    -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>) {
  %o, %l = fa.attention %q, %q, %q
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : (tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>)
      -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>)
  return %o, %l : tensor<1x2x32x64xf16>, tensor<1x2x32xf32>
}

// -----

// key_ranges (a document mask the passes cannot analyze; the ranges come at
// run time): each query block reads the ranges of the row groups it holds
// (two groups of 8 rows per 16-row block; an empty range adds nothing),
// takes their union, rounds its start down to a key block and clips it to
// Nk: the key loop's bounds. The steps keep the mask_mod (a range is no
// mask).
// CHECK-LABEL: func.func @key_ranges
// CHECK-SAME:    %{{.*}}: tensor<2x2x?x64xf16>, %[[R:.*]]: tensor<2x2x?x2xi32>
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK:           %[[G0:.*]] = arith.minui
// CHECK:           %[[LO0:.*]] = tensor.extract %[[R]][%[[B]], %[[H]], %[[G0]], %{{.*}}] : tensor<2x2x?x2xi32>
// CHECK:           %[[HI0:.*]] = tensor.extract %[[R]][%[[B]], %[[H]], %[[G0]], %{{.*}}] : tensor<2x2x?x2xi32>
// CHECK:           %[[G1:.*]] = arith.minui
// CHECK:           tensor.extract %[[R]][%[[B]], %[[H]], %[[G1]], %{{.*}}] : tensor<2x2x?x2xi32>
// CHECK:           %[[BEGIN:.*]] = arith.minsi
// CHECK:           %[[END:.*]] = arith.maxsi
// CHECK:           %[[BLK:.*]] = arith.divui %{{.*}}, %[[BC:.*]] : index
// CHECK:           %[[LB:.*]] = arith.muli %[[BLK]], %[[BC]] : index
// CHECK:           %[[CLIP:.*]] = arith.minsi %[[END]], %{{.*}} : index
// CHECK:           %[[UB:.*]] = arith.maxsi %[[CLIP]], %[[LB]] : index
// CHECK:           scf.for %{{.*}} = %[[LB]] to %[[UB]] step
// CHECK:             fa.online_attention {{.*}} mask<causal> {{.*}} captures({{.*}}) mask_mod(
func.func @key_ranges(%q: tensor<2x2x?x64xf16>, %r: tensor<2x2x?x2xi32>,
                      %doc: tensor<2x?xi32>)
    -> (tensor<2x2x?x64xf16>, tensor<2x2x?xf32>) {
  %o, %l = fa.attention %q, %q, %q mask<causal> key_ranges(%r rows 8) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<2x?xi32>) {
        %di = tensor.extract %d[%b, %i] : tensor<2x?xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<2x?xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      }
      : (tensor<2x2x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x64xf16>,
         tensor<2x2x?x2xi32>, tensor<2x?xi32>) -> (tensor<2x2x?x64xf16>, tensor<2x2x?xf32>)
  return %o, %l : tensor<2x2x?x64xf16>, tensor<2x2x?xf32>
}

// -----

// key_ranges with 4 columns: also the keys the mask_mod shows to every row
// of a group; a block's are the intersection over its groups (the largest
// begin, the smallest end), given to the step as full_keys.
// CHECK-LABEL: func.func @full_key_ranges
// CHECK-SAME:    %{{.*}}: tensor<2x2x?x64xf16>, %[[R:.*]]: tensor<2x2x?x4xi32>
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in
// CHECK:           %[[G0:.*]] = arith.minui
// CHECK:           %[[F0:.*]] = tensor.extract %[[R]][%[[B]], %[[H]], %[[G0]], %c2{{.*}}] : tensor<2x2x?x4xi32>
// CHECK:           %[[F1:.*]] = tensor.extract %[[R]][%[[B]], %[[H]], %[[G0]], %c3{{.*}}] : tensor<2x2x?x4xi32>
// CHECK:           %[[G1:.*]] = arith.minui
// CHECK:           tensor.extract %[[R]][%[[B]], %[[H]], %[[G1]], %c2{{.*}}] : tensor<2x2x?x4xi32>
// CHECK:           %[[FB:.*]] = arith.maxsi
// CHECK:           %[[FE:.*]] = arith.minsi
// CHECK:           scf.for
// CHECK:             fa.online_attention {{.*}} at({{.*}}) full_keys(%[[FB]], %[[FE]]) mask<causal> {{.*}} mask_mod(
func.func @full_key_ranges(%q: tensor<2x2x?x64xf16>, %r: tensor<2x2x?x4xi32>,
                           %doc: tensor<2x?xi32>)
    -> (tensor<2x2x?x64xf16>, tensor<2x2x?xf32>) {
  %o, %l = fa.attention %q, %q, %q mask<causal> key_ranges(%r rows 8) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<2x?xi32>) {
        %di = tensor.extract %d[%b, %i] : tensor<2x?xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<2x?xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      }
      : (tensor<2x2x?x64xf16>, tensor<2x2x?x64xf16>, tensor<2x2x?x64xf16>,
         tensor<2x2x?x4xi32>, tensor<2x?xi32>) -> (tensor<2x2x?x64xf16>, tensor<2x2x?xf32>)
  return %o, %l : tensor<2x2x?x64xf16>, tensor<2x2x?xf32>
}
