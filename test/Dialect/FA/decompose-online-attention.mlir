// RUN: fa-opt %s --split-input-file --fa-decompose-online-attention | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-decompose-online-attention | FileCheck %s --check-prefix=NEG

// The NEG lines check what must not appear anywhere in a function.

// An unmasked step, natural exp, f16 tiles (Br = 16, Bc = 32, D = Dv = 64).
// No mask arithmetic; the scaled scores are never materialized: the scale is
// applied once per row to the row max and fused into the fma of P.

// CHECK-DAG:   #[[$QMAP:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$KTMAP:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[$SMAP:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @unmasked_exp(
// CHECK-SAME:      %[[Q:[^:]+]]: tensor<16x64xf16>, %[[K:[^:]+]]: tensor<32x64xf16>, %[[V:[^:]+]]: tensor<32x64xf16>,
// CHECK-SAME:      %[[ACC:[^:]+]]: tensor<16x64xf32>, %[[MAX:[^:]+]]: tensor<16xf32>, %[[SUM:[^:]+]]: tensor<16xf32>)
// CHECK-DAG:     %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[NINF:.*]] = arith.constant 0xFF800000 : f32
//   S = Q K^T: f16 operands, f32 accumulator from zero.
// CHECK:         %[[S0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<16x32xf32>)
// CHECK:         %[[S:.*]] = linalg.matmul indexing_maps = [#[[$QMAP]], #[[$KTMAP]], #[[$SMAP]]]
// CHECK-SAME:      ins(%[[Q]], %[[K]] : tensor<16x64xf16>, tensor<32x64xf16>) outs(%[[S0]] : tensor<16x32xf32>)
//   rmax = rowmax(S), from -inf.
// CHECK:         %[[M0:.*]] = linalg.fill ins(%[[NINF]] : f32) outs(%{{.*}} : tensor<16xf32>)
// CHECK:         %[[RMAX:.*]] = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      ins(%[[S]] : tensor<16x32xf32>) outs(%[[M0]] : tensor<16xf32>)
// CHECK:           arith.maximumf
//   Per row, updating max and sum in place: m' = max(m, scale * rmax);
//   ms = m' == -inf ? 0 : m'; alpha = exp(m - ms); alpha * sum.
// CHECK:         %[[ROW:.*]]:4 = linalg.generic
// CHECK-SAME:      ins(%[[RMAX]] : tensor<16xf32>) outs(%[[MAX]], %{{.*}}, %{{.*}}, %[[SUM]] :
// CHECK-NEXT:    ^bb0(%[[BM:[^:]+]]: f32, %[[OLDM:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %[[OLDS:[^:]+]]: f32):
// CHECK-NEXT:      %[[CBM:.*]] = arith.mulf %[[BM]], %[[SCALE]] : f32
// CHECK-NEXT:      %[[NEWM:.*]] = arith.maximumf %[[OLDM]], %[[CBM]] : f32
// CHECK-NEXT:      %[[NOKEY:.*]] = arith.cmpf oeq, %[[NEWM]], %[[NINF]] : f32
// CHECK-NEXT:      %[[SAFEM:.*]] = arith.select %[[NOKEY]], %[[ZERO]], %[[NEWM]] : f32
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[OLDM]], %[[SAFEM]] : f32
// CHECK-NEXT:      %[[ALPHA:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:      %[[NEGM:.*]] = arith.negf %[[SAFEM]] : f32
// CHECK-NEXT:      %[[SSUM:.*]] = arith.mulf %[[ALPHA]], %[[OLDS]] : f32
// CHECK-NEXT:      linalg.yield %[[NEWM]], %[[NEGM]], %[[ALPHA]], %[[SSUM]]
//   P = exp(fma(S, scale, -ms)), over S in f32 for the row sum, and in f16
//   for the matmul.
// CHECK:         %[[P:.*]]:2 = linalg.generic
// CHECK-SAME:      ins(%[[ROW]]#1 : tensor<16xf32>) outs(%[[S]], %{{.*}} : tensor<16x32xf32>, tensor<16x32xf16>)
// CHECK-NEXT:    ^bb0(%[[NM:[^:]+]]: f32, %[[SIN:[^:]+]]: f32,
// CHECK-NEXT:      %[[X:.*]] = math.fma %[[SIN]], %[[SCALE]], %[[NM]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT:      %[[EH:.*]] = arith.truncf %[[E]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[E]], %[[EH]] : f32, f16
//   sum' = alpha * sum + rowsum(P).
// CHECK:         %[[NEWSUM:.*]] = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      ins(%[[P]]#0 : tensor<16x32xf32>) outs(%[[ROW]]#3 : tensor<16xf32>)
// CHECK:           arith.addf
//   acc' = alpha * acc + P V, P in f16, accumulated in f32.
// CHECK:         %[[SACC:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[ROW]]#2 : tensor<16xf32>) outs(%[[ACC]] : tensor<16x64xf32>)
// CHECK:           arith.mulf
// CHECK:         %[[NEWACC:.*]] = linalg.matmul ins(%[[P]]#1, %[[V]] : tensor<16x32xf16>, tensor<32x64xf16>)
// CHECK-SAME:      outs(%[[SACC]] : tensor<16x64xf32>)
// CHECK:         return %[[NEWACC]], %[[ROW]]#0, %[[NEWSUM]]
// NEG-LABEL:   func.func @unmasked_exp(
// NEG-NOT:       linalg.index
// NEG-NOT:       math.exp2
func.func @unmasked_exp(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                        %v: tensor<32x64xf16>, %acc: tensor<16x64xf32>,
                        %max: tensor<16xf32>, %sum: tensor<16xf32>)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// exp2: log2(e) is folded into the one score constant,
