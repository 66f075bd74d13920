// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=32 block-kv=64" | FileCheck %s

// Fast mode, f16, Nq and Nk multiples of the blocks (no padding, no mask).
// Preprocessing: Di = rowsum(dO * O) in f32, the only reduction outside the
// GEMMs. Then a forall over (batch, kv head) whose key-block loop carries the
// group's padded f32 dQ and the dK/dV slabs; inside, the head loop and the
// query-block loop carry the f32 dK/dV tile accumulators, and the body is one
// fa.attention_backward_step per (query block, key block) pair.

// CHECK-DAG:   #[[ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG:   #[[ROWS3:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @fast(
// CHECK-SAME:      %[[Q:[a-zA-Z0-9]+]]: tensor<1x2x64x32xf16>, %[[K:[a-zA-Z0-9]+]]: tensor<1x2x128x32xf16>, %[[V:[a-zA-Z0-9]+]]: tensor<1x2x128x32xf16>, %[[O:[a-zA-Z0-9]+]]: tensor<1x2x64x32xf16>, %[[LSE:[a-zA-Z0-9]+]]: tensor<1x2x64xf32>, %[[DO:[a-zA-Z0-9]+]]: tensor<1x2x64x32xf16>)
//
// Di = rowsum(dO * O).
// CHECK:         %[[DI:.*]] = linalg.generic {indexing_maps = [#[[ID4]], #[[ID4]], #[[ROWS3]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[DO]], %[[O]] : {{.*}}) outs(%{{.*}} : tensor<1x2x64xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
//
// forall over (batch, kv head); the kv-block loop carries dQ, dK, dV.
// CHECK:         %[[RES:.*]]:3 = scf.forall (%[[BI:.*]], %[[HKV:.*]]) in (1, 2) shared_outs(%[[DQS:.*]] = %{{.*}}, %[[DKS:.*]] = %{{.*}}, %[[DVS:.*]] = %{{.*}})
// CHECK:           %[[DQ0:.*]] = linalg.fill {{.*}} -> tensor<1x64x32xf32>
// CHECK:           %[[DK0:.*]] = tensor.extract_slice %[[DKS]][%[[BI]], %[[HKV]], 0, 0] [1, 1, 128, 32]
// CHECK:           %[[DV0:.*]] = tensor.extract_slice %[[DVS]][%[[BI]], %[[HKV]], 0, 0] [1, 1, 128, 32]
// CHECK:           %[[KB:.*]]:3 = scf.for %[[KBI:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[DQG:.*]] = %[[DQ0]], %[[DKA:.*]] = %[[DK0]], %[[DVA:.*]] = %[[DV0]]) -> (tensor<1x64x32xf32>, tensor<128x32xf16>, tensor<128x32xf16>)
// CHECK:             %[[KSTART:.*]] = arith.muli %[[KBI]], %{{.*}} : index
// CHECK:             %[[KT:.*]] = tensor.extract_slice %[[K]][%[[BI]], %[[HKV]], %[[KSTART]], 0] [1, 1, 64, 32] {{.*}} to tensor<64x32xf16>
// CHECK:             %[[VT:.*]] = tensor.extract_slice %[[V]][%[[BI]], %[[HKV]], %[[KSTART]], 0] [1, 1, 64, 32] {{.*}} to tensor<64x32xf16>
// Head loop over the group, then the query blocks; f32 dK/dV tiles carried.
// CHECK:             scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %[[DQG]]) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<1x64x32xf32>)
// CHECK:               scf.for %{{.*}} iter_args(%[[DKT:.*]] = %{{.*}}, %[[DVT:.*]] = %{{.*}}, %[[DQI:.*]] = %{{.*}}) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<1x64x32xf32>)
// CHECK:                 %[[QT:.*]] = tensor.extract_slice %[[Q]]{{.*}} to tensor<32x32xf16>
// CHECK:                 %[[DOT:.*]] = tensor.extract_slice %[[DO]]{{.*}} to tensor<32x32xf16>
// CHECK:                 %[[LSET:.*]] = tensor.extract_slice %[[LSE]]{{.*}} to tensor<32xf32>
// CHECK:                 %[[DIT:.*]] = tensor.extract_slice %[[DI]]{{.*}} to tensor<32xf32>
// The [Br, D] rows of this head's padded dQ, then one step with all three
// accumulators: no mask and no key tail, so not `masked`. The step carries
// the softmax scale; dK and dQ are not multiplied by it inside the loops.
// CHECK:                 %[[DQT:.*]] = tensor.extract_slice %[[DQI]]{{.*}} [1, 32, 32] [1, 1, 1] : tensor<1x64x32xf32> to tensor<32x32xf32>
// CHECK-NOT:             linalg.matmul
// CHECK:                 %[[NDK:.*]], %[[NDV:.*]], %[[NDQ:.*]] = fa.attention_backward_step %[[QT]], %[[KT]], %[[VT]], %[[DOT]], %[[LSET]], %[[DIT]] dkv(%[[DKT]], %[[DVT]]) dq(%[[DQT]]) scale 0.176776692 :
// CHECK-SAME:                tensor<32x32xf16>, tensor<64x32xf16>, tensor<64x32xf16>, tensor<32x32xf16>, tensor<32xf32> -> tensor<64x32xf32>, tensor<64x32xf32>, tensor<32x32xf32>
// CHECK-NEXT:            %[[DQN:.*]] = tensor.insert_slice %[[NDQ]] into %[[DQI]]
// CHECK-NEXT:            scf.yield %[[NDK]], %[[NDV]], %[[DQN]]
// The softmax scale is applied once, to the finished dK (not to dV).
// CHECK:             linalg.generic
// CHECK:               arith.mulf
// CHECK:               arith.truncf {{.*}} : f32 to f16
// CHECK:             tensor.insert_slice %{{.*}} into %[[DKA]][%[[KSTART]], 0] [64, 32]
// CHECK:             linalg.generic
// CHECK-NOT:           arith.mulf
// CHECK:               arith.truncf {{.*}} : f32 to f16
// CHECK:             tensor.insert_slice %{{.*}} into %[[DVA]][%[[KSTART]], 0] [64, 32]
// CHECK:           } {fa.dq_accumulation}
// CHECK:           %[[DQF:.*]] = linalg.generic {{.*}} ins(%[[KB]]#0 : tensor<1x64x32xf32>) outs(%{{.*}} : tensor<1x64x32xf16>)
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %[[DQF]] into %[[DQS]]
// CHECK:             tensor.parallel_insert_slice %[[KB]]#1 into %[[DKS]][%[[BI]], %[[HKV]], 0, 0] [1, 1, 128, 32]
// CHECK:             tensor.parallel_insert_slice %[[KB]]#2 into %[[DVS]][%[[BI]], %[[HKV]], 0, 0] [1, 1, 128, 32]
// The GPU launch grid: batch on z, kv heads on y (the key-block loop inside
// takes x).
// CHECK:         } {mapping = [#gpu.block<z>, #gpu.block<y>]}
// CHECK:         return %[[RES]]#0, %[[RES]]#1, %[[RES]]#2
func.func @fast(%q: tensor<1x2x64x32xf16>, %k: tensor<1x2x128x32xf16>,
                %v: tensor<1x2x128x32xf16>, %o: tensor<1x2x64x32xf16>,
                %lse: tensor<1x2x64xf32>, %do: tensor<1x2x64x32xf16>)
    -> (tensor<1x2x64x32xf16>, tensor<1x2x128x32xf16>, tensor<1x2x128x32xf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do
      : (tensor<1x2x64x32xf16>, tensor<1x2x128x32xf16>, tensor<1x2x128x32xf16>,
         tensor<1x2x64x32xf16>, tensor<1x2x64xf32>, tensor<1x2x64x32xf16>)
      -> (tensor<1x2x64x32xf16>, tensor<1x2x128x32xf16>, tensor<1x2x128x32xf16>)
  return %dq, %dk, %dv : tensor<1x2x64x32xf16>, tensor<1x2x128x32xf16>, tensor<1x2x128x32xf16>
}

