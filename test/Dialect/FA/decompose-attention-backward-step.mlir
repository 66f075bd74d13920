// RUN: fa-opt %s --split-input-file --fa-decompose-attention-backward-step | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-decompose-attention-backward-step | FileCheck %s --check-prefix=NEG

// The NEG lines check what must not appear anywhere in a function.

// An unmasked step with all three accumulators (the fast mode's interior
// tiles), f16 (Br = 16, Bc = 32, D = Dv = 64). No mask arithmetic, and no max
// or sum reduction: P comes from the LSE alone.

// CHECK-DAG:   #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[$BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[$C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[$AT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG:   #[[$B:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-LABEL: func.func @unmasked_all(
// CHECK-SAME:      %[[Q:[^:]+]]: tensor<16x64xf16>, %[[K:[^:]+]]: tensor<32x64xf16>, %[[V:[^:]+]]: tensor<32x64xf16>, %[[DO:[^:]+]]: tensor<16x64xf16>,
// CHECK-SAME:      %[[LSE:[^:]+]]: tensor<16xf32>, %[[DI:[^:]+]]: tensor<16xf32>, %[[DK:[^:]+]]: tensor<32x64xf32>, %[[DV:[^:]+]]: tensor<32x64xf32>, %[[DQ:[^:]+]]: tensor<16x64xf32>)
// CHECK-DAG:     %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-DAG:     %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-DAG:     %[[C:.*]] = arith.constant 0.180336878 : f32
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
//   S = Q K^T: K transposed by the indexing map, f32 accumulator from zero.
// CHECK:         %[[S0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<16x32xf32>)
// CHECK:         %[[S:.*]] = linalg.matmul indexing_maps = [#[[$A]], #[[$BT]], #[[$C]]]
// CHECK-SAME:      ins(%[[Q]], %[[K]] : tensor<16x64xf16>, tensor<32x64xf16>) outs(%[[S0]] : tensor<16x32xf32>)
//   P = exp2(S * scale * log2e - LSE * log2e) (0.125 * log2e = 0.180336878),
//   0 on rows with LSE = +inf; also rounded to f16 for the dV GEMM.
// CHECK:         %[[P:.*]]:2 = linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel"]
// CHECK-SAME:      ins(%[[S]], %[[LSE]] : tensor<16x32xf32>, tensor<16xf32>) outs(%{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<16x32xf16>)
// CHECK-NEXT:    ^bb0(%[[SIN:[^:]+]]: f32, %[[LIN:[^:]+]]: f32,
// CHECK-NEXT:      %[[X0:.*]] = arith.mulf %[[SIN]], %[[C]] : f32
// CHECK-NEXT:      %[[X1:.*]] = arith.mulf %[[LIN]], %[[LOG2E]] : f32
// CHECK-NEXT:      %[[X:.*]] = arith.subf %[[X0]], %[[X1]] : f32
// CHECK-NEXT:      %[[E:.*]] = math.exp2 %[[X]] : f32
// CHECK-NEXT:      %[[FIN:.*]] = arith.cmpf olt, %[[LIN]], %[[INF]] : f32
// CHECK-NEXT:      %[[PV:.*]] = arith.select %[[FIN]], %[[E]], %[[ZERO]] : f32
// CHECK-NEXT:      %[[PH:.*]] = arith.truncf %[[PV]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[PV]], %[[PH]] : f32, f16
//   dP = dO V^T.
// CHECK:         %[[DP:.*]] = linalg.matmul indexing_maps = [#[[$A]], #[[$BT]], #[[$C]]]
// CHECK-SAME:      ins(%[[DO]], %[[V]] : tensor<16x64xf16>, tensor<32x64xf16>) outs(%{{.*}} : tensor<16x32xf32>)
//   dS = P * (dP - Di), rounded to f16 for the dK and dQ GEMMs.
// CHECK:         %[[DS:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[P]]#0, %[[DP]], %[[DI]] : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16xf32>) outs(%{{.*}} : tensor<16x32xf16>)
// CHECK-NEXT:    ^bb0(%[[PIN:[^:]+]]: f32, %[[DPIN:[^:]+]]: f32, %[[DIIN:[^:]+]]: f32,
// CHECK-NEXT:      %[[DIFF:.*]] = arith.subf %[[DPIN]], %[[DIIN]] : f32
// CHECK-NEXT:      %[[DSV:.*]] = arith.mulf %[[PIN]], %[[DIFF]] : f32
// CHECK-NEXT:      %[[DSH:.*]] = arith.truncf %[[DSV]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[DSH]] : f16
//   dK += dS^T Q, dV += P^T dO (dS and P transposed by the maps), dQ += dS K,
//   each into its accumulator; no scale.
// CHECK:         %[[NDK:.*]] = linalg.matmul indexing_maps = [#[[$AT]], #[[$B]], #[[$C]]]
// CHECK-SAME:      ins(%[[DS]], %[[Q]] : tensor<16x32xf16>, tensor<16x64xf16>) outs(%[[DK]] : tensor<32x64xf32>)
// CHECK:         %[[NDV:.*]] = linalg.matmul indexing_maps = [#[[$AT]], #[[$B]], #[[$C]]]
// CHECK-SAME:      ins(%[[P]]#1, %[[DO]] : tensor<16x32xf16>, tensor<16x64xf16>) outs(%[[DV]] : tensor<32x64xf32>)
// CHECK:         %[[NDQ:.*]] = linalg.matmul ins(%[[DS]], %[[K]] : tensor<16x32xf16>, tensor<32x64xf16>) outs(%[[DQ]] : tensor<16x64xf32>)
// CHECK:         return %[[NDK]], %[[NDV]], %[[NDQ]]
// NEG-LABEL:   func.func @unmasked_all(
// NEG-NOT:       fa.attention_backward_step
// NEG-NOT:       linalg.index
// NEG-NOT:       reduction
// NEG-NOT:       arith.maximumf
// NEG-NOT:       math.tanh
func.func @unmasked_all(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                        %v: tensor<32x64xf16>, %do: tensor<16x64xf16>,
                        %lse: tensor<16xf32>, %delta: tensor<16xf32>,
                        %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
                        %dq: tensor<16x64xf32>)
    -> (tensor<32x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) {
  %dk1, %dv1, %dq1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>,
        tensor<16x64xf16>, tensor<16xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>
  return %dk1, %dv1, %dq1 : tensor<32x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>
}