// 0.125 * log2(e) = 0.180336878, used by the row max and the fma; there is no
// other multiply per score and no natural exp.

// NEG-LABEL:   func.func @unmasked_exp2
// NEG-NOT:       math.exp{{ }}
// NEG-NOT:       1.44269
// NEG-NOT:       linalg.index
// CHECK-LABEL: func.func @unmasked_exp2
// CHECK:         %[[C:.*]] = arith.constant 0.180336878 : f32
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[C]] : f32
// CHECK:           math.exp2
// CHECK:         linalg.generic
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      %[[X:.*]] = math.fma %{{.*}}, %[[C]], %{{.*}} : f32
// CHECK-NEXT:      math.exp2 %[[X]] : f32
// CHECK-NEXT:      arith.truncf %{{.*}} : f32 to bf16
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x32xbf16>, tensor<32x64xbf16>)
func.func @unmasked_exp2(%q: tensor<16x64xbf16>, %k: tensor<32x64xbf16>,
                         %v: tensor<32x64xbf16>, %acc: tensor<16x64xf32>,
                         %max: tensor<16xf32>, %sum: tensor<16xf32>)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125 exp2
      : tensor<16x64xbf16>, tensor<32x64xbf16>, tensor<32x64xbf16>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A masked causal step: one generic on S hides key j = k_start + c of row
// i = q_start + r when j >= k_len, or when the mask hides it
// (MaskAttrInterface::buildVisible: causal, j <= i + k_len - q_len). f32
// tiles: P needs no cast.

