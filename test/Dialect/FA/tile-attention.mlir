// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=32" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=32" --canonicalize | FileCheck %s --check-prefix=CANON

// fa.attention becomes a parallel loop over (batch, head, query block) that
// holds a sequential loop over key blocks. The loop carries the online-softmax
// state (acc, max, sum) through fa.online_attention; the state is normalized
// once, after the loop, by fa.online_attention_finalize.

// CHECK-LABEL: func.func @static_mha
// CHECK-SAME:    %[[Q:[a-zA-Z0-9]+]]: tensor<2x4x128x64xf16>, %[[K:[a-zA-Z0-9]+]]: tensor<2x4x96x64xf16>, %[[V:[a-zA-Z0-9]+]]: tensor<2x4x96x64xf16>
// CHECK-DAG:     %[[BR:.*]] = arith.constant 64 : index
// CHECK-DAG:     %[[BC:.*]] = arith.constant 32 : index
// Static sizes fold: 2 batches x 4 heads x ceil(128 / 64) query blocks.
// CHECK:         %[[RES:.*]]:2 = scf.forall (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) in (2, 4, 2) shared_outs(%[[O:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}})
// CHECK:           %[[Q0:.*]] = arith.muli %[[QB]], %[[BR]]
// The query tile is padded to a static 64x64 tile.
// CHECK:           tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[Q0]], 0]
// CHECK:           %[[QT:.*]] = tensor.pad
// CHECK:           } : tensor<?x64xf16> to tensor<64x64xf16>
// Initial state: acc = 0, max = -inf, sum = 0.
// CHECK:           %[[ACC0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64x64xf32>)
// CHECK:           %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:           %[[M0:.*]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<64xf32>)
// CHECK:           %[[S0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<64xf32>)
// CHECK:           %[[STATE:.*]]:3 = scf.for %[[K0:.*]] = %{{.*}} to %{{.*}} step %[[BC]] iter_args(%[[ACC:.*]] = %[[ACC0]], %[[M:.*]] = %[[M0]], %[[S:.*]] = %[[S0]])
// CHECK:             tensor.extract_slice %[[K]][%[[B]], %{{.*}}, %[[K0]], 0]
// CHECK:             %[[KT:.*]] = tensor.pad
// CHECK:             } : tensor<?x64xf16> to tensor<32x64xf16>
// CHECK:             %[[VT:.*]] = tensor.pad
// CHECK:             } : tensor<?x64xf16> to tensor<32x64xf16>
// Every step is masked here (keys past Nk are padding); fa-specialize-masks
// removes the mask where it can.
// CHECK:             %[[NA:.*]], %[[NM:.*]], %[[NS:.*]] = fa.online_attention %[[QT]], %[[KT]], %[[VT]] into %[[ACC]], %[[M]], %[[S]] masked(%[[Q0]], %[[K0]], %{{.*}}, %{{.*}}) scale 1.250000e-01
// CHECK:             scf.yield %[[NA]], %[[NM]], %[[NS]]
// CHECK:           }
// CHECK:           %[[OUT:.*]], %[[LSE:.*]] = fa.online_attention_finalize %[[STATE]]#0, %[[STATE]]#1, %[[STATE]]#2 : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf16>
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[O]][%[[B]], %[[H]], %[[Q0]], 0]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[L]][%[[B]], %[[H]], %[[Q0]]]
// The launch grid of the GPU conversion: batch on z, heads on y, query
// blocks on x.
// CHECK:         } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
// CHECK:         return %[[RES]]#0, %[[RES]]#1
// CHECK-NOT:     fa.attention
func.func @static_mha(%q: tensor<2x4x128x64xf16>, %k: tensor<2x4x96x64xf16>, %v: tensor<2x4x96x64xf16>) -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>) {
  %o, %l = fa.attention %q, %k, %v : (tensor<2x4x128x64xf16>, tensor<2x4x96x64xf16>, tensor<2x4x96x64xf16>) -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return %o, %l : tensor<2x4x128x64xf16>, tensor<2x4x128xf32>
}

// -----