// -----

// No max or sum reduction is redone inside the loops: the only reduction
// iterator is the preprocessing's, and no max appears anywhere.

// CHECK-LABEL: func.func @no_reduction_in_loop(
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]
// CHECK:         scf.forall
// CHECK-NOT:       reduction
// CHECK-NOT:       arith.maximumf
// CHECK-NOT:       arith.maxnumf
// CHECK-NOT:       linalg.reduce
// CHECK:           fa.attention_backward_step
// CHECK-NOT:       reduction
// CHECK-NOT:       arith.maximumf
// CHECK-NOT:       arith.maxnumf
// CHECK-NOT:       linalg.reduce
// CHECK:         return
func.func @no_reduction_in_loop(%q: tensor<1x1x64x32xf32>, %k: tensor<1x1x64x32xf32>,
                                %v: tensor<1x1x64x32xf32>, %o: tensor<1x1x64x32xf32>,
                                %lse: tensor<1x1x64xf32>, %do: tensor<1x1x64x32xf32>)
    -> (tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal>
      : (tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>,
         tensor<1x1x64x32xf32>, tensor<1x1x64xf32>, tensor<1x1x64x32xf32>)
      -> (tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>)
  return %dq, %dk, %dv : tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>, tensor<1x1x64x32xf32>
}

// -----

// Causal, Nq = 96 < Nk = 192 (bottom-right aligned, off = Nk - Nq = 96), f32.
// Key j is seen from row i iff j <= i + off, so the query blocks of key
// block kb (the mask's query-block range) start at max(kStart - off, 0) / Br
// and run to the end. The step is masked: it gets the
// tile origins and the sequence lengths (q_len = Nq, k_len = Nk) and applies
// the causal rule itself.

