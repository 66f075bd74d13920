// RUN: fa-opt %s --split-input-file --fa-lower-to-reference | FileCheck %s

// The N x N reference form: every step of the math in FADialect.td is one
// linalg.generic over the grouped layout (b, kv head, group member, ...).

// CHECK-DAG: #[[$QD:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>
// CHECK-DAG: #[[$KD:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>
// CHECK-DAG: #[[$S6:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$ID5:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$ROW5:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$VJ:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d5, d4)>
// CHECK-DAG: #[[$ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// CHECK-LABEL: func.func @forward_full
// CHECK-SAME: %[[Q:.*]]: tensor<1x2x16x32xf32>, %[[K:.*]]: tensor<1x2x24x32xf32>, %[[V:.*]]: tensor<1x2x24x32xf32>
// CHECK-DAG:   %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-DAG:   %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// Default scale 1/sqrt(32).
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 0.176776692 : f32
// CHECK-DAG:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// Hq = Hkv: groups of one query head.
// CHECK:       %[[QG:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 1, 16, 32]
// S_raw = Q K^T: the Nq x Nk generic, reducing over d.
// CHECK:       %[[S_INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x2x1x16x24xf32>)
// CHECK:       %[[RAW:.*]] = linalg.generic
// CHECK-SAME:    indexing_maps = [#[[$QD]], #[[$KD]], #[[$S6]]]
// CHECK-SAME:    iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME:    ins(%[[QG]], %[[K]] : {{.*}}) outs(%[[S_INIT]] : tensor<1x2x1x16x24xf32>)
// CHECK:         arith.mulf
// CHECK:         arith.addf
// S = scale * S_raw; no mask, so no index arithmetic.
// CHECK:       %[[S:.*]] = linalg.generic {{.*}} ins(%[[RAW]] : tensor<1x2x1x16x24xf32>)
// CHECK-NOT:     linalg.index
// CHECK:         %[[SC:.*]] = arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK-NEXT:    linalg.yield %[[SC]]
// m = rowmax(S), from -inf.
// CHECK:       %[[M_INIT:.*]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<1x2x1x16xf32>)
// CHECK:       %[[M:.*]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$ROW5]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:    ins(%[[S]] : {{.*}}) outs(%[[M_INIT]] : {{.*}})
// CHECK:         arith.maximumf
// P = exp(S - m), with m = -inf replaced by 0.
// CHECK:       %[[P:.*]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$ROW5]], #[[$ID5]]]
// CHECK-SAME:    ins(%[[S]], %[[M]] : {{.*}})
// CHECK:         ^bb0(%[[SIJ:.*]]: f32, %[[MI:.*]]: f32, %{{.*}}: f32):
// CHECK:         %[[EMPTY_ROW:.*]] = arith.cmpf oeq, %[[MI]], %[[NEG_INF]] : f32
// CHECK:         %[[MSAFE:.*]] = arith.select %[[EMPTY_ROW]], %[[ZERO]], %[[MI]] : f32
// CHECK:         %[[DIFF:.*]] = arith.subf %[[SIJ]], %[[MSAFE]] : f32
// CHECK:         math.exp %[[DIFF]] : f32
// l = rowsum(P).
// CHECK:       %[[L:.*]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$ROW5]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:    ins(%[[P]] : {{.*}})
// CHECK:         arith.addf
// O = P V, reducing over the keys.
// CHECK:       %[[O:.*]] = linalg.generic {indexing_maps = [#[[$QD]], #[[$VJ]], #[[$S6]]]
// CHECK-SAME:    ins(%[[P]], %[[V]] : {{.*}})
// out = O / l, 0 where l = 0.
// CHECK:       %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[O]], %[[L]] : {{.*}})
// CHECK:         ^bb0(%[[OV:.*]]: f32, %[[LV:.*]]: f32, %{{.*}}: f32):
// CHECK:         %[[SEEN:.*]] = arith.cmpf ogt, %[[LV]], %[[ZERO]] : f32
// CHECK:         %[[NORM:.*]] = arith.divf %[[OV]], %[[LV]] : f32
// CHECK:         arith.select %[[SEEN]], %[[NORM]], %[[ZERO]] : f32
// lse = m + log(l), +inf where l = 0.
// CHECK:       %[[LSE:.*]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ID4]], #[[$ID4]]]
// CHECK-SAME:    ins(%[[M]], %[[L]] : {{.*}})
// CHECK:         ^bb0(%[[MV:.*]]: f32, %[[LV2:.*]]: f32, %{{.*}}: f32):
// CHECK:         %[[SEEN2:.*]] = arith.cmpf ogt, %[[LV2]], %[[ZERO]] : f32
// CHECK:         %[[LOG:.*]] = math.log %[[LV2]] : f32
// CHECK:         %[[SUM:.*]] = arith.addf %[[MV]], %[[LOG]] : f32
// CHECK:         arith.select %[[SEEN2]], %[[SUM]], %[[INF]] : f32
// Back to [B, Hq, ...].
// CHECK:       %[[OUT4:.*]] = tensor.collapse_shape %[[OUT]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x2x1x16x32xf32> into tensor<1x2x16x32xf32>
// CHECK:       %[[LSE3:.*]] = tensor.collapse_shape %[[LSE]] {{\[}}[0], [1, 2], [3]] : tensor<1x2x1x16xf32> into tensor<1x2x16xf32>
// CHECK:       return %[[OUT4]], %[[LSE3]]
// CHECK-NOT:   fa.attention
func.func @forward_full(%q: tensor<1x2x16x32xf32>, %k: tensor<1x2x24x32xf32>,
                        %v: tensor<1x2x24x32xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>) {
  %o, %l = fa.attention %q, %k, %v
      : (tensor<1x2x16x32xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>)
      -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  return %o, %l : tensor<1x2x16x32xf32>, tensor<1x2x16xf32>
}