// Dynamic batch, heads and lengths; grouped-query attention reads key/value
// head h / (Hq / Hkv); the mask attributes travel to the step.

// CHECK-LABEL: func.func @dynamic_gqa_causal_softcap
// CHECK-DAG:     %[[HQ:.*]] = tensor.dim %arg0, %c1
// CHECK-DAG:     %[[HKV:.*]] = tensor.dim %arg1, %c1
// CHECK:         %[[G:.*]] = arith.divui %[[HQ]], %[[HKV]]
// CHECK:         scf.forall (%{{.*}}, %[[H:.*]], %{{.*}}) in
// Tail rows: min(Br, Nq - q0).
// CHECK:           arith.minsi
// CHECK:           %[[KVH:.*]] = arith.divui %[[H]], %[[G]]
// CHECK:           scf.for
// CHECK:             tensor.extract_slice %arg1[%{{.*}}, %[[KVH]], %{{.*}}, 0]
// CHECK:             fa.online_attention {{.*}} masked({{.*}}) mask<window 16, 0> softcap 3.000000e+01 scale 5.000000e-01 : tensor<64x128xbf16>, tensor<32x128xbf16>, tensor<32x32xbf16> -> tensor<64x32xf32>, tensor<64xf32>
// CHECK:           fa.online_attention_finalize {{.*}} -> tensor<64x32xbf16>
func.func @dynamic_gqa_causal_softcap(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x32xbf16>) -> (tensor<?x?x?x32xbf16>, tensor<?x?x?xf32>) {
  %o, %l = fa.attention %q, %k, %v mask<window 16, 0> softcap 30.0 scale 0.5 : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x32xbf16>) -> (tensor<?x?x?x32xbf16>, tensor<?x?x?xf32>)
  return %o, %l : tensor<?x?x?x32xbf16>, tensor<?x?x?xf32>
}

// -----

// The result types may be more or less static than the operands say (the
// verifier only asks the sizes to agree): the inits take B, Hq and Nq from q
// and Dv from v, static wherever q or the declared type knows the size, and
// the loop's results are cast to the declared types. Here lse has more
// dynamic sizes than out.

// CHECK-LABEL: func.func @lse_more_dynamic_than_out
// CHECK:         %[[OI:.*]] = tensor.empty() : tensor<1x1x16x64xf32>
// CHECK:         %[[LI:.*]] = tensor.empty() : tensor<1x1x16xf32>
// CHECK:         %[[RES:.*]]:2 = scf.forall {{.*}} shared_outs(%{{.*}} = %[[OI]], %{{.*}} = %[[LI]]) -> (tensor<1x1x16x64xf32>, tensor<1x1x16xf32>)
// CHECK:         %[[LSE:.*]] = tensor.cast %[[RES]]#1 : tensor<1x1x16xf32> to tensor<?x?x?xf32>
// CHECK:         return %[[RES]]#0, %[[LSE]]
func.func @lse_more_dynamic_than_out(%q: tensor<1x1x16x64xf32>, %k: tensor<1x1x16x64xf32>, %v: tensor<1x1x16x64xf32>) -> (tensor<1x1x16x64xf32>, tensor<?x?x?xf32>) {
  %o, %l = fa.attention %q, %k, %v : (tensor<1x1x16x64xf32>, tensor<1x1x16x64xf32>, tensor<1x1x16x64xf32>) -> (tensor<1x1x16x64xf32>, tensor<?x?x?xf32>)
  return %o, %l : tensor<1x1x16x64xf32>, tensor<?x?x?xf32>
}

// -----

// The dynamic sizes of out and lse sit at different positions: each init
// size is q's size of the dimension it means (lse's Nq is q's dim 2, not
// its dim 0), and out's Dv is v's head dim, not q's.