// CHECK-LABEL: func.func @causal_bounds(
// CHECK:         scf.forall
// CHECK:           scf.for %[[KBI:.*]] = {{.*}} iter_args
// CHECK:             %[[KSTART:.*]] = arith.muli %[[KBI]], %c64{{.*}} : index
// The range is in rows (aligned to the 32-row blocks), then block numbers.
// CHECK:             %[[FIRST:.*]] = arith.addi %[[KSTART]], %c-96 : index
// CHECK:             %[[CLAMP:.*]] = arith.maxsi %[[FIRST]], %{{.*}} : index
// CHECK:             %[[LOB:.*]] = arith.divui %[[CLAMP]], %c32{{.*}} : index
// CHECK:             %[[LOROW:.*]] = arith.muli %[[LOB]], %c32{{.*}} : index
// CHECK:             %[[HI1:.*]] = arith.maxsi %[[LOROW]], %c96{{.*}} : index
// CHECK:             %[[HIROW:.*]] = arith.minsi %[[HI1]], %c96{{.*}} : index
// CHECK:             %[[LOROW2:.*]] = arith.minsi %[[LOROW]], %[[HIROW]] : index
// CHECK:             %[[LO:.*]] = arith.divui %[[LOROW2]], %c32{{.*}} : index
// CHECK:             %[[HI:.*]] = arith.ceildivui %[[HIROW]], %c32{{.*}} : index
// CHECK:             scf.for
// CHECK:               scf.for %[[QB:.*]] = %[[LO]] to %[[HI]] step
// CHECK:                 %[[QSTART:.*]] = arith.muli %[[QB]], %c32{{.*}} : index
// CHECK:                 fa.attention_backward_step {{.*}} dkv(%{{.*}}, %{{.*}}) dq(%{{.*}}) masked(%[[QSTART]], %[[KSTART]], %c96, %c192) mask<causal> scale 1.250000e-01 :
// CHECK-SAME:                tensor<32x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<64x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>
func.func @causal_bounds(%q: tensor<1x1x96x64xf32>, %k: tensor<1x1x192x64xf32>,
                         %v: tensor<1x1x192x64xf32>, %o: tensor<1x1x96x64xf32>,
                         %lse: tensor<1x1x96xf32>, %do: tensor<1x1x96x64xf32>)
    -> (tensor<1x1x96x64xf32>, tensor<1x1x192x64xf32>, tensor<1x1x192x64xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal>
      : (tensor<1x1x96x64xf32>, tensor<1x1x192x64xf32>, tensor<1x1x192x64xf32>,
         tensor<1x1x96x64xf32>, tensor<1x1x96xf32>, tensor<1x1x96x64xf32>)
      -> (tensor<1x1x96x64xf32>, tensor<1x1x192x64xf32>, tensor<1x1x192x64xf32>)
  return %dq, %dk, %dv : tensor<1x1x96x64xf32>, tensor<1x1x192x64xf32>, tensor<1x1x192x64xf32>
}

// -----

// Sliding window [32, 8], Nq = 100 and Nk = 70 (tails on both sides, bf16).
// Key tiles are clipped and zero-padded to 64 rows, query tiles to 32 rows;
// padded LSE rows get +inf so P = 0 there. Both window sides bound the
// query blocks of a key block: first row kStart - off - 8, last row
// min(kStart + 64, Nk) - 1 - off + 32. The masked step hides keys >= Nk and
// applies the window. dK/dV tiles are cut back to the rows that exist before
// they are stored.