// -----

// bf16 inputs are extended to f32 inside the generics and the output is
// truncated back; the softcap comes after the scale and before the mask, and
// the mask is bottom-right aligned (off = Nk - Nq = 16).

// CHECK-LABEL: func.func @forward_masked_softcap_bf16
// CHECK-DAG:   %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG:   %[[LEFT:.*]] = arith.constant 8 : index
// CHECK-DAG:   %[[CAP:.*]] = arith.constant 3.000000e+01 : f32
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-DAG:   %[[OFF:.*]] = arith.constant 16 : index
// CHECK:       linalg.generic
// CHECK:         ^bb0(%[[QE:.*]]: bf16, %[[KE:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK:         %[[QF:.*]] = arith.extf %[[QE]] : bf16 to f32
// CHECK:         %[[KF:.*]] = arith.extf %[[KE]] : bf16 to f32
// CHECK:         %[[PROD:.*]] = arith.mulf %[[QF]], %[[KF]] : f32
// CHECK:         arith.addf %[[ACC]], %[[PROD]] : f32
// CHECK:       } -> tensor<1x1x1x16x32xf32>
// The mask select: s = cap * tanh(scale * raw / cap), -inf unless
// i + off - 8 <= j <= i + off (causal with a left window of 8).
// CHECK:       linalg.generic
// CHECK:         ^bb0(%[[RAW:.*]]: f32, %{{.*}}: f32):
// CHECK:         %[[X:.*]] = arith.mulf %[[RAW]], %[[SCALE]] : f32
// CHECK:         %[[XC:.*]] = arith.divf %[[X]], %[[CAP]] : f32
// CHECK:         %[[T:.*]] = math.tanh %[[XC]] : f32
// CHECK:         %[[CAPPED:.*]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK:         %[[I:.*]] = linalg.index 3 : index
// CHECK:         %[[J:.*]] = linalg.index 4 : index
// CHECK:         %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK:         %[[LO:.*]] = arith.subi %[[DIAG]], %[[LEFT]] : index
// CHECK:         %[[GE:.*]] = arith.cmpi sge, %[[J]], %[[LO]] : index
// CHECK:         %[[LE:.*]] = arith.cmpi sle, %[[J]], %[[DIAG]] : index
// CHECK:         %[[VIS:.*]] = arith.andi %[[GE]], %[[LE]] : i1
// CHECK:         %[[MASKED:.*]] = arith.select %[[VIS]], %[[CAPPED]], %[[NEG_INF]] : f32
// CHECK:         linalg.yield %[[MASKED]] : f32
// CHECK:       arith.maximumf
// CHECK:       math.exp
// P V reads bf16 v.
// CHECK:       ^bb0(%{{.*}}: f32, %[[VE:.*]]: bf16, %{{.*}}: f32):
// CHECK-NEXT:    arith.extf %[[VE]] : bf16 to f32
// The normalized output is truncated to bf16; lse stays f32.
// CHECK:       arith.divf
// CHECK:       %[[SEL:.*]] = arith.select
// CHECK:       %[[TR:.*]] = arith.truncf %[[SEL]] : f32 to bf16
// CHECK-NEXT:  linalg.yield %[[TR]] : bf16
// CHECK:       math.log
// CHECK:       tensor.collapse_shape {{.*}} : tensor<1x1x1x16x64xbf16> into tensor<1x1x16x64xbf16>
// CHECK:       tensor.collapse_shape {{.*}} : tensor<1x1x1x16xf32> into tensor<1x1x16xf32>
func.func @forward_masked_softcap_bf16(
    %q: tensor<1x1x16x64xbf16>, %k: tensor<1x1x32x64xbf16>,
    %v: tensor<1x1x32x64xbf16>)
    -> (tensor<1x1x16x64xbf16>, tensor<1x1x16xf32>) {
  %o, %l = fa.attention %q, %k, %v mask<window 8, 0> softcap 30.0 scale 0.125
      : (tensor<1x1x16x64xbf16>, tensor<1x1x32x64xbf16>,
         tensor<1x1x32x64xbf16>)
      -> (tensor<1x1x16x64xbf16>, tensor<1x1x16xf32>)
  return %o, %l : tensor<1x1x16x64xbf16>, tensor<1x1x16xf32>
}