// CHECK-LABEL: func.func @results_dynamic_elsewhere
// CHECK-SAME:    %[[Q:[a-zA-Z0-9]+]]: tensor<?x4x?x64xf32>
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[B:.*]] = tensor.dim %[[Q]], %[[C0]]
// CHECK-DAG:     %[[NQ:.*]] = tensor.dim %[[Q]], %[[C2]]
// CHECK:         %[[OI:.*]] = tensor.empty() : tensor<2x4x32x32xf32>
// CHECK:         %[[LI:.*]] = tensor.empty(%[[B]], %[[NQ]]) : tensor<?x4x?xf32>
// CHECK:         %[[RES:.*]]:2 = scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (%[[B]], 4, %{{.*}}) shared_outs(%{{.*}} = %[[OI]], %{{.*}} = %[[LI]])
// CHECK:         %[[OUT:.*]] = tensor.cast %[[RES]]#0 : tensor<2x4x32x32xf32> to tensor<2x?x32x?xf32>
// CHECK:         return %[[OUT]], %[[RES]]#1 : tensor<2x?x32x?xf32>, tensor<?x4x?xf32>
func.func @results_dynamic_elsewhere(%q: tensor<?x4x?x64xf32>, %k: tensor<2x4x?x64xf32>, %v: tensor<2x4x?x32xf32>) -> (tensor<2x?x32x?xf32>, tensor<?x4x?xf32>) {
  %o, %l = fa.attention %q, %k, %v : (tensor<?x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x32xf32>) -> (tensor<2x?x32x?xf32>, tensor<?x4x?xf32>)
  return %o, %l : tensor<2x?x32x?xf32>, tensor<?x4x?xf32>
}

// -----

// Batch 1, one head, one query block: the forall is (1, 1, 1) and mapped.
// MLIR 22's canonicalization folds the unit dimensions of an unmapped
// scf.forall (down to no loop at all here) but leaves a mapped one whole,
// so the GPU conversion still finds its (batch, head, query block) nest.

// CHECK-LABEL: func.func @unit_dims
// CHECK:         scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 1, 1)
// CHECK:         } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
// CANON-LABEL: func.func @unit_dims
// CANON:         scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 1, 1)
// CANON:         } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
func.func @unit_dims(%q: tensor<1x1x64x64xf16>, %k: tensor<1x1x?x64xf16>, %v: tensor<1x1x?x64xf16>) -> (tensor<1x1x64x64xf16>, tensor<1x1x64xf32>) {
  %o, %l = fa.attention %q, %k, %v mask<causal> : (tensor<1x1x64x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) -> (tensor<1x1x64x64xf16>, tensor<1x1x64xf32>)
  return %o, %l : tensor<1x1x64x64xf16>, tensor<1x1x64xf32>
}

// -----

// A kernel configuration on the op decides the tiles (128 x 64 here, over
// the pass's 64 x 32) and goes on to the loop nest for the GPU conversion.

// CHECK-LABEL: func.func @with_kernel_config
// CHECK:         scf.forall {{.*}} {
// CHECK:           arith.muli %{{.*}}, %c128 : index
// CHECK:           scf.for
// CHECK:             fa.online_attention {{.*}} : tensor<128x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>
// CHECK:         } {fa.kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 64, warps = 4, stages = 2>, mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
func.func @with_kernel_config(%q: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x64xf16>
}

// -----

// A run-time scale and softcap are threaded to every step as operands.
// CHECK-LABEL: func.func @runtime_scalars
// CHECK-SAME:    %[[S:[a-zA-Z0-9]+]]: f32, %[[C:[a-zA-Z0-9]+]]: f32
// CHECK:         scf.for
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<causal> softcap %[[C]] scale %[[S]] :
func.func @runtime_scalars(%q: tensor<1x2x?x64xbf16>, %s: f32, %c: f32)
    -> tensor<1x2x?x64xbf16> {
  %o, %l = fa.attention %q, %q, %q mask<causal> softcap %c scale %s
      : (tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>, f32, f32)
      -> (tensor<1x2x?x64xbf16>, tensor<1x2x?xf32>)
  return %o : tensor<1x2x?x64xbf16>
}

// -----

// Packed sequences: the forall runs over the B = dim(cu_seqlens) - 1
// sequences and ceil(max_seqlen_q / Br) query blocks; each block reads its
// sequence's offsets and lengths, slices rows base + start of the packed
// [H, T, D] tensors, and a block past its sequence's end visits no key.