// CHECK-LABEL: func.func @window_tails(
// CHECK:         scf.forall
// CHECK:           scf.for %[[KBI:.*]] = {{.*}} iter_args({{.*}}) -> (tensor<1x128x32xf32>, tensor<70x32xbf16>, tensor<70x32xbf16>)
// CHECK:             %[[KSTART:.*]] = arith.muli %[[KBI]], %c64{{.*}} : index
// CHECK:             %[[KREST:.*]] = arith.subi %c70, %[[KSTART]] : index
// CHECK:             %[[KLEN:.*]] = arith.minsi %c64{{.*}}, %[[KREST]] : index
// CHECK:             %[[KS:.*]] = tensor.extract_slice %{{.*}}[%{{.*}}, %{{.*}}, %[[KSTART]], 0] [1, 1, %[[KLEN]], 32] {{.*}} to tensor<?x32xbf16>
// CHECK:             tensor.pad %[[KS]] low[0, 0] high[%{{.*}}, 0]
// CHECK:             } : tensor<?x32xbf16> to tensor<64x32xbf16>
// The mask's query-block range in rows (off = -30 folded): the last key of
// the block, max(min(kStart + 64, Nk) - 1, kStart), and the diagonals of its
// first and last key, kStart + 30 and that + 30.
// CHECK:             %[[L0:.*]] = arith.addi %[[KSTART]], %c64{{.*}} : index
// CHECK:             %[[KEND:.*]] = arith.minsi %[[L0]], %c70 : index
// CHECK:             %[[LASTK:.*]] = arith.maxsi %{{.*}}, %[[KSTART]] : index
// Right side of the window: the first query row, aligned down.
// CHECK:             %[[D0:.*]] = arith.addi %[[KSTART]], %c30 : index
// CHECK:             %[[R1:.*]] = arith.subi %[[D0]], %c8 : index
// CHECK:             %[[R2:.*]] = arith.maxsi %[[R1]], %{{.*}} : index
// CHECK:             %[[LOB:.*]] = arith.divui %[[R2]], %c32{{.*}} : index
// CHECK:             %[[LOROW:.*]] = arith.muli %[[LOB]], %c32{{.*}} : index
// Left side of the window: the end of the rows (+ 32 + 1), aligned up,
// at most Nq.
// CHECK:             %[[D1:.*]] = arith.addi %[[LASTK]], %c30 : index
// CHECK:             %[[L2:.*]] = arith.addi %[[D1]], %c33 : index
// CHECK:             %[[L3:.*]] = arith.minsi %[[L2]], %c100 : index
// CHECK:             %[[L4:.*]] = arith.maxsi %[[L3]], %{{.*}} : index
// CHECK:             %[[UPB:.*]] = arith.ceildivui %[[L4]], %c32{{.*}} : index
// CHECK:             %[[UP:.*]] = arith.muli %[[UPB]], %c32{{.*}} : index
// CHECK:             %[[HI1:.*]] = arith.maxsi %[[UP]], %[[LOROW]] : index
// CHECK:             %[[HIROW:.*]] = arith.minsi %[[HI1]], %c100 : index
// CHECK:             %[[LOROW2:.*]] = arith.minsi %[[LOROW]], %[[HIROW]] : index
// As block numbers.
// CHECK:             %[[LO:.*]] = arith.divui %[[LOROW2]], %c32{{.*}} : index
// CHECK:             %[[HI:.*]] = arith.ceildivui %[[HIROW]], %c32{{.*}} : index
// CHECK:             scf.for
// CHECK:               scf.for %[[QB:.*]] = %[[LO]] to %[[HI]] step
// CHECK:                 %[[QSTART:.*]] = arith.muli %[[QB]], %c32{{.*}} : index
// CHECK:                 tensor.pad
// CHECK:                 } : tensor<?x32xbf16> to tensor<32x32xbf16>
// CHECK:                 tensor.pad
// CHECK:                 } : tensor<?x32xbf16> to tensor<32x32xbf16>
// CHECK:                 %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK:                 %[[LSEP:.*]] = tensor.pad
// CHECK-NEXT:            ^bb0
// CHECK-NEXT:              tensor.yield %[[INF]] : f32
// CHECK-NEXT:            } : tensor<?xf32> to tensor<32xf32>
// CHECK:                 fa.attention_backward_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[LSEP]], %{{.*}} dkv(%{{.*}}, %{{.*}}) dq(%{{.*}}) masked(%[[QSTART]], %[[KSTART]], %c100, %c70) mask<window 32, 8> scale 0.176776692 :
// CHECK-SAME:                tensor<32x32xbf16>, tensor<64x32xbf16>, tensor<64x32xbf16>, tensor<32x32xbf16>, tensor<32xf32> -> tensor<64x32xf32>, tensor<64x32xf32>, tensor<32x32xf32>
// CHECK:             %[[DKC:.*]] = tensor.extract_slice %{{.*}}[0, 0] [%[[KLEN]], 32] [1, 1] : tensor<64x32xbf16> to tensor<?x32xbf16>
// CHECK:             tensor.insert_slice %[[DKC]] into %{{.*}}[%[[KSTART]], 0] [%[[KLEN]], 32]
// CHECK:           } {fa.dq_accumulation}
// The padded dQ of the group is cut back to Nq rows.
// CHECK:           tensor.extract_slice %{{.*}}[0, 0, 0] [1, 100, 32] [1, 1, 1] : tensor<1x128x32xbf16> to tensor<1x100x32xbf16>
func.func @window_tails(%q: tensor<1x1x100x32xbf16>, %k: tensor<1x1x70x32xbf16>,
                        %v: tensor<1x1x70x32xbf16>, %o: tensor<1x1x100x32xbf16>,
                        %lse: tensor<1x1x100xf32>, %do: tensor<1x1x100x32xbf16>)
    -> (tensor<1x1x100x32xbf16>, tensor<1x1x70x32xbf16>, tensor<1x1x70x32xbf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<window 32, 8>
      : (tensor<1x1x100x32xbf16>, tensor<1x1x70x32xbf16>, tensor<1x1x70x32xbf16>,
         tensor<1x1x100x32xbf16>, tensor<1x1x100xf32>, tensor<1x1x100x32xbf16>)
      -> (tensor<1x1x100x32xbf16>, tensor<1x1x70x32xbf16>, tensor<1x1x70x32xbf16>)
  return %dq, %dk, %dv : tensor<1x1x100x32xbf16>, tensor<1x1x70x32xbf16>, tensor<1x1x70x32xbf16>
}