// -----

// A right-only window: only the upper bound is compared.

// CHECK-LABEL: func.func @forward_right_window
// CHECK-DAG:   %[[RIGHT:.*]] = arith.constant 3 : index
// CHECK-DAG:   %[[OFF:.*]] = arith.constant -8 : index
// CHECK:         %[[I:.*]] = linalg.index 3 : index
// CHECK:         %[[J:.*]] = linalg.index 4 : index
// CHECK:         %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK:         %[[HI:.*]] = arith.addi %[[DIAG]], %[[RIGHT]] : index
// CHECK:         %[[LE:.*]] = arith.cmpi sle, %[[J]], %[[HI]] : index
// CHECK-NOT:     arith.cmpi sge
// CHECK:         arith.select %[[LE]]
func.func @forward_right_window(%q: tensor<1x1x24x32xf32>,
                                %k: tensor<1x1x16x32xf32>,
                                %v: tensor<1x1x16x32xf32>)
    -> (tensor<1x1x24x32xf32>, tensor<1x1x24xf32>) {
  %o, %l = fa.attention %q, %k, %v mask<window inf, 3>
      : (tensor<1x1x24x32xf32>, tensor<1x1x16x32xf32>, tensor<1x1x16x32xf32>)
      -> (tensor<1x1x24x32xf32>, tensor<1x1x24xf32>)
  return %o, %l : tensor<1x1x24x32xf32>, tensor<1x1x24xf32>
}

// -----

// Grouped-query attention: 8 query heads over 2 kv heads. q is viewed as
// [B, Hkv, G = 4, Nq, D], so k and v are read with plain affine maps (no
// head index arithmetic), and the results are collapsed back to 8 heads.

// CHECK-DAG: #[[$QD:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>
// CHECK-DAG: #[[$KD:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>
// CHECK-LABEL: func.func @forward_gqa
// CHECK-SAME:  %[[Q:[^:]*]]: tensor<2x8x16x64xf16>, %[[K:[^:]*]]: tensor<2x2x32x64xf16>
// CHECK:       %[[QG:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 2, 4, 16, 64] : tensor<2x8x16x64xf16> into tensor<2x2x4x16x64xf16>
// CHECK:       linalg.generic {indexing_maps = [#[[$QD]], #[[$KD]], {{.*}}]
// CHECK-SAME:    ins(%[[QG]], %[[K]] : tensor<2x2x4x16x64xf16>, tensor<2x2x32x64xf16>) outs(%{{.*}} : tensor<2x2x4x16x32xf32>)
// CHECK:       tensor.collapse_shape {{.*}} : tensor<2x2x4x16x64xf16> into tensor<2x8x16x64xf16>
// CHECK:       tensor.collapse_shape {{.*}} : tensor<2x2x4x16xf32> into tensor<2x8x16xf32>
func.func @forward_gqa(%q: tensor<2x8x16x64xf16>, %k: tensor<2x2x32x64xf16>,
                       %v: tensor<2x2x32x64xf16>)
    -> (tensor<2x8x16x64xf16>, tensor<2x8x16xf32>) {
  %o, %l = fa.attention %q, %k, %v
      : (tensor<2x8x16x64xf16>, tensor<2x2x32x64xf16>, tensor<2x2x32x64xf16>)
      -> (tensor<2x8x16x64xf16>, tensor<2x8x16xf32>)
  return %o, %l : tensor<2x8x16x64xf16>, tensor<2x8x16xf32>
}

// -----

// Dynamic sequence lengths: sizes come from tensor.dim, the mask offset is
// Nk - Nq at run time, and the group split keeps its static sizes.