// -----

// A masked causal step with dK/dV only (the deterministic dK/dV nest), f32.
// Key j = k_start + c is hidden from query i = q_start + r when j >= k_len
// or the mask hides it (MaskAttrInterface::buildVisible: causal,
// j > i + off with off = k_len - q_len). f32 tiles: no cast of P or dS. No
// dQ GEMM.

// NEG-LABEL:   func.func @masked_causal_dkv(
// NEG-NOT:       arith.truncf
// NEG-NOT:       arith.cmpi sge
// CHECK-LABEL: func.func @masked_causal_dkv(
// CHECK-SAME:      %[[Q:[^:]+]]: tensor<16x64xf32>,
// CHECK-SAME:      %[[QS:[^:]+]]: index, %[[KS:[^:]+]]: index, %[[QL:[^:]+]]: index, %[[KL:[^:]+]]: index)
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         linalg.matmul
// CHECK:         %[[P:.*]] = linalg.generic
// CHECK:           %[[E:.*]] = math.exp2
// CHECK:           %[[FIN:.*]] = arith.cmpf olt
// CHECK-NEXT:      %[[COL:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[J:.*]] = arith.addi %[[KS]], %[[COL]] : index
// CHECK-NEXT:      %[[INK:.*]] = arith.cmpi slt, %[[J]], %[[KL]] : index
// CHECK-NEXT:      %[[ROW:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[I:.*]] = arith.addi %[[QS]], %[[ROW]] : index
// CHECK-NEXT:      %[[OFF:.*]] = arith.subi %[[KL]], %[[QL]] : index
// CHECK-NEXT:      %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK-NEXT:      %[[RIGHT:.*]] = arith.cmpi sle, %[[J]], %[[DIAG]] : index
// CHECK-NEXT:      %[[VIS:.*]] = arith.andi %[[INK]], %[[RIGHT]] : i1
// CHECK-NEXT:      %[[KEEP:.*]] = arith.andi %[[FIN]], %[[VIS]] : i1
// CHECK-NEXT:      %[[PV:.*]] = arith.select %[[KEEP]], %[[E]], %[[ZERO]] : f32
// CHECK-NEXT:      linalg.yield %[[PV]] : f32
// CHECK:         %[[DP:.*]] = linalg.matmul
// CHECK:         %[[DS:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DP]], %{{.*}} : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16xf32>) outs(%{{.*}} : tensor<16x32xf32>)
// CHECK:         %[[NDK:.*]] = linalg.matmul {{.*}} ins(%[[DS]], %[[Q]] :
// CHECK:         %[[NDV:.*]] = linalg.matmul {{.*}} ins(%[[P]], %{{.*}} :
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[NDK]], %[[NDV]]

