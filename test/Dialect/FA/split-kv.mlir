// RUN: fa-opt %s --split-input-file --fa-split-kv="splits=3" | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-split-kv | FileCheck %s --check-prefix=AUTO
// RUN: fa-opt %s --split-input-file --fa-split-kv="multiprocessors=132 blocks-per-multiprocessor=1 max-splits=16" | FileCheck %s --check-prefix=FIXED
// RUN: not fa-opt %s --fa-split-kv="max-splits=0" 2>&1 | FileCheck %s --check-prefix=OPTION

// The loop nest of fa-tile-attention for one query per sequence (block-q 16,
// block-kv 32): each (batch, head) has one query block, which walks all Nk
// keys. fa-split-kv gives each query block S chunks of whole key blocks:
// the forall runs over (B, H, 1 * S), each iteration clamps the key loop to
// its chunk and writes an f32 partial at head h * S + s, and
// fa.attention_merge_splits combines the S partials.

// CHECK-LABEL: func.func @decode
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[NK:.*]] = tensor.dim %arg1, %c2
// Partials: [B, H * S, Nq, Dv] and [B, H * S, Nq] in f32.
// CHECK:         %[[PO:.*]] = tensor.empty() : tensor<2x12x1x64xf32>
// CHECK:         %[[PL:.*]] = tensor.empty() : tensor<2x12x1xf32>
// CHECK:         %[[R:.*]]:2 = scf.forall (%[[B:.*]], %[[H:.*]], %[[X:.*]]) in (2, 4, 3) shared_outs(%[[O:.*]] = %[[PO]], %[[L:.*]] = %[[PL]])
// CHECK:           %[[QB:.*]] = arith.divui %[[X]], %[[C3]]
// CHECK:           %[[S:.*]] = arith.remui %[[X]], %[[C3]]
// The query block's tiles come from qb = x / S.
// CHECK:           arith.muli %[[QB]], %c16
// The chunk: ceil(ceil((hi - lo) / 32) / S) blocks of 32 keys from
// lo + s * that, within [lo, hi).
// CHECK:           %[[HI:.*]] = arith.maxsi %c0, %[[NK]]
// CHECK:           %[[SPAN:.*]] = arith.subi %[[HI]], %c0
// CHECK:           %[[NB:.*]] = arith.ceildivui %[[SPAN]], %c32
// CHECK:           %[[PB:.*]] = arith.ceildivui %[[NB]], %[[C3]]
// CHECK:           %[[PER:.*]] = arith.muli %[[PB]], %c32
// CHECK:           %[[OFF:.*]] = arith.muli %[[S]], %[[PER]]
// CHECK:           %[[START:.*]] = arith.addi %c0, %[[OFF]]
// CHECK:           %[[KLO:.*]] = arith.minsi %[[START]], %[[HI]]
// CHECK:           %[[END:.*]] = arith.addi %[[KLO]], %[[PER]]
// CHECK:           %[[KHI:.*]] = arith.minsi %[[END]], %[[HI]]
// Each loop bound clamped to [kLo, kHi].
// CHECK:           %[[LB0:.*]] = arith.maxsi %c0, %[[KLO]]
// CHECK:           %[[LB:.*]] = arith.minsi %[[LB0]], %[[KHI]]
// CHECK:           %[[UB0:.*]] = arith.maxsi %[[NK]], %[[KLO]]
// CHECK:           %[[UB:.*]] = arith.minsi %[[UB0]], %[[KHI]]
// CHECK:           %[[ST:.*]]:3 = scf.for %{{.*}} = %[[LB]] to %[[UB]] step %c32
// CHECK:             fa.online_attention
// The partial is normalized in f32.
// CHECK:           %[[OUT:.*]], %[[LSE:.*]] = fa.online_attention_finalize %[[ST]]#0, %[[ST]]#1, %[[ST]]#2 : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf32>
// CHECK:           %[[ROWS:.*]] = tensor.extract_slice %[[OUT]][0, 0] [1, 64] [1, 1] : tensor<16x64xf32> to tensor<1x64xf32>
// CHECK:           %[[HS:.*]] = arith.muli %[[H]], %[[C3]]
// CHECK:           %[[PH:.*]] = arith.addi %[[HS]], %[[S]]
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %[[ROWS]] into %[[O]][%[[B]], %[[PH]], %{{.*}}, 0] [1, 1, 1, 64]
// CHECK:             tensor.parallel_insert_slice %{{.*}} into %[[L]][%[[B]], %[[PH]], %{{.*}}] [1, 1, 1]
// CHECK:         } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
// CHECK:         %[[EO:.*]] = tensor.expand_shape %[[R]]#0 {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 4, 3, 1, 64] : tensor<2x12x1x64xf32> into tensor<2x4x3x1x64xf32>
// CHECK:         %[[EL:.*]] = tensor.expand_shape %[[R]]#1 {{\[}}[0], [1, 2], [3]] output_shape [2, 4, 3, 1] : tensor<2x12x1xf32> into tensor<2x4x3x1xf32>
// CHECK:         %[[M:.*]], %[[ML:.*]] = fa.attention_merge_splits %[[EO]], %[[EL]] : tensor<2x4x3x1x64xf32>, tensor<2x4x3x1xf32> -> tensor<2x4x1x64xf16>, tensor<2x4x1xf32>
// CHECK:         return %[[M]], %[[ML]]