// CHECK-LABEL: func.func @forward_dynamic_seq
// CHECK-SAME:  %[[Q:[^:]*]]: tensor<1x4x?x32xf32>, %[[K:[^:]*]]: tensor<1x2x?x32xf32>
// CHECK-DAG:   %[[NQ:.*]] = tensor.dim %[[Q]], %c2
// CHECK-DAG:   %[[NK:.*]] = tensor.dim %[[K]], %c2
// CHECK:       tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, %[[NQ]], 32] : tensor<1x4x?x32xf32> into tensor<1x2x2x?x32xf32>
// CHECK:       tensor.empty(%[[NQ]], %[[NK]]) : tensor<1x2x2x?x?xf32>
// CHECK:       %[[I:.*]] = linalg.index 3 : index
// CHECK:       %[[OFF:.*]] = arith.subi %[[NK]], %[[NQ]] : index
// CHECK:       arith.addi %[[I]], %[[OFF]] : index
func.func @forward_dynamic_seq(%q: tensor<1x4x?x32xf32>,
                               %k: tensor<1x2x?x32xf32>,
                               %v: tensor<1x2x?x32xf32>)
    -> (tensor<1x4x?x32xf32>, tensor<1x4x?xf32>) {
  %o, %l = fa.attention %q, %k, %v mask<causal>
      : (tensor<1x4x?x32xf32>, tensor<1x2x?x32xf32>, tensor<1x2x?x32xf32>)
      -> (tensor<1x4x?x32xf32>, tensor<1x4x?xf32>)
  return %o, %l : tensor<1x4x?x32xf32>, tensor<1x4x?xf32>
}

// -----

// Dynamic B and head counts: the group size is Hq / Hkv at run time. With
// both factors of the head split dynamic, q is viewed through tensor.reshape
// (memref.expand_shape with two dynamic sizes in one group crashes MLIR 22's
// expand-strided-metadata).

// CHECK-LABEL: func.func @forward_dynamic_heads
// CHECK-SAME:  %[[Q:[^:]*]]: tensor<?x?x?x32xf32>, %[[K:[^:]*]]: tensor<?x?x?x32xf32>
// CHECK-DAG:   %[[B:.*]] = tensor.dim %[[Q]], %c0
// CHECK-DAG:   %[[HQ:.*]] = tensor.dim %[[Q]], %c1
// CHECK-DAG:   %[[NQ:.*]] = tensor.dim %[[Q]], %c2
// CHECK-DAG:   %[[HKV:.*]] = tensor.dim %[[K]], %c1
// CHECK-DAG:   %[[G:.*]] = arith.divui %[[HQ]], %[[HKV]] : index
// CHECK:       %[[SHAPE:.*]] = tensor.from_elements %[[B]], %[[HKV]], %[[G]], %[[NQ]], %c32 : tensor<5xindex>
// CHECK:       tensor.reshape %[[Q]](%[[SHAPE]]) : (tensor<?x?x?x32xf32>, tensor<5xindex>) -> tensor<?x?x?x?x32xf32>
// CHECK:       tensor.collapse_shape {{.*}} : tensor<?x?x?x?x32xf32> into tensor<?x?x?x32xf32>
func.func @forward_dynamic_heads(%q: tensor<?x?x?x32xf32>,
                                 %k: tensor<?x?x?x32xf32>,
                                 %v: tensor<?x?x?x32xf32>)
    -> (tensor<?x?x?x32xf32>, tensor<?x?x?xf32>) {
  %o, %l = fa.attention %q, %k, %v
      : (tensor<?x?x?x32xf32>, tensor<?x?x?x32xf32>, tensor<?x?x?x32xf32>)
      -> (tensor<?x?x?x32xf32>, tensor<?x?x?xf32>)
  return %o, %l : tensor<?x?x?x32xf32>, tensor<?x?x?xf32>
}

// -----

// Operands that know different static sizes of one dimension are cast to
// the most static agreeing types first; the results are cast back.

// CHECK-LABEL: func.func @forward_mixed_static
// CHECK:       tensor.cast %{{.*}} : tensor<?x2x?x32xf32> to tensor<3x2x?x32xf32>
// CHECK:       tensor.cast %{{.*}} : tensor<3x?x?x32xf32> to tensor<3x2x?x32xf32>
// CHECK:       %[[C:.*]] = tensor.collapse_shape {{.*}} : tensor<3x2x1x?x32xf32> into tensor<3x2x?x32xf32>
// CHECK:       tensor.cast %[[C]] : tensor<3x2x?x32xf32> to tensor<?x2x?x32xf32>
func.func @forward_mixed_static(%q: tensor<?x2x?x32xf32>,
                                %k: tensor<3x?x?x32xf32>,
                                %v: tensor<3x2x?x32xf32>)
    -> (tensor<?x2x?x32xf32>, tensor<3x2x?xf32>) {
  %o, %l = fa.attention %q, %k, %v
      : (tensor<?x2x?x32xf32>, tensor<3x?x?x32xf32>, tensor<3x2x?x32xf32>)
      -> (tensor<?x2x?x32xf32>, tensor<3x2x?xf32>)
  return %o, %l : tensor<?x2x?x32xf32>, tensor<3x2x?xf32>
}