// CHECK-LABEL: func.func @varlen_causal
// CHECK-SAME:    %[[Q:[a-zA-Z0-9]+]]: tensor<4x?x64xf16>, %[[K:[a-zA-Z0-9]+]]: tensor<2x?x64xf16>, %{{.*}}: tensor<2x?x64xf16>, %[[CUQ:[a-zA-Z0-9]+]]: tensor<?xi32>, %[[CUK:[a-zA-Z0-9]+]]: tensor<?xi32>, %[[MAXQ:[a-zA-Z0-9]+]]: index
// CHECK:         %[[NB:.*]] = arith.subi %{{.*}}, %{{c1(_[0-9]+)?}}
// CHECK:         %[[QBLOCKS:.*]] = arith.ceildivui %[[MAXQ]], %{{c64(_[0-9]+)?}}
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %[[QB:.*]]) in (%[[NB]], 4, %[[QBLOCKS]]) shared_outs(%[[O:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}) -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
// CHECK:           %[[QB0:.*]] = tensor.extract %[[CUQ]][%[[B]]]
// CHECK:           %[[QBASE:.*]] = arith.index_cast %[[QB0]]
// CHECK:           %[[KB0:.*]] = tensor.extract %[[CUK]][%[[B]]]
// CHECK:           %[[KBASE:.*]] = arith.index_cast %[[KB0]]
// CHECK:           %[[NQ:.*]] = arith.subi %{{.*}}, %[[QBASE]]
// CHECK:           %[[NK:.*]] = arith.subi %{{.*}}, %[[KBASE]]
// CHECK:           %[[Q0:.*]] = arith.muli %[[QB]], %{{c64(_[0-9]+)?}}
// CHECK:           %[[ROWS:.*]] = arith.maxsi %{{.*}}, %{{c0(_[0-9]+)?}}
// CHECK:           %[[HAS:.*]] = arith.cmpi sgt, %[[ROWS]], %{{c0(_[0-9]+)?}}
// CHECK:           %[[KEND:.*]] = arith.select %[[HAS]], %[[NK]], %{{c0(_[0-9]+)?}}
// CHECK:           %[[QROW:.*]] = arith.addi %[[QBASE]], %[[Q0]]
// CHECK:           tensor.extract_slice %[[Q]][%[[H]], %[[QROW]], 0] [1, %[[ROWS]], 64] [1, 1, 1] : tensor<4x?x64xf16> to tensor<?x64xf16>
// CHECK:           scf.for %[[K0:.*]] = %{{c0(_[0-9]+)?}} to %[[KEND]] step %{{c32(_[0-9]+)?}}
// CHECK:             %[[KROW:.*]] = arith.addi %[[KBASE]], %[[K0]]
// CHECK:             tensor.extract_slice %[[K]][%{{.*}}, %[[KROW]], 0]
// Masks are per sequence: its own lengths.
// CHECK:             fa.online_attention {{.*}} masked(%[[Q0]], %[[K0]], %[[NQ]], %[[NK]]) mask<causal>
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[O]][%[[H]], %[[QROW]], 0] [1, %[[ROWS]], 64]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[L]][%[[H]], %[[QROW]]] [1, %[[ROWS]]]
func.func @varlen_causal(%q: tensor<4x?x64xf16>, %k: tensor<2x?x64xf16>, %v: tensor<2x?x64xf16>, %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>, %max_q: index) -> (tensor<4x?x64xf16>, tensor<4x?xf32>) {
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cu_q, %cu_k) max_seqlen_q(%max_q) mask<causal> : (tensor<4x?x64xf16>, tensor<2x?x64xf16>, tensor<2x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index) -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  return %o, %l : tensor<4x?x64xf16>, tensor<4x?xf32>
}

// -----

// A paged cache: key block k0 of batch b is a fa.paged_key_block of the
// pools (rows k0 mod S of page page_table[b, k0 / S], zeros past the cache
// length); the key loop ends at the batch's cache length (none for a query
// block without rows).