// With splits=0 the count is computed at run time from the launch device's
// SM count: max(1, min(2 * SMS / tiles, key blocks, 64)), tiles = 2 * 4 * 1.
// AUTO-LABEL: func.func @decode
// AUTO:         %[[SMS:.*]] = fagpu.host_multiprocessor_count
// AUTO:         %[[SLOTS:.*]] = arith.muli %[[SMS]], %c2
// AUTO:         %[[BY:.*]] = arith.divui %[[SLOTS]], %c8
// AUTO:         %[[KB:.*]] = arith.ceildivui %{{.*}}, %c32
// AUTO:         %[[A:.*]] = arith.minui %[[BY]], %[[KB]]
// AUTO:         %[[B:.*]] = arith.minui %[[A]], %c64
// AUTO:         %[[S:.*]] = arith.maxui %[[B]], %c1
// AUTO:         %[[HS:.*]] = arith.muli %[[S]], %c4
// AUTO:         tensor.empty(%[[HS]]) : tensor<2x?x1x64xf32>
// AUTO:         scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (2, 4, %[[S]])
// AUTO:         fa.attention_merge_splits {{.*}} : tensor<2x4x?x1x64xf32>, tensor<2x4x?x1xf32>

// A fixed SM count: min(132 * 1 / 8, key blocks, 16), 132 / 8 folded.
// FIXED-LABEL: func.func @decode
// FIXED-NOT:     fagpu.host_multiprocessor_count
// FIXED:         %[[KB:.*]] = arith.ceildivui
// FIXED:         arith.minui %[[KB]], %c16

// OPTION: error: fa-split-kv: max-splits must be at least 1, got 0

func.func @decode(%q: tensor<2x4x1x64xf16>, %k: tensor<2x4x?x64xf16>, %v: tensor<2x4x?x64xf16>) -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %nk = tensor.dim %k, %c2 : tensor<2x4x?x64xf16>
  %o0 = tensor.empty() : tensor<2x4x1x64xf16>
  %l0 = tensor.empty() : tensor<2x4x1xf32>
  %r:2 = scf.forall (%b, %h, %qb) in (2, 4, 1) shared_outs(%o = %o0, %l = %l0) -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>) {
    %q0 = arith.muli %qb, %c16 : index
    %qs = tensor.extract_slice %q[%b, %h, %q0, 0] [1, 1, 1, 64] [1, 1, 1, 1] : tensor<2x4x1x64xf16> to tensor<1x64xf16>
    %qt = tensor.pad %qs low[0, 0] high[15, 0] {
    ^bb0(%i: index, %j: index):
      %p = arith.constant 0.000000e+00 : f16
      tensor.yield %p : f16
    } : tensor<1x64xf16> to tensor<16x64xf16>
    %e = tensor.empty() : tensor<16x64xf32>
    %acc0 = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
    %e1 = tensor.empty() : tensor<16xf32>
    %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
    %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
    %st:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%acc = %acc0, %m = %m0, %s = %s0) -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
      %rest = arith.subi %nk, %k0 : index
      %len = arith.minsi %rest, %c32 : index
      %hp = arith.subi %c32, %len : index
      %ks = tensor.extract_slice %k[%b, %h, %k0, 0] [1, 1, %len, 64] [1, 1, 1, 1] : tensor<2x4x?x64xf16> to tensor<?x64xf16>
      %vs = tensor.extract_slice %v[%b, %h, %k0, 0] [1, 1, %len, 64] [1, 1, 1, 1] : tensor<2x4x?x64xf16> to tensor<?x64xf16>
      %kt = tensor.pad %ks low[0, 0] high[%hp, 0] {
      ^bb0(%i: index, %j: index):
        %p = arith.constant 0.000000e+00 : f16
        tensor.yield %p : f16
      } : tensor<?x64xf16> to tensor<32x64xf16>
      %vt = tensor.pad %vs low[0, 0] high[%hp, 0] {
      ^bb0(%i: index, %j: index):
        %p = arith.constant 0.000000e+00 : f16
        tensor.yield %p : f16
      } : tensor<?x64xf16> to tensor<32x64xf16>
      %na, %nm, %ns = fa.online_attention %qt, %kt, %vt into %acc, %m, %s masked(%q0, %k0, %c1, %nk) scale 1.250000e-01 : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<16x64xf32>, tensor<16xf32>
      scf.yield %na, %nm, %ns : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
    }
    %out, %lse = fa.online_attention_finalize %st#0, %st#1, %st#2 : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf16>
    %orow = tensor.extract_slice %out[0, 0] [1, 64] [1, 1] : tensor<16x64xf16> to tensor<1x64xf16>
    %lrow = tensor.extract_slice %lse[0] [1] [1] : tensor<16xf32> to tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %orow into %o[%b, %h, %q0, 0] [1, 1, 1, 64] [1, 1, 1, 1] : tensor<1x64xf16> into tensor<2x4x1x64xf16>
      tensor.parallel_insert_slice %lrow into %l[%b, %h, %q0] [1, 1, 1] [1, 1, 1] : tensor<1xf32> into tensor<2x4x1xf32>
    }
  } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
  return %r#0, %r#1 : tensor<2x4x1x64xf16>, tensor<2x4x1xf32>
}