// -----

// lse may have more dynamic sizes than out: each result is cast to its own
// declared type.

// CHECK-LABEL: func.func @forward_lse_more_dynamic
// CHECK:       %[[O:.*]] = tensor.collapse_shape {{.*}} : tensor<1x1x1x16x64xf32> into tensor<1x1x16x64xf32>
// CHECK:       %[[L:.*]] = tensor.collapse_shape {{.*}} : tensor<1x1x1x16xf32> into tensor<1x1x16xf32>
// CHECK:       %[[LC:.*]] = tensor.cast %[[L]] : tensor<1x1x16xf32> to tensor<?x?x?xf32>
// CHECK:       return %[[O]], %[[LC]]
func.func @forward_lse_more_dynamic(%q: tensor<1x1x16x64xf32>,
                                    %k: tensor<1x1x16x64xf32>,
                                    %v: tensor<1x1x16x64xf32>)
    -> (tensor<1x1x16x64xf32>, tensor<?x?x?xf32>) {
  %o, %l = fa.attention %q, %k, %v
      : (tensor<1x1x16x64xf32>, tensor<1x1x16x64xf32>, tensor<1x1x16x64xf32>)
      -> (tensor<1x1x16x64xf32>, tensor<?x?x?xf32>)
  return %o, %l : tensor<1x1x16x64xf32>, tensor<?x?x?xf32>
}

// -----

// The backward recomputes P from the saved lse, then dV, dP, Di, dS (with the
// softcap's chain rule and the scale), dQ and dK; dK and dV sum over the
// query heads of a group.

// CHECK-DAG: #[[$QD:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>
// CHECK-DAG: #[[$KD:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>
// CHECK-DAG: #[[$S6:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$ID5:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$ROW5:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$VJ:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d5, d4)>
// CHECK-DAG: #[[$SKV:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5, d2)>
// CHECK-DAG: #[[$XKV:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5, d3)>
// CHECK-DAG: #[[$KV4:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>