func.func @masked_causal_dkv(%q: tensor<16x64xf32>, %k: tensor<32x64xf32>,
                             %v: tensor<32x64xf32>, %do: tensor<16x64xf32>,
                             %lse: tensor<16xf32>, %delta: tensor<16xf32>,
                             %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
                             %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<32x64xf32>, tensor<32x64xf32>) {
  %dk1, %dv1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk, %dv) masked(%qs, %ks, %ql, %kl) mask<causal> scale 0.125
      : tensor<16x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>,
        tensor<16x64xf32>, tensor<16xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>
  return %dk1, %dv1 : tensor<32x64xf32>, tensor<32x64xf32>
}

// -----

// dQ only (the deterministic dQ nest), bf16, Dv = 32 != D = 64. First a step
// masked only for the key tail (no mask: just j < k_len, no diagonal), then a sliding window [32, 8]: j >= i + off - 32 and
// j <= i + off + 8. Each step has the two score GEMMs and the dQ GEMM only;
// the second accumulates into the first's result.

// NEG-LABEL:   func.func @masked_tail_window_dq(
// NEG-NOT:       linalg.matmul indexing_maps = [#map5
// CHECK-LABEL: func.func @masked_tail_window_dq(
// CHECK-SAME:      %[[K:[^:]+]]: tensor<32x64xbf16>,
// CHECK-SAME:      %[[DQ:[^:]+]]: tensor<16x64xf32>,
// CHECK-SAME:      %[[QS:[^:]+]]: index, %[[KS:[^:]+]]: index, %[[QL:[^:]+]]: index, %[[KL:[^:]+]]: index)
// Key tail only.
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
// CHECK:           arith.cmpf olt
// CHECK-NEXT:      %[[COL:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[J:.*]] = arith.addi %[[KS]], %[[COL]] : index
// CHECK-NEXT:      %[[INK:.*]] = arith.cmpi slt, %[[J]], %[[KL]] : index
// CHECK-NEXT:      arith.andi %{{.*}}, %[[INK]] : i1
// CHECK-NEXT:      arith.select
// CHECK-NEXT:      arith.truncf %{{.*}} : f32 to bf16
// CHECK:         linalg.matmul {{.*}} ins(%{{.*}}, %{{.*}} : tensor<16x32xbf16>, tensor<32x32xbf16>)
// CHECK:         %[[DS1:.*]] = linalg.generic
// CHECK:         %[[DQ1:.*]] = linalg.matmul ins(%[[DS1]], %[[K]] : tensor<16x32xbf16>, tensor<32x64xbf16>) outs(%[[DQ]] : tensor<16x64xf32>)
// Window [32, 8].
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
// CHECK:           arith.cmpf olt
// CHECK-NEXT:      %[[COL2:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[J2:.*]] = arith.addi %[[KS]], %[[COL2]] : index
// CHECK-NEXT:      %[[INK2:.*]] = arith.cmpi slt, %[[J2]], %[[KL]] : index
// CHECK-NEXT:      %[[ROW:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[I:.*]] = arith.addi %[[QS]], %[[ROW]] : index
// CHECK-NEXT:      %[[OFF:.*]] = arith.subi %[[KL]], %[[QL]] : index
// CHECK-NEXT:      %[[DIAG:.*]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK-NEXT:      %[[FIRST:.*]] = arith.subi %[[DIAG]], %c32 : index
// CHECK-NEXT:      %[[LEFT:.*]] = arith.cmpi sge, %[[J2]], %[[FIRST]] : index
// CHECK-NEXT:      %[[LAST:.*]] = arith.addi %[[DIAG]], %c8 : index
// CHECK-NEXT:      %[[RIGHT:.*]] = arith.cmpi sle, %[[J2]], %[[LAST]] : index
// CHECK-NEXT:      %[[BAND:.*]] = arith.andi %[[LEFT]], %[[RIGHT]] : i1
// CHECK-NEXT:      arith.andi %[[INK2]], %[[BAND]] : i1
// CHECK:         %[[DS2:.*]] = linalg.generic
// CHECK:         %[[DQ2:.*]] = linalg.matmul ins(%[[DS2]], %[[K]] : tensor<16x32xbf16>, tensor<32x64xbf16>) outs(%[[DQ1]] : tensor<16x64xf32>)
// CHECK:         return %[[DQ1]], %[[DQ2]]