// -----

// GQA (8 query heads, 2 kv heads: G = 4) with softcap 30. The head loop runs
// over the 4 query heads of kv head h, i.e. query heads 4h .. 4h+3, and sums
// their dK/dV. The softcap goes to the step (unmasked: no mask, no tail).

// CHECK-LABEL: func.func @gqa_softcap(
// CHECK:         scf.forall (%[[BI:.*]], %[[HKV:.*]]) in (2, 2)
// CHECK:           tensor.empty() : tensor<4x64x32xf32>
// CHECK:           scf.for
// CHECK:             %[[FIRST:.*]] = arith.muli %[[HKV]], %c4 : index
// CHECK:             scf.for %[[H:.*]] = %{{.*}} to %c4 step
// CHECK:               %[[HQ:.*]] = arith.addi %[[FIRST]], %[[H]] : index
// CHECK:               scf.for
// CHECK:                 tensor.extract_slice %{{.*}}[%[[BI]], %[[HQ]], %{{.*}}, 0] [1, 1, 32, 32]
// CHECK:                 fa.attention_backward_step {{.*}} dkv(%{{.*}}, %{{.*}}) dq(%{{.*}}) softcap 3.000000e+01 scale 0.176776692 :
// The group's dQ goes to query heads 4h .. 4h+3 at once.
// CHECK:           tensor.parallel_insert_slice %{{.*}} into %{{.*}}[%[[BI]], %{{.*}}, 0, 0] [1, 4, 64, 32] [1, 1, 1, 1] : tensor<4x64x32xf16> into tensor<2x8x64x32xf16>
func.func @gqa_softcap(%q: tensor<2x8x64x32xf16>, %k: tensor<2x2x64x32xf16>,
                       %v: tensor<2x2x64x32xf16>, %o: tensor<2x8x64x32xf16>,
                       %lse: tensor<2x8x64xf32>, %do: tensor<2x8x64x32xf16>)
    -> (tensor<2x8x64x32xf16>, tensor<2x2x64x32xf16>, tensor<2x2x64x32xf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do softcap 30.0
      : (tensor<2x8x64x32xf16>, tensor<2x2x64x32xf16>, tensor<2x2x64x32xf16>,
         tensor<2x8x64x32xf16>, tensor<2x8x64xf32>, tensor<2x8x64x32xf16>)
      -> (tensor<2x8x64x32xf16>, tensor<2x2x64x32xf16>, tensor<2x2x64x32xf16>)
  return %dq, %dk, %dv : tensor<2x8x64x32xf16>, tensor<2x2x64x32xf16>, tensor<2x2x64x32xf16>
}

// -----

// Deterministic mode, everything dynamic but D, causal. First nest: forall
// over (batch, kv head, key block) with dK/dV as shared outputs and no dQ
// GEMM: its steps have dK/dV accumulators only. Second nest: forall over
// (batch, query head, query block); its kv head is h / G; a sequential loop
// over the visible key blocks, from 0 to ceil(min(qLast + off + 1, Nk) / Bc),
// recomputes P and dS and accumulates dQ: its steps have a dQ accumulator
// only. Both are masked (causal, and the dynamic Nk may have a tail).