// CHECK-LABEL: func.func @backward
// CHECK-SAME:  %[[Q:[^:]*]]: tensor<1x4x16x64xf16>, %[[K:[^:]*]]: tensor<1x2x32x64xf16>, %[[V:[^:]*]]: tensor<1x2x32x32xf16>, %[[O:[^:]*]]: tensor<1x4x16x32xf16>, %[[LSE:[^:]*]]: tensor<1x4x16xf32>, %[[DO:[^:]*]]: tensor<1x4x16x32xf16>
// CHECK-DAG:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[CAP:.*]] = arith.constant 3.000000e+00 : f32
// CHECK-DAG:   %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK:       %[[QG:.*]] = tensor.expand_shape %[[Q]] {{.*}} into tensor<1x2x2x16x64xf16>
// CHECK:       %[[OG:.*]] = tensor.expand_shape %[[O]] {{.*}} into tensor<1x2x2x16x32xf16>
// CHECK:       %[[LSEG:.*]] = tensor.expand_shape %[[LSE]] {{.*}} into tensor<1x2x2x16xf32>
// CHECK:       %[[DOG:.*]] = tensor.expand_shape %[[DO]] {{.*}} into tensor<1x2x2x16x32xf16>
// S_raw = Q K^T.
// CHECK:       %[[RAW:.*]] = linalg.generic {indexing_maps = [#[[$QD]], #[[$KD]], #[[$S6]]]
// CHECK-SAME:    ins(%[[QG]], %[[K]] :
// P = exp(softcap(scale * S_raw) - lse), 0 on hidden keys.
// CHECK:       %[[P:.*]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$ROW5]], #[[$ID5]]]
// CHECK-SAME:    ins(%[[RAW]], %[[LSEG]] :
// CHECK:         ^bb0(%{{.*}}: f32, %[[L:.*]]: f32, %{{.*}}: f32):
// CHECK:         math.tanh
// CHECK:         %[[CAPPED:.*]] = arith.mulf %{{.*}}, %[[CAP]] : f32
// CHECK:         %[[SHIFTED:.*]] = arith.subf %[[CAPPED]], %[[L]] : f32
// CHECK:         %[[E:.*]] = math.exp %[[SHIFTED]] : f32
// CHECK:         linalg.index 3
// CHECK:         %[[VIS:.*]] = arith.cmpi sle
// CHECK:         arith.select %[[VIS]], %[[E]], %[[ZERO]] : f32
// dV[b,h,j,e] = sum over (g, i) of P * dO: two reductions.
// CHECK:       %[[DV:.*]] = linalg.generic {indexing_maps = [#[[$SKV]], #[[$XKV]], #[[$KV4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME:    ins(%[[P]], %[[DOG]] : {{.*}}) outs(%{{.*}} : tensor<1x2x32x32xf32>)
// dP = dO V^T.
// CHECK:       %[[DP:.*]] = linalg.generic {indexing_maps = [#[[$QD]], #[[$KD]], #[[$S6]]]
// CHECK-SAME:    ins(%[[DOG]], %[[V]] :
// Di = rowsum(dO * O).
// CHECK:       %[[DI:.*]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$ID5]], #[[$ROW5]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:    ins(%[[DOG]], %[[OG]] :
// dS = P * (dP - Di) * (1 - tanh^2(scale * S_raw / cap)) * scale.
// CHECK:       %[[DS:.*]] = linalg.generic
// CHECK-SAME:    ins(%[[P]], %[[DP]], %[[DI]], %[[RAW]] :
// CHECK:         ^bb0(%[[PV:.*]]: f32, %[[DPV:.*]]: f32, %[[DIV:.*]]: f32, %[[RV:.*]]: f32, %{{.*}}: f32):
// CHECK:         %[[CENTERED:.*]] = arith.subf %[[DPV]], %[[DIV]] : f32
// CHECK:         %[[D0:.*]] = arith.mulf %[[PV]], %[[CENTERED]] : f32
// CHECK:         %[[X:.*]] = arith.mulf %[[RV]], %[[SCALE]] : f32
// CHECK:         %[[XC:.*]] = arith.divf %[[X]], %[[CAP]] : f32
// CHECK:         %[[T:.*]] = math.tanh %[[XC]] : f32
// CHECK:         %[[T2:.*]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK:         %[[SLOPE:.*]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK:         %[[D1:.*]] = arith.mulf %[[D0]], %[[SLOPE]] : f32
// CHECK:         %[[D2:.*]] = arith.mulf %[[D1]], %[[SCALE]] : f32
// CHECK:         linalg.yield %[[D2]] : f32
// dQ = dS K.
// CHECK:       %[[DQ:.*]] = linalg.generic {indexing_maps = [#[[$QD]], #[[$VJ]], #[[$S6]]]
// CHECK-SAME:    ins(%[[DS]], %[[K]] :
// dK[b,h,j,d] = sum over (g, i) of dS * Q.
// CHECK:       %[[DK:.*]] = linalg.generic {indexing_maps = [#[[$SKV]], #[[$XKV]], #[[$KV4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME:    ins(%[[DS]], %[[QG]] :
// Results in f16; dQ back to 4 query heads.
// CHECK:       %[[DQH:.*]] = linalg.generic {{.*}} ins(%[[DQ]] : tensor<1x2x2x16x64xf32>) outs(%{{.*}} : tensor<1x2x2x16x64xf16>)
// CHECK:         arith.truncf
// CHECK:       %[[DQ4:.*]] = tensor.collapse_shape %[[DQH]] {{.*}} into tensor<1x4x16x64xf16>
// CHECK:       %[[DKH:.*]] = linalg.generic {{.*}} ins(%[[DK]] : tensor<1x2x32x64xf32>) outs(%{{.*}} : tensor<1x2x32x64xf16>)
// CHECK:       %[[DVH:.*]] = linalg.generic {{.*}} ins(%[[DV]] : tensor<1x2x32x32xf32>) outs(%{{.*}} : tensor<1x2x32x32xf16>)
// CHECK:       return %[[DQ4]], %[[DKH]], %[[DVH]]
// CHECK-NOT:   fa.attention_backward
func.func @backward(%q: tensor<1x4x16x64xf16>, %k: tensor<1x2x32x64xf16>,
                    %v: tensor<1x2x32x32xf16>, %o: tensor<1x4x16x32xf16>,
                    %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x32xf16>)
    -> (tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x32xf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal>
      softcap 3.0 scale 0.125
      : (tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x32xf16>,
         tensor<1x4x16x32xf16>, tensor<1x4x16xf32>, tensor<1x4x16x32xf16>)
      -> (tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x32xf16>)
  return %dq, %dk, %dv
      : tensor<1x4x16x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x32xf16>
}

// -----

// Without softcap the backward's dS needs no raw scores: P, dP and Di only.