// CHECK-LABEL: func.func @paged
// CHECK-SAME:    %{{.*}}: tensor<?x8x1x64xbf16>, %[[KP:[a-zA-Z0-9]+]]: tensor<?x2x64x64xbf16>, %[[VP:[a-zA-Z0-9]+]]: tensor<?x2x64x64xbf16>, %[[T:[a-zA-Z0-9]+]]: tensor<?x?xi32>, %[[LENS:[a-zA-Z0-9]+]]: tensor<?xi32>
// CHECK:         scf.forall (%[[B:.*]], %[[H:.*]], %{{.*}}) in (%{{.*}}, 8, 1)
// CHECK:           %[[N:.*]] = tensor.extract %[[LENS]][%[[B]]]
// CHECK:           %[[NK:.*]] = arith.index_cast %[[N]]
// CHECK:           %[[KEND:.*]] = arith.select %{{.*}}, %[[NK]], %{{c0(_[0-9]+)?}}
// CHECK:           %[[KVH:.*]] = arith.divui %[[H]], %{{c4(_[0-9]+)?}}
// CHECK:           scf.for %[[K0:.*]] = %{{c0(_[0-9]+)?}} to %[[KEND]] step %{{c32(_[0-9]+)?}}
// CHECK:             %[[KT:.*]] = fa.paged_key_block %[[KP]][%[[B]], %[[KVH]], %[[K0]]] table(%[[T]]) limit(%[[NK]]) : tensor<?x2x64x64xbf16>, tensor<?x?xi32> -> tensor<32x64xbf16>
// CHECK:             %[[VT:.*]] = fa.paged_key_block %[[VP]][%[[B]], %[[KVH]], %[[K0]]] table(%[[T]]) limit(%[[NK]])
// CHECK:             fa.online_attention %{{.*}}, %[[KT]], %[[VT]] into {{.*}} masked(%{{.*}}, %[[K0]], %{{c1(_[0-9]+)?}}, %[[NK]])
func.func @paged(%q: tensor<?x8x1x64xbf16>, %kp: tensor<?x2x64x64xbf16>, %vp: tensor<?x2x64x64xbf16>, %t: tensor<?x?xi32>, %n: tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>) {
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n) : (tensor<?x8x1x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>)
  return %o, %l : tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
}

// -----

// Pages smaller than the key block: a block of 32 keys spans two pages of 16
// (and one of 24 keys parts of two or three).

// CHECK-LABEL: func.func @paged_spanning
// CHECK:         scf.for %[[K0:.*]] = %{{c0(_[0-9]+)?}} to %{{.*}} step %{{c32(_[0-9]+)?}}
// CHECK:           fa.paged_key_block %{{.*}}[%{{.*}}, %{{.*}}, %[[K0]]] table(%{{.*}}) limit(%{{.*}}) : tensor<?x1x16x64xf16>, tensor<1x?xi32> -> tensor<32x64xf16>
// CHECK-LABEL: func.func @paged_odd_size
// CHECK:           fa.paged_key_block {{.*}} : tensor<?x1x24x64xf16>, tensor<1x?xi32> -> tensor<32x64xf16>
func.func @paged_spanning(%q: tensor<1x1x1x64xf16>, %kp: tensor<?x1x16x64xf16>, %t: tensor<1x?xi32>, %n: tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>) {
  %o, %l = fa.attention_paged %q, %kp, %kp pages(%t) seqlens(%n) : (tensor<1x1x1x64xf16>, tensor<?x1x16x64xf16>, tensor<?x1x16x64xf16>, tensor<1x?xi32>, tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>)
  return %o, %l : tensor<1x1x1x64xf16>, tensor<1x1x1xf32>
}
func.func @paged_odd_size(%q: tensor<1x1x1x64xf16>, %kp: tensor<?x1x24x64xf16>, %t: tensor<1x?xi32>, %n: tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>) {
  %o, %l = fa.attention_paged %q, %kp, %kp pages(%t) seqlens(%n) : (tensor<1x1x1x64xf16>, tensor<?x1x24x64xf16>, tensor<?x1x24x64xf16>, tensor<1x?xi32>, tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>)
  return %o, %l : tensor<1x1x1x64xf16>, tensor<1x1x1xf32>
}