// CHECK-LABEL: func.func @deterministic(
// CHECK-SAME:      %[[Q:[a-zA-Z0-9]+]]: tensor<?x?x?x64xf16>, %[[K:[a-zA-Z0-9]+]]: tensor<?x?x?x64xf16>
// CHECK-DAG:     %[[HQ:.*]] = tensor.dim %[[Q]], %c1
// CHECK-DAG:     %[[HKV:.*]] = tensor.dim %[[K]], %c1
// CHECK:         %[[G:.*]] = arith.divui %[[HQ]], %[[HKV]] : index
// CHECK:         %[[NQ:.*]] = tensor.dim %[[Q]], %c2
// CHECK:         %[[NK:.*]] = tensor.dim %[[K]], %c2
// CHECK:         %[[NQB:.*]] = arith.ceildivsi %[[NQ]], %c32
// CHECK:         %[[NKB:.*]] = arith.ceildivsi %[[NK]], %c64
// CHECK:         linalg.generic {{.*}}"reduction"
//
// dK/dV nest.
// CHECK:         %[[KV:.*]]:2 = scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}}, %[[HKV]], %[[NKB]]) shared_outs(%[[DKS:.*]] = %{{.*}}, %[[DVS:.*]] = %{{.*}}) -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[G]] step {{.*}} -> (tensor<64x64xf32>, tensor<64x64xf32>)
// CHECK:             scf.for {{.*}} iter_args(%[[DKA:.*]] = %{{.*}}, %[[DVA:.*]] = %{{.*}}) -> (tensor<64x64xf32>, tensor<64x64xf32>)
// CHECK:               %[[NDK:.*]], %[[NDV:.*]] = fa.attention_backward_step {{.*}} dkv(%[[DKA]], %[[DVA]]) masked(%{{.*}}, %{{.*}}, %[[NQ]], %[[NK]]) mask<causal> scale 1.250000e-01 :
// CHECK-SAME:              -> tensor<64x64xf32>, tensor<64x64xf32>
// CHECK-NEXT:          scf.yield %[[NDK]], %[[NDV]]
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[DKS]]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[DVS]]
// CHECK:         } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
//
// dQ nest.
// CHECK:         %[[DQ:.*]] = scf.forall (%{{.*}}, %[[H:.*]], %[[QB:.*]]) in (%{{.*}}, %[[HQ]], %[[NQB]]) shared_outs(%[[DQS:.*]] = %{{.*}}) -> (tensor<?x?x?x64xf16>)
// CHECK:           %[[KVH:.*]] = arith.divui %[[H]], %[[G]] : index
// CHECK:           %[[QSTART:.*]] = arith.muli %[[QB]], %c32
// The mask's key-block range (key offsets, then block numbers): the end is
// the block after the key the last row's diagonal reaches,
// max(min(qStart + 32, Nq) - 1, qStart) + off + 1, at most Nk.
// CHECK:           %[[QE0:.*]] = arith.addi %[[QSTART]], %c32
// CHECK:           %[[QEND:.*]] = arith.minsi %[[QE0]], %[[NQ]] : index
// CHECK:           %[[QLAST:.*]] = arith.maxsi %{{.*}}, %[[QSTART]] : index
// CHECK:           %[[OFF:.*]] = arith.subi %[[NK]], %[[NQ]] : index
// CHECK:           %[[KE0:.*]] = arith.addi %[[QLAST]], %[[OFF]] : index
// CHECK:           %[[KE1:.*]] = arith.addi %[[KE0]], %c1{{.*}} : index
// CHECK:           %[[KE2:.*]] = arith.minsi %[[NK]], %[[KE1]] : index
// CHECK:           %[[KE3:.*]] = arith.maxsi %[[KE2]], %{{.*}} : index
// CHECK:           %[[KEB:.*]] = arith.ceildivui %[[KE3]], %c64
// CHECK:           %[[KEROW:.*]] = arith.muli %[[KEB]], %c64
// CHECK:           %[[KEND:.*]] = arith.minsi %[[KEROW]], %[[NK]] : index
// CHECK:           %[[KBHI:.*]] = arith.ceildivui %[[KEND]], %c64
// CHECK:           %[[ACC:.*]] = scf.for %{{.*}} = %{{.*}} to %[[KBHI]] step %{{.*}} iter_args(%[[A:.*]] = %{{.*}}) -> (tensor<32x64xf32>)
// CHECK:             %[[KSTART:.*]] = arith.muli %{{.*}}, %c64
// CHECK:             tensor.extract_slice %[[K]][%{{.*}}, %[[KVH]], %[[KSTART]], 0]
// CHECK:             %[[NEW:.*]] = fa.attention_backward_step {{.*}} dq(%[[A]]) masked(%[[QSTART]], %[[KSTART]], %[[NQ]], %[[NK]]) mask<causal> scale 1.250000e-01 :
// CHECK-SAME:            tensor<32x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<32x64xf16>, tensor<32xf32> -> tensor<32x64xf32>
// CHECK-NEXT:        scf.yield %[[NEW]]
// CHECK:           linalg.generic {{.*}} ins(%[[ACC]] : tensor<32x64xf32>)
// CHECK:             arith.mulf
// CHECK:             arith.truncf
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[DQS]][%{{.*}}, %[[H]], %[[QSTART]], 0]
// CHECK:         } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
// CHECK:         return %[[DQ]], %[[KV]]#0, %[[KV]]#1
func.func @deterministic(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>,
                         %v: tensor<?x?x?x64xf16>, %o: tensor<?x?x?x64xf16>,
                         %lse: tensor<?x?x?xf32>, %do: tensor<?x?x?x64xf16>)
    -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal> deterministic
      : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>,
         tensor<?x?x?x64xf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xf16>)
      -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
  return %dq, %dk, %dv : tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>
}

// -----

// When is a step masked? Without a causal/window mask, only when the keys may
// have a tail: a query tail alone needs no mask (padded query rows get an LSE
// of +inf, hence P = 0), a key tail does (keys >= Nk must be hidden).

// CHECK-LABEL: func.func @query_tail_unmasked(
// CHECK:         scf.forall
// CHECK:           tensor.pad
// CHECK:           fa.attention_backward_step
// CHECK-NOT:           masked
// CHECK-SAME:          scale 1.250000e-01 :
// CHECK-SAME:          tensor<32x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<64x64xf32>, tensor<64x64xf32>, tensor<32x64xf32>
func.func @query_tail_unmasked(%q: tensor<1x1x40x64xf32>, %k: tensor<1x1x128x64xf32>,
                               %v: tensor<1x1x128x64xf32>, %o: tensor<1x1x40x64xf32>,
                               %lse: tensor<1x1x40xf32>, %do: tensor<1x1x40x64xf32>)
    -> (tensor<1x1x40x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x64xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do
      : (tensor<1x1x40x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x64xf32>,
         tensor<1x1x40x64xf32>, tensor<1x1x40xf32>, tensor<1x1x40x64xf32>)
      -> (tensor<1x1x40x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x64xf32>)
  return %dq, %dk, %dv : tensor<1x1x40x64xf32>, tensor<1x1x128x64xf32>, tensor<1x1x128x64xf32>
}