// CHECK-LABEL: func.func @backward_plain_f32
// CHECK:       linalg.generic {{.*}} ins(%{{[^,]*}}, %{{[^,]*}}, %{{[^,:]*}} : tensor<1x1x1x8x8xf32>, tensor<1x1x1x8x8xf32>, tensor<1x1x1x8xf32>)
// CHECK-NOT:     math.tanh
// CHECK:         linalg.yield
// CHECK-NOT:   arith.truncf
// CHECK:       return
func.func @backward_plain_f32(%q: tensor<1x1x8x32xf32>, %k: tensor<1x1x8x32xf32>,
                              %v: tensor<1x1x8x32xf32>, %o: tensor<1x1x8x32xf32>,
                              %lse: tensor<1x1x8xf32>, %do: tensor<1x1x8x32xf32>)
    -> (tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do
      : (tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>,
         tensor<1x1x8x32xf32>, tensor<1x1x8xf32>, tensor<1x1x8x32xf32>)
      -> (tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>)
  return %dq, %dk, %dv
      : tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>, tensor<1x1x8x32xf32>
}

// -----

// The merge: per row the largest finite lse, weights exp(lse_i - max) (0 for
// +inf), lse = max + log(sum); out = sum_i w_i out_i / sum, 0 for a row no
// partial saw.
// CHECK-LABEL: func.func @merge
// CHECK:       linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x8x1xf32>, tensor<1x8x1xf32>) outs(%{{.*}} : tensor<1x8x1xf32>)
// CHECK:         arith.cmpf one
// CHECK:         arith.maximumf
// CHECK:         math.exp
// CHECK:         math.log
// CHECK:       linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x8x1x128xf32>, tensor<1x8x1x128xf32>, tensor<1x8x1xf32>, tensor<1x8x1xf32>) outs(%{{.*}} : tensor<1x8x1x128xbf16>)
// CHECK:         math.fma
// CHECK:         arith.divf
// CHECK:         arith.truncf
// CHECK-NOT:   fa.attention_merge
func.func @merge(%o0: tensor<1x8x1x128xf32>, %o1: tensor<1x8x1x128xf32>,
                 %l0: tensor<1x8x1xf32>, %l1: tensor<1x8x1xf32>)
    -> (tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>) {
  %o, %l = fa.attention_merge out(%o0, %o1) lse(%l0, %l1)
      : (tensor<1x8x1x128xf32>, tensor<1x8x1x128xf32>),
        (tensor<1x8x1xf32>, tensor<1x8x1xf32>)
      -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return %o, %l : tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
}

// -----

// merge-only (what fa-tiled-attention runs): the merge is rewritten, an
// attention op is left for the tiling passes, never given N x N scores.
// RUN: fa-opt %s --split-input-file --fa-lower-to-reference=merge-only | FileCheck %s --check-prefix=MERGE
// RUN: fa-opt %s --split-input-file --fa-tiled-attention | FileCheck %s --check-prefix=TILED
// MERGE-LABEL: func.func @merge_and_attention
// MERGE:       linalg.generic
// MERGE-NOT:   fa.attention_merge
// MERGE:       return
// TILED-LABEL: func.func @merge_and_attention
// TILED:       linalg.generic
// TILED-NOT:   fa.attention_merge
// TILED:       return
func.func @merge_and_attention(%o0: tensor<1x8x1x128xf32>, %o1: tensor<1x8x1x128xf32>,
                               %l0: tensor<1x8x1xf32>, %l1: tensor<1x8x1xf32>)
    -> (tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>) {
  %o, %l = fa.attention_merge out(%o0, %o1) lse(%l0, %l1)
      : (tensor<1x8x1x128xf32>, tensor<1x8x1x128xf32>),
        (tensor<1x8x1xf32>, tensor<1x8x1xf32>)
      -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return %o, %l : tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
}

// -----

// MERGE-LABEL: func.func @attention_left
// MERGE:       fa.attention %
// TILED-LABEL: func.func @attention_left
// TILED:       scf.forall
func.func @attention_left(%q: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  %o, %l = fa.attention %q, %q, %q : (tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>, tensor<1x2x64x64xf32>) -> (tensor<1x2x64x64xf32>, tensor<1x2x64xf32>)
  return %o : tensor<1x2x64x64xf32>
}

// -----