// NEG-LABEL:   func.func @masked_causal(
// NEG-NOT:       arith.truncf
// CHECK-LABEL: func.func @masked_causal(
// CHECK-SAME:      %[[QS:[^:]+]]: index, %[[KS:[^:]+]]: index, %[[QL:[^:]+]]: index, %[[KL:[^:]+]]: index)
// CHECK-DAG:     %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[S:.*]] = linalg.matmul
// CHECK:         %[[SM:.*]] = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel"]
// CHECK-SAME:      outs(%[[S]] : tensor<16x32xf32>)
// CHECK-NEXT:    ^bb0(%[[SIN:.*]]: f32):
// CHECK-NEXT:      %[[COL:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[J:.*]] = arith.addi %[[KS]], %[[COL]] : index
// CHECK-NEXT:      %[[INK:.*]] = arith.cmpi slt, %[[J]], %[[KL]] : index
// CHECK-NEXT:      %[[R:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[I:.*]] = arith.addi %[[QS]], %[[R]] : index
// CHECK-NEXT:      %[[OFF:.*]] = arith.subi %[[KL]], %[[QL]] : index
// CHECK-NEXT:      %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK-NEXT:      %[[RIGHT:.*]] = arith.cmpi sle, %[[J]], %[[DIAG]] : index
// CHECK-NEXT:      %[[VIS:.*]] = arith.andi %[[INK]], %[[RIGHT]] : i1
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[VIS]], %[[SIN]], %[[NINF]] : f32
// CHECK-NEXT:      linalg.yield %[[SEL]] : f32
// CHECK:         linalg.generic {{.*}} ins(%[[SM]] : tensor<16x32xf32>)
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : tensor<16xf32>) outs(%[[SM]] : tensor<16x32xf32>) {
func.func @masked_causal(%q: tensor<16x64xf32>, %k: tensor<32x64xf32>,
                         %v: tensor<32x64xf32>, %acc: tensor<16x64xf32>,
                         %max: tensor<16xf32>, %sum: tensor<16xf32>,
                         %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      masked(%qs, %ks, %ql, %kl) mask<causal> scale 0.125 exp2
      : tensor<16x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A sliding window [left = 4, right = 2]: both sides of the diagonal bound
// j. Without a mask, masked only hides keys past k_len.

// NEG-LABEL:   func.func @masked_window(
// CHECK-LABEL: func.func @masked_window(
// CHECK:         linalg.generic
// CHECK:           %[[J:.*]] = arith.addi
// CHECK:           %[[INK:.*]] = arith.cmpi slt, %[[J]]
// CHECK:           %[[I:.*]] = arith.addi
// CHECK:           %[[OFF:.*]] = arith.subi
// CHECK:           %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK:           %[[LO:.*]] = arith.subi %[[DIAG]], %c4 : index
// CHECK:           %[[L:.*]] = arith.cmpi sge, %[[J]], %[[LO]] : index
// CHECK:           %[[HI:.*]] = arith.addi %[[DIAG]], %c2 : index
// CHECK:           %[[R:.*]] = arith.cmpi sle, %[[J]], %[[HI]] : index
// CHECK:           %[[LR:.*]] = arith.andi %[[L]], %[[R]] : i1
// CHECK:           arith.andi %[[INK]], %[[LR]] : i1
// CHECK:           arith.select
// NEG-LABEL:   func.func @masked_padding_only(
//   No bound from a mask.
// NEG-NOT:       arith.cmpi {{sle|sge}}
// CHECK-LABEL: func.func @masked_padding_only(
// CHECK-SAME:      %[[QS:[^:]+]]: index, %[[KS:[^:]+]]: index, %[[QL:[^:]+]]: index, %[[KL:[^:]+]]: index)
// CHECK:         linalg.generic
// CHECK-NEXT:    ^bb0(%[[SIN:.*]]: f32):
// CHECK-NEXT:      %[[COL:.*]] = linalg.index 1
// CHECK-NEXT:      %[[J:.*]] = arith.addi %[[KS]], %[[COL]] : index
// CHECK-NEXT:      %[[INK:.*]] = arith.cmpi slt, %[[J]], %[[KL]] : index
// CHECK-NEXT:      arith.select %[[INK]], %[[SIN]], %{{.*}} : f32
func.func @masked_window(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                         %v: tensor<32x64xf16>, %acc: tensor<16x64xf32>,
                         %max: tensor<16xf32>, %sum: tensor<16xf32>,
                         %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      masked(%qs, %ks, %ql, %kl) mask<window 4, 2> scale 0.125
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}
func.func @masked_padding_only(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                               %v: tensor<32x64xf16>, %acc: tensor<16x64xf32>,
                               %max: tensor<16xf32>, %sum: tensor<16xf32>,
                               %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      masked(%qs, %ks, %ql, %kl) scale 0.125
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// softcap + exp2 + causal: the scores are materialized as
// (softcap * log2 e) * tanh(S * (scale / softcap)), log2(e) applied after the
// tanh (30 * log2 e = 43.2808495, 0.125 / 30 = 0.00416666688), then masked in
// the same generic. The exponent is then s - ms: no more scaling.

// NEG-LABEL:   func.func @softcap_exp2
// NEG-NOT:       math.exp{{ }}
// NEG-NOT:       math.fma
// CHECK-LABEL: func.func @softcap_exp2
// CHECK-DAG:     %[[OUTC:.*]] = arith.constant 43.2808495 : f32
// CHECK-DAG:     %[[INC:.*]] = arith.constant 0.00416666688 : f32
// CHECK:         %[[S:.*]] = linalg.matmul
// CHECK:         %[[SC:.*]] = linalg.generic {{.*}} outs(%[[S]] : tensor<16x32xf32>)
// CHECK-NEXT:    ^bb0(%[[SIN:.*]]: f32):
// CHECK-NEXT:      %[[T0:.*]] = arith.mulf %[[SIN]], %[[INC]] : f32
// CHECK-NEXT:      %[[T1:.*]] = math.tanh %[[T0]] : f32
// CHECK-NEXT:      %[[T2:.*]] = arith.mulf %[[T1]], %[[OUTC]] : f32
// CHECK:           linalg.index
// CHECK:           arith.select %{{.*}}, %[[T2]], %{{.*}} : f32
// CHECK:         %[[RMAX:.*]] = linalg.generic {{.*}} ins(%[[SC]] : tensor<16x32xf32>)
//   m' = max(m, rmax): no scale left to apply.
// CHECK:         linalg.generic {{.*}} ins(%[[RMAX]] : tensor<16xf32>)
// CHECK-NEXT:    ^bb0(%[[BM:[^:]+]]: f32, %[[OLDM:[^:]+]]: f32,
// CHECK-NEXT:      arith.maximumf %[[OLDM]], %[[BM]] : f32
// CHECK:           math.exp2
// CHECK:         linalg.generic {{.*}} outs(%[[SC]], %{{.*}} :
// CHECK-NEXT:    ^bb0(%[[NM:[^:]+]]: f32, %[[X:[^:]+]]: f32,
// CHECK-NEXT:      %[[E:.*]] = arith.addf %[[X]], %[[NM]] : f32
// CHECK-NEXT:      math.exp2 %[[E]] : f32
func.func @softcap_exp2(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                        %v: tensor<32x64xf16>, %acc: tensor<16x64xf32>,
                        %max: tensor<16xf32>, %sum: tensor<16xf32>,
                        %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      masked(%qs, %ks, %ql, %kl) mask<causal> softcap 30.0 scale 0.125 exp2
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// Dynamic tile shapes: intermediates are sized with tensor.dim.

// NEG-LABEL:   func.func @dynamic_tiles(
// CHECK-LABEL: func.func @dynamic_tiles(
// CHECK-SAME:      %[[Q:[^:]+]]: tensor<?x64xf16>, %[[K:[^:]+]]: tensor<?x64xf16>
// CHECK-DAG:     %[[BR:.*]] = tensor.dim %[[Q]], %{{.*}} : tensor<?x64xf16>
// CHECK-DAG:     %[[BC:.*]] = tensor.dim %[[K]], %{{.*}} : tensor<?x64xf16>
// CHECK:         tensor.empty(%[[BR]], %[[BC]]) : tensor<?x?xf32>
// CHECK:         linalg.matmul {{.*}} -> tensor<?x?xf32>
// CHECK:         tensor.empty(%[[BR]]) : tensor<?xf32>
// CHECK:         tensor.empty(%[[BR]], %[[BC]]) : tensor<?x?xf16>
// CHECK:         linalg.matmul {{.*}} -> tensor<?x32xf32>
func.func @dynamic_tiles(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>,
                         %v: tensor<?x32xf16>, %acc: tensor<?x32xf32>,
                         %max: tensor<?xf32>, %sum: tensor<?xf32>)
    -> (tensor<?x32xf32>, tensor<?xf32>, tensor<?xf32>) {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x32xf16>
        -> tensor<?x32xf32>, tensor<?xf32>
  return %r#0, %r#1, %r#2 : tensor<?x32xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

// Finalize, natural log: one reciprocal per row and one multiply per element;
// a row with sum = 0 gives out = 0 and lse = +inf.

// NEG-LABEL:   func.func @finalize(
//   One normalization: a single divide (per row).
// NEG-COUNT-1:   arith.divf
// NEG-NOT:       arith.divf
// CHECK-LABEL: func.func @finalize(
// CHECK-SAME:      %[[ACC:[^:]+]]: tensor<16x64xf32>, %[[MAX:[^:]+]]: tensor<16xf32>, %[[SUM:[^:]+]]: tensor<16xf32>)
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[PINF:.*]] = arith.constant 0x7F800000 : f32
// CHECK:         %[[ROW:.*]]:2 = linalg.generic {{.*}} ins(%[[MAX]], %[[SUM]] :
// CHECK-NEXT:    ^bb0(%[[M:[^:]+]]: f32, %[[S:[^:]+]]: f32,
// CHECK-NEXT:      %[[NOKEY:.*]] = arith.cmpf oeq, %[[S]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[RCP:.*]] = arith.divf %[[ONE]], %[[S]] : f32
// CHECK-NEXT:      %[[INV:.*]] = arith.select %[[NOKEY]], %[[ZERO]], %[[RCP]] : f32
// CHECK-NEXT:      %[[LOG:.*]] = math.log %[[S]] : f32
// CHECK-NEXT:      %[[L:.*]] = arith.addf %[[M]], %[[LOG]] : f32
// CHECK-NEXT:      %[[LSE:.*]] = arith.select %[[NOKEY]], %[[PINF]], %[[L]] : f32
// CHECK-NEXT:      linalg.yield %[[INV]], %[[LSE]]
// CHECK:         %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[ACC]], %[[ROW]]#0 : tensor<16x64xf32>, tensor<16xf32>)
// CHECK-NEXT:    ^bb0(%[[A:[^:]+]]: f32, %[[I:[^:]+]]: f32,
// CHECK-NEXT:      %[[N:.*]] = arith.mulf %[[A]], %[[I]] : f32
// CHECK-NEXT:      %[[T:.*]] = arith.truncf %[[N]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[T]] : f16
// CHECK:         return %[[OUT]], %[[ROW]]#1
func.func @finalize(%acc: tensor<16x64xf32>, %max: tensor<16xf32>,
                    %sum: tensor<16xf32>)
    -> (tensor<16x64xf16>, tensor<16xf32>) {
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf16>
  return %out, %lse : tensor<16x64xf16>, tensor<16xf32>
}

// -----

// Finalize, exp2: the max is in log2 units, lse = ln 2 * (max + log2(sum)).

// NEG-LABEL:   func.func @finalize_exp2(
// NEG-NOT:       math.log{{ }}
// CHECK-LABEL: func.func @finalize_exp2(
// CHECK-DAG:     %[[PINF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-DAG:     %[[LN2:.*]] = arith.constant 0.693147182 : f32
// CHECK:         linalg.generic
// CHECK-NEXT:    ^bb0(%[[M:[^:]+]]: f32, %[[S:[^:]+]]: f32,
// CHECK-NEXT:      %[[NOKEY:.*]] = arith.cmpf oeq, %[[S]]
// CHECK:           %[[LOG:.*]] = math.log2 %[[S]] : f32
// CHECK-NEXT:      %[[L2:.*]] = arith.addf %[[M]], %[[LOG]] : f32
// CHECK-NEXT:      %[[L:.*]] = arith.mulf %[[L2]], %[[LN2]] : f32
// CHECK-NEXT:      arith.select %[[NOKEY]], %[[PINF]], %[[L]] : f32
// CHECK:         linalg.generic
// CHECK-NOT:       arith.truncf
// CHECK:         return
func.func @finalize_exp2(%acc: tensor<16x64xf32>, %max: tensor<16xf32>,
                         %sum: tensor<16xf32>)
    -> (tensor<16x64xf32>, tensor<16xf32>) {
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum exp2
      : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf32>
  return %out, %lse : tensor<16x64xf32>, tensor<16xf32>
}

// -----

// A run-time scale: log2(e) is folded in with one multiply, before the
// generics (not per score), and the product is the fma factor of P.
// CHECK-LABEL: func.func @runtime_scale
// CHECK-SAME:    %[[S:[a-zA-Z0-9]+]]: f32
// CHECK:         %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK:         %[[C:.*]] = arith.mulf %[[S]], %[[LOG2E]] : f32
// CHECK:         linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[C]] : f32
// CHECK:         linalg.generic
// CHECK:           math.fma %{{.*}}, %[[C]], %{{.*}} : f32
func.func @runtime_scale(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                         %v: tensor<32x64xf16>, %acc: tensor<16x64xf32>,
                         %m: tensor<16xf32>, %sum: tensor<16xf32>, %s: f32)
    -> tensor<16x64xf32> {
  %a, %mx, %sm = fa.online_attention %q, %k, %v into %acc, %m, %sum scale %s exp2
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
      -> tensor<16x64xf32>, tensor<16xf32>
  return %a : tensor<16x64xf32>
}

// -----

// A dynamic query tile with a static state (fuzzer finding): the row
// updates are built in the state's type.
// CHECK-LABEL: func.func @dynamic_query_static_state
// CHECK:         linalg.generic
// CHECK:         linalg.generic {{.*}} outs({{.*}} : tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>)
func.func @dynamic_query_static_state(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>,
                                      %v: tensor<?x32xf16>, %acc: tensor<?x32xf32>,
                                      %max: tensor<32xf32>, %sum: tensor<32xf32>)
    -> tensor<32xf32> {
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x32xf16>
      -> tensor<?x32xf32>, tensor<32xf32>
  return %r#1 : tensor<32xf32>
}

// -----

// The finalize of a static state into a dynamic query tile (fuzzer finding):
// out is computed in the state's shape and cast to the op's type.
// NEG-LABEL:   func.func @finalize_static_state_dynamic_out
// CHECK-LABEL: func.func @finalize_static_state_dynamic_out
// CHECK:         %[[ROWS:.*]]:2 = linalg.generic {{.*}} outs({{.*}} : tensor<64xf32>, tensor<64xf32>)
// CHECK:         %[[OUT:.*]] = linalg.generic {{.*}} outs({{.*}} : tensor<64x64xf16>)
// CHECK:         %[[CAST:.*]] = tensor.cast %[[OUT]] : tensor<64x64xf16> to tensor<?x64xf16>
// CHECK:         return %[[CAST]], %[[ROWS]]#1
func.func @finalize_static_state_dynamic_out(%acc: tensor<64x64xf32>, %max: tensor<64xf32>,
                                             %sum: tensor<64xf32>)
    -> (tensor<?x64xf16>, tensor<64xf32>) {
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<?x64xf16>
  return %out, %lse : tensor<?x64xf16>, tensor<64xf32>
}

// -----

// A score_mod and a mask_mod: the scaled score goes through the score_mod
// (natural units), then the softcap and the log2(e) factor (exp2); the
// mask_mod is AND-ed with the key tail. Both see the tile's batch and head
// and its global positions, clamped to the last valid row / key.

// CHECK-LABEL: func.func @modifiers(
// CHECK-SAME:      %{{[^:]+}}: tensor<16x64xf16>, %{{[^:]+}}: tensor<16x64xf32>, %{{[^:]+}}: tensor<16xf32>, %[[Q0:[^:]+]]: index, %[[K0:[^:]+]]: index, %[[NQ:[^:]+]]: index, %[[NK:[^:]+]]: index, %[[B:[^:]+]]: index, %[[H:[^:]+]]: index, %[[T:[^:]+]]: tensor<4xf32>)
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel"]
// CHECK:           %[[S:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:           %[[BIAS:.*]] = tensor.extract %[[T]][%[[H]]] : tensor<4xf32>
// CHECK:           %[[MOD:.*]] = arith.addf %[[S]], %[[BIAS]] : f32
// CHECK:           %[[CAPPED:.*]] = arith.divf %[[MOD]], %{{.*}} : f32
// CHECK:           math.tanh %[[CAPPED]] : f32
// CHECK:           %[[KEY:.*]] = arith.cmpi slt, %{{.*}}, %[[NK]] : index
// CHECK:           %[[I:.*]] = arith.addi %[[Q0]], %{{.*}} : index
// CHECK:           %[[ILAST:.*]] = arith.subi %[[NQ]], %{{.*}} : index
// CHECK:           %[[IC:.*]] = arith.minsi %[[I]], %[[ILAST]] : index
// CHECK:           %[[II:.*]] = arith.maxsi %[[IC]], %{{.*}} : index
// CHECK:           %[[J:.*]] = arith.addi %[[K0]], %{{.*}} : index
// CHECK:           %[[JC:.*]] = arith.minsi %[[J]], %{{.*}} : index
// CHECK:           %[[JJ:.*]] = arith.maxsi %[[JC]], %{{.*}} : index
// CHECK:           %[[MM:.*]] = arith.cmpi ule, %[[JJ]], %[[II]] : index
// CHECK:           %[[VIS:.*]] = arith.andi %[[KEY]], %[[MM]] : i1
// CHECK:           arith.select %[[VIS]]
func.func @modifiers(%q: tensor<16x64xf16>, %acc: tensor<16x64xf32>, %m: tensor<16xf32>,
                     %q0: index, %k0: index, %nq: index, %nk: index, %b: index, %h: index,
                     %t: tensor<4xf32>) -> tensor<16x64xf32> {
  %a, %mx, %s = fa.online_attention %q, %q, %q into %acc, %m, %m
      masked(%q0, %k0, %nq, %nk) at(%b, %h) softcap 20.0 scale 0.125 exp2
      captures(%t : tensor<4xf32>)
      score_mod(%x: f32, %bb: index, %hh: index, %i: index, %j: index, %tt: tensor<4xf32>) {
        %e = tensor.extract %tt[%hh] : tensor<4xf32>
        %y = arith.addf %x, %e : f32
        fa.yield %y : f32
      }
      mask_mod(%bb: index, %hh: index, %i: index, %j: index, %tt: tensor<4xf32>) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x64xf16> -> tensor<16x64xf32>, tensor<16xf32>
  return %a : tensor<16x64xf32>
}