// CHECK-LABEL: func.func @key_tail_masked(
// CHECK:         scf.forall
// CHECK:           scf.for %[[KBI:.*]] = {{.*}} iter_args
// CHECK:             %[[KSTART:.*]] = arith.muli %[[KBI]], %c64{{.*}} : index
// CHECK:             scf.for
// CHECK:               scf.for %[[QB:.*]] = {{.*}} iter_args
// CHECK:                 %[[QSTART:.*]] = arith.muli %[[QB]], %c32{{.*}} : index
// CHECK:                 fa.attention_backward_step {{.*}} masked(%[[QSTART]], %[[KSTART]], %c64, %c100) scale 1.250000e-01 :
func.func @key_tail_masked(%q: tensor<1x1x64x64xf32>, %k: tensor<1x1x100x64xf32>,
                           %v: tensor<1x1x100x64xf32>, %o: tensor<1x1x64x64xf32>,
                           %lse: tensor<1x1x64xf32>, %do: tensor<1x1x64x64xf32>)
    -> (tensor<1x1x64x64xf32>, tensor<1x1x100x64xf32>, tensor<1x1x100x64xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do
      : (tensor<1x1x64x64xf32>, tensor<1x1x100x64xf32>, tensor<1x1x100x64xf32>,
         tensor<1x1x64x64xf32>, tensor<1x1x64xf32>, tensor<1x1x64x64xf32>)
      -> (tensor<1x1x64x64xf32>, tensor<1x1x100x64xf32>, tensor<1x1x100x64xf32>)
  return %dq, %dk, %dv : tensor<1x1x64x64xf32>, tensor<1x1x100x64xf32>, tensor<1x1x100x64xf32>
}

// -----

// A kernel configuration on the op decides the tiles (64 queries x 128 keys
// here, over the pass's 32 x 64) and goes on to every loop nest made.

// CHECK-LABEL: func.func @with_kernel_config
// CHECK:         scf.forall
// CHECK:           fa.attention_backward_step {{.*}} : tensor<64x64xbf16>, tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<64x64xbf16>, tensor<64xf32>
// CHECK:         } {fa.kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2>, mapping = [{{.*}}]}
// CHECK:         scf.forall
// CHECK:           fa.attention_backward_step {{.*}} dq(
// CHECK:         } {fa.kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2>, mapping = [{{.*}}]}
func.func @with_kernel_config(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) -> tensor<?x?x?x64xbf16> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q deterministic {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2>} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return %dq : tensor<?x?x?x64xbf16>
}

// -----

// Deterministic with the warp_specialized schedule: one pass, as in the fast
// mode, whose key-block loop asks for a fixed dQ order (the kernel's dQ warp
// adds the key blocks in turn) instead of a second nest for dQ.