// The stacked merge (fa-split-kv's): reductions over the split dimension:
// the largest finite lse, the sum of the weights, lse, then
// out = sum_s exp(lse_s - lse) out_s in f32 and its conversion.
// CHECK-LABEL: func.func @merge_splits
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%{{.*}} : tensor<2x8x?x1xf32>) outs(%{{.*}} : tensor<2x8x1xf32>)
// CHECK:         arith.maximumf
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x8x?x1xf32>, tensor<2x8x1xf32>)
// CHECK:         math.exp
// CHECK:       linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x8x1xf32>, tensor<2x8x1xf32>)
// CHECK:         math.log
// CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x?x1x64xf32>, tensor<2x8x?x1xf32>, tensor<2x8x1xf32>) outs(%{{.*}} : tensor<2x8x1x64xf32>)
// CHECK:         math.exp
// CHECK:       arith.truncf
// CHECK-NOT:   fa.attention_merge_splits
func.func @merge_splits(%o: tensor<2x8x?x1x64xf32>, %l: tensor<2x8x?x1xf32>)
    -> (tensor<2x8x1x64xf16>, tensor<2x8x1xf32>) {
  %out, %lse = fa.attention_merge_splits %o, %l
      : tensor<2x8x?x1x64xf32>, tensor<2x8x?x1xf32>
      -> tensor<2x8x1x64xf16>, tensor<2x8x1xf32>
  return %out, %lse : tensor<2x8x1x64xf16>, tensor<2x8x1xf32>
}

// -----

// Packed sequences: a loop over the sequences of fa.attention on each one's
// rows (a batch of one), itself lowered to the N x N form; rows of no
// sequence keep out = 0 and lse = +inf.

// CHECK-LABEL: func.func @varlen
// CHECK-DAG:     %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] output_shape [1, 4, %{{.*}}, 64] : tensor<4x?x64xf32> into tensor<1x4x?x64xf32>
// CHECK:         linalg.fill ins(%[[INF]] : f32)
// CHECK:         scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:           tensor.extract %{{.*}}[%[[S]]] : tensor<?xi32>
// CHECK:           tensor.extract_slice %{{.*}}[0, 0, %{{.*}}, 0] [1, 4, %{{.*}}, 64] [1, 1, 1, 1] : tensor<1x4x?x64xf32> to tensor<1x4x?x64xf32>
// CHECK:           linalg.generic
// CHECK:           tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, %{{.*}}, 0] [1, 4, %{{.*}}, 32]
// CHECK:           scf.yield
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<1x4x?x32xf32> into tensor<4x?x32xf32>
// CHECK-NOT:     fa.attention
func.func @varlen(%q: tensor<4x?x64xf32>, %k: tensor<2x?x64xf32>, %v: tensor<2x?x32xf32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) -> (tensor<4x?x32xf32>, tensor<4x?xf32>) {
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m) mask<causal> : (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x32xf32>, tensor<?xi32>, tensor<?xi32>, index) -> (tensor<4x?x32xf32>, tensor<4x?xf32>)
  return %o, %l : tensor<4x?x32xf32>, tensor<4x?xf32>
}

// -----

// A paged cache: per batch, its keys and values gathered from the pages
// (key j: row j mod S of page table[b, j / S]), then fa.attention.

// CHECK-LABEL: func.func @paged
// CHECK-SAME:    %[[KP:[a-zA-Z0-9]+]]: tensor<?x2x64x64xf32>, %{{.*}}: tensor<?x2x64x64xf32>, %[[T:[a-zA-Z0-9]+]]: tensor<?x?xi32>, %[[N:[a-zA-Z0-9]+]]: tensor<?xi32>
// CHECK:         scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:           %[[LEN:.*]] = tensor.extract %[[N]][%[[B]]]
// CHECK:           tensor.generate %{{.*}}
// CHECK:           ^bb0(%{{.*}}: index, %[[H:.*]]: index, %[[J:.*]]: index, %[[E:.*]]: index):
// CHECK:             %[[PI:.*]] = arith.divui %[[J]], %c64
// CHECK:             tensor.extract %[[T]][%[[B]], %[[PI]]]
// CHECK:             %[[ROW:.*]] = arith.remui %[[J]], %c64
// CHECK:             tensor.extract %[[KP]][%{{.*}}, %[[H]], %[[ROW]], %[[E]]]
// CHECK:           } : tensor<1x2x?x64xf32>
// CHECK-NOT:     fa.attention
func.func @paged(%q: tensor<?x4x3x64xf32>, %kp: tensor<?x2x64x64xf32>, %vp: tensor<?x2x64x64xf32>, %t: tensor<?x?xi32>, %n: tensor<?xi32>) -> (tensor<?x4x3x64xf32>, tensor<?x4x3xf32>) {
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n) mask<causal> : (tensor<?x4x3x64xf32>, tensor<?x2x64x64xf32>, tensor<?x2x64x64xf32>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x4x3x64xf32>, tensor<?x4x3xf32>)
  return %o, %l : tensor<?x4x3x64xf32>, tensor<?x4x3xf32>
}
