// RUN: fa-opt %s --split-input-file --fa-lower-to-reference | FileCheck %s

// fa-lower-to-reference on fa.attention with modifier regions: the regions
// are cloned into the score generic (the other cases of this pass are in
// lower-to-reference.mlir, whose tiled RUN line the modifiers would fail).

// A score_mod is inlined into the score generic after the scale and before
// the softcap: ALiBi with the slopes a capture, read at the query head
// h = kv head * G + group member (GQA: 4 query heads over 2 kv heads).

// CHECK-LABEL: func.func @forward_score_mod_alibi
// CHECK-SAME:  %[[SLOPES:[^:]*]]: tensor<4xf32>
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-DAG:   %[[CAP:.*]] = arith.constant 2.000000e+01 : f32
// CHECK-DAG:   %[[G:.*]] = arith.constant 2 : index
// CHECK:       linalg.generic
// CHECK:         arith.addf
// CHECK:       linalg.generic
// CHECK-SAME:    ins(%{{.*}} : tensor<1x2x2x16x24xf32>)
// CHECK:         ^bb0(%[[RAW:[^:]*]]: f32, %{{.*}}: f32):
// CHECK:         %[[S:.*]] = arith.mulf %[[RAW]], %[[SCALE]] : f32
// CHECK-NEXT:    %[[KVH:.*]] = linalg.index 1 : index
// CHECK-NEXT:    %[[MEMBER:.*]] = linalg.index 2 : index
// CHECK-NEXT:    %[[BASE:.*]] = arith.muli %[[KVH]], %[[G]] : index
// CHECK-NEXT:    %[[H:.*]] = arith.addi %[[BASE]], %[[MEMBER]] : index
// CHECK-NEXT:    %[[I:.*]] = linalg.index 3 : index
// CHECK-NEXT:    %[[J:.*]] = linalg.index 4 : index
// CHECK:         %[[SLOPE:.*]] = tensor.extract %[[SLOPES]][%[[H]]] : tensor<4xf32>
// CHECK:         %[[DIST:.*]] = arith.subi %[[J]], %[[I]] : index
// CHECK:         %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %{{.*}} : f32
// CHECK:         %[[MOD:.*]] = arith.addf %[[S]], %[[BIAS]] : f32
// The softcap takes the modified score; no mask, so no select.
// CHECK:         %[[XC:.*]] = arith.divf %[[MOD]], %[[CAP]] : f32
// CHECK:         %[[T:.*]] = math.tanh %[[XC]] : f32
// CHECK:         %[[CAPPED:.*]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK-NEXT:    linalg.yield %[[CAPPED]] : f32
// CHECK:       arith.maximumf
// CHECK-NOT:   fa.yield
// CHECK-NOT:   fa.attention
func.func @forward_score_mod_alibi(%q: tensor<1x4x16x32xf32>,
                                   %k: tensor<1x2x24x32xf32>,
                                   %v: tensor<1x2x24x32xf32>,
                                   %slopes: tensor<4xf32>)
    -> (tensor<1x4x16x32xf32>, tensor<1x4x16xf32>) {
  %o, %l = fa.attention %q, %k, %v softcap 20.0 scale 0.125 captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<4xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<4xf32>
        %dist = arith.subi %j, %i : index
        %di = arith.index_cast %dist : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %r = arith.addf %s, %bias : f32
        fa.yield %r : f32
      }
      : (tensor<1x4x16x32xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>,
         tensor<4xf32>)
      -> (tensor<1x4x16x32xf32>, tensor<1x4x16xf32>)
  return %o, %l : tensor<1x4x16x32xf32>, tensor<1x4x16xf32>
}

// -----

// A mask_mod is AND-ed with the mask attribute's visibility: causal (off =
// Nk - Nq = 8) and a document mask over per-token ids (a capture the
// generic reads at i and at j).