// CHECK-LABEL: func.func @deterministic_warp_specialized
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             fa.attention_backward_step {{.*}} dq(
// CHECK:           } {fa.dq_accumulation = "ordered"}
// CHECK-NOT:     scf.forall (
// CHECK:         return
func.func @deterministic_warp_specialized(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) -> tensor<?x?x?x64xbf16> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<causal> deterministic {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return %dq : tensor<?x?x?x64xbf16>
}

// -----

// Packed sequences, fast mode: the forall runs over (sequence, kv head) and
// reads each sequence's offsets; the key-block loop runs to
// ceil(max_seqlen_k / Bc), a block past the sequence's keys (max(min(Bc,
// Lk - k0), 0) rows) seen by no query block. The results start as zeros
// (rows of no sequence keep them); dK / dV are the sequence's rows of its kv
// head, dQ its rows of the group's heads.

// CHECK-LABEL: func.func @varlen
// CHECK-SAME:    %[[MQ:[a-z0-9]+]]: index, %[[MK:[a-z0-9]+]]: index)
// CHECK:         %[[DQ0:.*]] = linalg.fill {{.*}} -> tensor<4x?x64xf32>
// CHECK:         %[[DK0:.*]] = linalg.fill {{.*}} -> tensor<2x?x64xf32>
// CHECK:         %[[DV0:.*]] = linalg.fill {{.*}} -> tensor<2x?x64xf32>
// CHECK:         %[[NKB:.*]] = arith.ceildivui %[[MK]], %{{.*}}
// CHECK:         scf.forall (%[[S:.*]], %[[H:.*]]) in (%{{.*}}, 2) shared_outs(%[[DQ:.*]] = %[[DQ0]], %[[DK:.*]] = %[[DK0]], %[[DV:.*]] = %[[DV0]])
// CHECK:           %[[QB:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:           %[[KB:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:           arith.subi
// CHECK:           %[[LK:.*]] = arith.subi
// CHECK:           tensor.extract_slice %[[DK]][%[[H]], %[[KB]], 0] [1, %[[LK]], 64]
// CHECK:           scf.for %[[KBLK:.*]] = %{{.*}} to %[[NKB]]
// CHECK:             %[[K0:.*]] = arith.muli %[[KBLK]]
// CHECK:             %[[KLEN:.*]] = arith.maxsi
// CHECK:             %[[KROW:.*]] = arith.addi %[[KB]], %[[K0]]
// CHECK:             tensor.extract_slice %{{.*}}[%[[H]], %[[KROW]], 0] [1, %[[KLEN]], 64]
// CHECK:             %[[HAS:.*]] = arith.cmpi sgt, %[[KLEN]]
// CHECK:             %[[QBHI:.*]] = arith.select %[[HAS]]
// CHECK:             scf.for
// CHECK:               scf.for %{{.*}} = %{{.*}} to %[[QBHI]]
// CHECK:                 fa.attention_backward_step {{.*}} mask<causal>
// CHECK:           } {fa.dq_accumulation}
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[DQ]][%{{.*}}, %[[QB]], 0] [2, %{{.*}}, 64]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[DK]][%[[H]], %[[KB]], 0] [1, %[[LK]], 64]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[DV]][%[[H]], %[[KB]], 0] [1, %[[LK]], 64]
// CHECK-NOT:     fa.attention_varlen_backward
func.func @varlen(%q: tensor<4x?x64xf32>, %k: tensor<2x?x64xf32>, %v: tensor<2x?x64xf32>, %o: tensor<4x?x64xf32>, %l: tensor<4x?xf32>, %do: tensor<4x?x64xf32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index, %mk: index) -> (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>) {
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %v, %o, %l, %do seqlens(%cq, %ck) max_seqlen_q(%m) max_seqlen_k(%mk) mask<causal> : (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?xf32>, tensor<4x?x64xf32>, tensor<?xi32>, tensor<?xi32>, index, index) -> (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>)
  return %dq, %dk, %dv : tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>
}

// -----

// Packed sequences with run-time head counts: the group size is Hq / Hkv,
// computed (not folded from the unknown static sizes).

// CHECK-LABEL: func.func @varlen_dynamic_heads
// CHECK:         %[[HQ:.*]] = tensor.dim %arg0, %c0{{.*}} : tensor<?x?x64xf16>
// CHECK:         %[[HKV:.*]] = tensor.dim %arg1, %c0{{.*}} : tensor<?x?x64xf16>
// CHECK:         %[[G:.*]] = arith.divui %[[HQ]], %[[HKV]] : index
// CHECK:         scf.forall
// CHECK:           arith.muli %{{.*}}, %[[G]] : index
func.func @varlen_dynamic_heads(%q: tensor<?x?x64xf16>, %k: tensor<?x?x64xf16>, %l: tensor<?x?xf32>, %cq: tensor<?xi32>, %m: index) -> tensor<?x?x64xf16> {
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %k, %q, %l, %q seqlens(%cq, %cq) max_seqlen_q(%m) max_seqlen_k(%m) : (tensor<?x?x64xf16>, tensor<?x?x64xf16>, tensor<?x?x64xf16>, tensor<?x?x64xf16>, tensor<?x?xf32>, tensor<?x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index, index) -> (tensor<?x?x64xf16>, tensor<?x?x64xf16>, tensor<?x?x64xf16>)
  return %dq : tensor<?x?x64xf16>
}

// -----

// Packed sequences, deterministic mode: a loop over the sequences of the
// dense backward on their rows (batches of one), each then tiled like any
// other.

// CHECK-LABEL: func.func @varlen_deterministic
// CHECK:         scf.for %[[S:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:           tensor.extract %{{.*}}[%[[S]]] : tensor<?xi32>
// CHECK:           scf.forall
// CHECK:           tensor.insert_slice
// CHECK:         tensor.collapse_shape
// CHECK-NOT:     fa.attention_varlen_backward
// CHECK-NOT:     fa.attention_backward
func.func @varlen_deterministic(%q: tensor<4x?x64xf32>, %k: tensor<2x?x64xf32>, %v: tensor<2x?x64xf32>, %o: tensor<4x?x64xf32>, %l: tensor<4x?xf32>, %do: tensor<4x?x64xf32>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) -> (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>) {
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %v, %o, %l, %do seqlens(%cq, %ck) max_seqlen_q(%m) max_seqlen_k(%m) mask<causal> deterministic : (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>, tensor<4x?x64xf32>, tensor<4x?xf32>, tensor<4x?x64xf32>, tensor<?xi32>, tensor<?xi32>, index, index) -> (tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>)
  return %dq, %dk, %dv : tensor<4x?x64xf32>, tensor<2x?x64xf32>, tensor<2x?x64xf32>
}