func.func @masked_tail_window_dq(%q: tensor<16x64xbf16>, %k: tensor<32x64xbf16>,
                                 %v: tensor<32x32xbf16>, %do: tensor<16x32xbf16>,
                                 %lse: tensor<16xf32>, %delta: tensor<16xf32>,
                                 %dq: tensor<16x64xf32>,
                                 %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %dq1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dq(%dq) masked(%qs, %ks, %ql, %kl) scale 0.125
      : tensor<16x64xbf16>, tensor<32x64xbf16>, tensor<32x32xbf16>,
        tensor<16x32xbf16>, tensor<16xf32>
      -> tensor<16x64xf32>
  %dq2 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dq(%dq1) masked(%qs, %ks, %ql, %kl) mask<window 32, 8> scale 0.125
      : tensor<16x64xbf16>, tensor<32x64xbf16>, tensor<32x32xbf16>,
        tensor<16x32xbf16>, tensor<16xf32>
      -> tensor<16x64xf32>
  return %dq1, %dq2 : tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

// Softcap 30: s = 30 * log2e * tanh(S * 0.125 / 30) (log2e after the tanh),
// and 1 - t^2, the tanh's derivative, comes out of the P generic into dS.

// NEG-LABEL:   func.func @softcap(
// CHECK-LABEL: func.func @softcap(
// CHECK-DAG:     %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:     %[[CAPL:.*]] = arith.constant 43.2808495 : f32
// CHECK-DAG:     %[[IN:.*]] = arith.constant 0.00416666688 : f32
// CHECK:         %[[P:.*]]:3 = linalg.generic
// CHECK-NEXT:    ^bb0(%[[SIN:[^:]+]]: f32, %[[LIN:[^:]+]]: f32,
// CHECK-NEXT:      %[[X:.*]] = arith.mulf %[[SIN]], %[[IN]] : f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT:      %[[CAPPED:.*]] = arith.mulf %[[T]], %[[CAPL]] : f32
// CHECK-NEXT:      %[[T2:.*]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT:      %[[DT:.*]] = arith.subf %[[ONE]], %[[T2]] : f32
// CHECK-NEXT:      %[[LL:.*]] = arith.mulf %[[LIN]], %[[LOG2E]] : f32
// CHECK-NEXT:      arith.subf %[[CAPPED]], %[[LL]] : f32
// CHECK-NEXT:      math.exp2
// CHECK:           linalg.yield %{{.*}}, %{{.*}}, %[[DT]] : f32, f16, f32
// CHECK:         %[[DP:.*]] = linalg.matmul
// CHECK:         linalg.generic {{.*}} ins(%[[P]]#0, %[[DP]], %{{.*}}, %[[P]]#2 :
// CHECK-NEXT:    ^bb0(%[[PIN:[^:]+]]: f32, %[[DPIN:[^:]+]]: f32, %[[DIIN:[^:]+]]: f32, %[[DTIN:[^:]+]]: f32,
// CHECK-NEXT:      %[[DIFF:.*]] = arith.subf %[[DPIN]], %[[DIIN]] : f32
// CHECK-NEXT:      %[[DS0:.*]] = arith.mulf %[[PIN]], %[[DIFF]] : f32
// CHECK-NEXT:      %[[DS:.*]] = arith.mulf %[[DS0]], %[[DTIN]] : f32
// CHECK-NEXT:      arith.truncf %[[DS]] : f32 to f16
// CHECK-COUNT-3: linalg.matmul

func.func @softcap(%q: tensor<16x64xf16>, %k: tensor<32x64xf16>,
                   %v: tensor<32x64xf16>, %do: tensor<16x64xf16>,
                   %lse: tensor<16xf32>, %delta: tensor<16xf32>,
                   %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
                   %dq: tensor<16x64xf32>)
    -> (tensor<32x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) {
  %dk1, %dv1, %dq1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk, %dv) dq(%dq) softcap 30.0 scale 0.125
      : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>,
        tensor<16x64xf16>, tensor<16xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>
  return %dk1, %dv1, %dq1 : tensor<32x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>
}