// -----

// A paged cache (key blocks are fa.paged_key_block of 64-key pages): a
// query block sees at most dim(t, 1) * 64 keys, which bounds the split
// count (not K's 64 rows, one page).
// AUTO-LABEL: func.func @paged_decode
// AUTO-SAME:    %[[T:[a-zA-Z0-9]+]]: tensor<2x?xi32>
// AUTO:         %[[PAGES:.*]] = tensor.dim %[[T]], %c1
// AUTO:         %[[NK:.*]] = arith.muli %[[PAGES]], %c64
// AUTO:         %[[KB:.*]] = arith.ceildivui %[[NK]], %c32
// AUTO:         arith.minui %{{.*}}, %[[KB]]
func.func @paged_decode(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x64x64xf16>, %vp: tensor<?x4x64x64xf16>, %t: tensor<2x?xi32>, %lens: tensor<2xi32>) -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %o0 = tensor.empty() : tensor<2x4x1x64xf16>
  %l0 = tensor.empty() : tensor<2x4x1xf32>
  %r:2 = scf.forall (%b, %h, %qb) in (2, 4, 1) shared_outs(%o = %o0, %l = %l0) -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>) {
    %n32 = tensor.extract %lens[%b] : tensor<2xi32>
    %nk = arith.index_cast %n32 : i32 to index
    %q0 = arith.muli %qb, %c16 : index
    %qs = tensor.extract_slice %q[%b, %h, %q0, 0] [1, 1, 1, 64] [1, 1, 1, 1] : tensor<2x4x1x64xf16> to tensor<1x64xf16>
    %qt = tensor.pad %qs low[0, 0] high[15, 0] {
    ^bb0(%i: index, %j: index):
      %p = arith.constant 0.000000e+00 : f16
      tensor.yield %p : f16
    } : tensor<1x64xf16> to tensor<16x64xf16>
    %e = tensor.empty() : tensor<16x64xf32>
    %acc0 = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
    %e1 = tensor.empty() : tensor<16xf32>
    %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
    %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
    %st:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%acc = %acc0, %m = %m0, %s = %s0) -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
      %kt = fa.paged_key_block %kp[%b, %h, %k0] table(%t) limit(%nk) : tensor<?x4x64x64xf16>, tensor<2x?xi32> -> tensor<32x64xf16>
      %vt = fa.paged_key_block %vp[%b, %h, %k0] table(%t) limit(%nk) : tensor<?x4x64x64xf16>, tensor<2x?xi32> -> tensor<32x64xf16>
      %na, %nm, %ns = fa.online_attention %qt, %kt, %vt into %acc, %m, %s masked(%q0, %k0, %c1, %nk) scale 1.250000e-01 : tensor<16x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<16x64xf32>, tensor<16xf32>
      scf.yield %na, %nm, %ns : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
    }
    %out, %lse = fa.online_attention_finalize %st#0, %st#1, %st#2 : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf16>
    %orow = tensor.extract_slice %out[0, 0] [1, 64] [1, 1] : tensor<16x64xf16> to tensor<1x64xf16>
    %lrow = tensor.extract_slice %lse[0] [1] [1] : tensor<16xf32> to tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %orow into %o[%b, %h, %q0, 0] [1, 1, 1, 64] [1, 1, 1, 1] : tensor<1x64xf16> into tensor<2x4x1x64xf16>
      tensor.parallel_insert_slice %lrow into %l[%b, %h, %q0] [1, 1, 1] [1, 1, 1] : tensor<1xf32> into tensor<2x4x1xf32>
    }
  } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
  return %r#0, %r#1 : tensor<2x4x1x64xf16>, tensor<2x4x1xf32>
}