// CHECK-LABEL: func.func @forward_mask_mod_document
// CHECK-SAME:  %[[DOC:[^:]*]]: tensor<24xi32>
// CHECK-DAG:   %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG:   %[[OFF:.*]] = arith.constant 8 : index
// CHECK:       linalg.generic
// CHECK:         ^bb0(%[[RAW:[^:]*]]: f32, %{{.*}}: f32):
// CHECK:         %[[S:.*]] = arith.mulf %[[RAW]], %{{.*}} : f32
// CHECK-DAG:     %[[I:.*]] = linalg.index 3 : index
// CHECK-DAG:     %[[J:.*]] = linalg.index 4 : index
// CHECK:         %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK:         %[[CAUSAL:.*]] = arith.cmpi sle, %[[J]], %[[DIAG]] : index
// The query's document id: the queries are the last 16 of 24 tokens.
// CHECK:         %[[QPOS:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK:         %[[DI:.*]] = tensor.extract %[[DOC]][%[[QPOS]]] : tensor<24xi32>
// CHECK:         %[[DJ:.*]] = tensor.extract %[[DOC]][%{{.*}}] : tensor<24xi32>
// CHECK:         %[[SAME:.*]] = arith.cmpi eq, %[[DI]], %[[DJ]] : i32
// CHECK:         %[[VIS:.*]] = arith.andi %[[CAUSAL]], %[[SAME]] : i1
// CHECK:         %[[MASKED:.*]] = arith.select %[[VIS]], %[[S]], %[[NEG_INF]] : f32
// CHECK-NEXT:    linalg.yield %[[MASKED]] : f32
// A row with no visible key: m = -inf gives P = 0, l = 0, out = 0 and
// lse = +inf, as without a modifier.
// CHECK:       arith.maximumf
// CHECK:       arith.cmpf oeq
// CHECK:       math.exp
// CHECK-NOT:   fa.yield
func.func @forward_mask_mod_document(%q: tensor<1x2x16x32xf32>,
                                     %k: tensor<1x2x24x32xf32>,
                                     %v: tensor<1x2x24x32xf32>,
                                     %doc: tensor<24xi32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>) {
  %o, %l = fa.attention %q, %k, %v mask<causal> captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index,
               %d: tensor<24xi32>) {
        %c8 = arith.constant 8 : index
        %pos = arith.addi %i, %c8 : index
        %di = tensor.extract %d[%pos] : tensor<24xi32>
        %dj = tensor.extract %d[%j] : tensor<24xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>,
         tensor<24xi32>)
      -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  return %o, %l : tensor<1x2x16x32xf32>, tensor<1x2x16xf32>
}

// -----

// The backward: P recomputed with the modifiers (score_mod before the
// softcap, the mask_mod AND-ed in), and dS times the score_mod_grad at the
// scaled score, the softcap's 1 - tanh^2 at the modified score, the scale.

// CHECK-LABEL: func.func @backward_modifiers
// CHECK-SAME:  %[[SLOPES:[^:]*]]: tensor<2xf32>
// CHECK-DAG:   %[[CAP:.*]] = arith.constant 2.000000e+01 : f32
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-DAG:   %[[GRAD:.*]] = arith.constant 5.000000e-01 : f32
// P = exp(S - lse), S with the score_mod and the softcap, masked.
// CHECK:       linalg.generic
// CHECK:         tensor.extract %[[SLOPES]]
// CHECK:         math.tanh
// CHECK:         math.exp
// CHECK:         arith.cmpi ule
// CHECK:         arith.select
// dS, with the raw scores as a fourth input.
// CHECK:       linalg.generic
// CHECK:         ^bb0(%[[P:[^:]*]]: f32, %[[DP:[^:]*]]: f32, %[[DI:[^:]*]]: f32, %[[RAW:[^:]*]]: f32, %{{.*}}: f32):
// CHECK:         %[[C:.*]] = arith.subf %[[DP]], %[[DI]] : f32
// CHECK:         %[[DS:.*]] = arith.mulf %[[P]], %[[C]] : f32
// CHECK:         %[[S:.*]] = arith.mulf %[[RAW]], %[[SCALE]] : f32
// CHECK:         %[[DSG:.*]] = arith.mulf %[[DS]], %[[GRAD]] : f32
// CHECK:         %[[SLOPE:.*]] = tensor.extract %[[SLOPES]]
// CHECK:         %[[MOD:.*]] = arith.addf %{{.*}}, %[[SLOPE]] : f32
// CHECK:         %[[X:.*]] = arith.divf %[[MOD]], %[[CAP]] : f32
// CHECK:         %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK:         arith.mulf %[[T]], %[[T]] : f32
// CHECK:         %[[DSC:.*]] = arith.mulf %[[DSG]], %{{.*}} : f32
// CHECK:         %[[OUT:.*]] = arith.mulf %[[DSC]], %[[SCALE]] : f32
// CHECK-NEXT:    linalg.yield %[[OUT]] : f32
// CHECK-NOT:   fa.attention_backward
func.func @backward_modifiers(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>, %slopes: tensor<2xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      softcap 20.0 scale 0.125 captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<2xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %half = arith.constant 0.5 : f32
        %hs = arith.mulf %s, %half : f32
        %r = arith.addf %hs, %slope : f32
        fa.yield %r : f32
      }
      mask_mod(%b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      score_mod_grad(%s: f32, %b: index, %h: index, %i: index, %j: index,
                     %sl: tensor<2xf32>) {
        %half = arith.constant 0.5 : f32
        fa.yield %half : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>, tensor<2xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}
