// RUN: fa-opt %s --split-input-file --fa-specialize-masks | FileCheck %s

// Causal: no key block left of the band, so two loops remain: the fully
// visible blocks [0, fullHi) run the step without any mask, and only the
// diagonal blocks [fullHi, hi) keep it. Blocks past hi are never visited.

// CHECK-LABEL: func.func @causal
// CHECK-SAME:    %[[Q0:[a-zA-Z0-9]+]]: index, %[[NQ:[a-zA-Z0-9]+]]: index, %[[NK:[a-zA-Z0-9]+]]: index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// The key blocks are the mask's (MaskAttrInterface::buildKeyBlockRange), as
// key offsets. Last real row of the block: max(min(q0 + 64, Nq) - 1, q0).
// CHECK-DAG:     %[[END:.*]] = arith.addi %[[Q0]], %{{.*}}
// CHECK-DAG:     %[[OFF:.*]] = arith.subi %[[NK]], %[[NQ]]
// hi: blocks up to the key the last row sees (rounded up to 32).
// CHECK:         %[[HIB:.*]] = arith.ceildivui %{{.*}}, %[[C32]]
// CHECK:         %[[HI0:.*]] = arith.muli %[[HIB]], %[[C32]]
// CHECK:         %[[HI:.*]] = arith.minsi %[[HI0]], %[[NK]]
// fullHi: blocks the first row sees whole (rounded down).
// CHECK:         arith.divui %{{.*}}, %[[C32]]
// CHECK:         %[[FULLHI:.*]] = arith.minsi %{{.*}}, %[[HI]]
// CHECK:         %[[FULL:.*]]:3 = scf.for %{{.*}} = %{{.*}} to %[[FULLHI]] step %[[C32]]
// CHECK:           fa.online_attention %{{.*}} into %{{.*}} scale 1.250000e-01 :
// CHECK:         %[[DIAG:.*]]:3 = scf.for %[[K0:.*]] = %[[FULLHI]] to %[[HI]] step %[[C32]] iter_args(%{{.*}} = %[[FULL]]#0, %{{.*}} = %[[FULL]]#1, %{{.*}} = %[[FULL]]#2)
// CHECK:           fa.online_attention {{.*}} masked(%[[Q0]], %[[K0]], %[[NQ]], %[[NK]]) mask<causal> scale 1.250000e-01
// CHECK:         return %[[DIAG]]#0, %[[DIAG]]#1, %[[DIAG]]#2
func.func @causal(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<causal> scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// Sliding window [128, 0]: a masked left boundary, unmasked full blocks, a
// masked diagonal. Blocks left of lo (too far in the past) are skipped.

// CHECK-LABEL: func.func @sliding_window
// CHECK:         %[[A:.*]]:3 = scf.for %{{.*}} = %[[LO:.*]] to %[[FULLLO:.*]] step
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<window 128, 0>
// CHECK:         %[[B:.*]]:3 = scf.for %{{.*}} = %[[FULLLO]] to %[[FULLHI:.*]] step {{.*}} iter_args(%{{.*}} = %[[A]]#0
// CHECK-NOT:       masked
// CHECK:           fa.online_attention %{{.*}} softcap 5.000000e+01 scale 1.250000e-01 exp2 :
// CHECK:         scf.for %{{.*}} = %[[FULLHI]] to {{.*}} iter_args(%{{.*}} = %[[B]]#0
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<window 128, 0> softcap 5.000000e+01 scale 1.250000e-01 exp2
func.func @sliding_window(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<window 128, 0> softcap 50.0 scale 0.125 exp2 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// No mask at all: every block but a partial last one (keys past Nk) is
// fully visible, and no row bound is computed.

// CHECK-LABEL: func.func @no_mask
// CHECK-NOT:     arith.subi
// CHECK:         scf.for %{{.*}} = %{{.*}} to %[[FULLHI:.*]] step
// CHECK-NEXT:      fa.online_attention %{{.*}} into %{{.*}} scale
// CHECK:         scf.for %{{.*}} = %[[FULLHI]] to
// CHECK-NEXT:      fa.online_attention {{.*}} masked
func.func @no_mask(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A loop that does more than thread the state through the step cannot skip
// iterations: it is left alone.

// CHECK-LABEL: func.func @not_a_key_loop
// CHECK:         scf.for
// CHECK:           fa.online_attention {{.*}} masked
// CHECK:           linalg.fill
// CHECK-NOT:     scf.for
func.func @not_a_key_loop(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %one = arith.constant 1.0 : f32
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<causal> scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    %f = linalg.fill ins(%one : f32) outs(%n#2 : tensor<64xf32>) -> tensor<64xf32>
    scf.yield %n#0, %n#1, %f : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// The largest window the verifier accepts, 2^31 - 1 on both sides: the
// bounds use the constants 2^31 - 1 and 2^31 (right + 1), each built once.
// (The constant cache used to be keyed by int64_t, whose DenseMap empty key
// INT64_MAX the verifier used to accept as a window bound.)

// CHECK-LABEL: func.func @largest_window
// lo: first row - left.
// CHECK:         %[[W:.*]] = arith.constant 2147483647 : index
// CHECK:         arith.subi %{{.*}}, %[[W]]
// hi: last row + right + 1.
// CHECK:         %[[W1:.*]] = arith.constant 2147483648 : index
// CHECK:         arith.addi %{{.*}}, %[[W1]]
// CHECK-NOT:     arith.constant 214748364{{[78]}}
// fullLo and fullHi reuse both constants.
// CHECK:         arith.subi %{{.*}}, %[[W]]
// CHECK-NOT:     arith.constant 214748364{{[78]}}
// CHECK:         arith.addi %{{.*}}, %[[W1]]
// CHECK-NOT:     arith.constant 214748364{{[78]}}
// CHECK:         scf.for
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<window 2147483647, 2147483647> scale 1.250000e-01
// CHECK:         scf.for
// CHECK-NOT:       masked
// CHECK:           fa.online_attention %{{.*}} scale 1.250000e-01 :
// CHECK:         scf.for
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<window 2147483647, 2147483647> scale 1.250000e-01
func.func @largest_window(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<window 2147483647, 2147483647> scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A run-time window: the same three loops, their bounds computed from the
// i64 sizes (the mask's parameters: a negative one made 2^31 - 1,
// unbounded) once, before them.

// CHECK-LABEL: func.func @runtime_window
// CHECK-SAME:    %[[WL:[a-zA-Z0-9]+]]: i64, %[[WR:[a-zA-Z0-9]+]]: i64
// CHECK-DAG:     %[[MAXW:.*]] = arith.constant 2147483647 : i64
// CHECK:         %[[NEG:.*]] = arith.cmpi slt, %[[WL]], %{{.*}} : i64
// CHECK:         %[[SEL:.*]] = arith.select %[[NEG]], %[[MAXW]], %[[WL]] : i64
// CHECK:         %[[MIN:.*]] = arith.minsi %[[SEL]], %[[MAXW]] : i64
// CHECK:         %[[LEFT:.*]] = arith.index_cast %[[MIN]] : i64 to index
// CHECK:         arith.cmpi slt, %[[WR]], %{{.*}} : i64
// CHECK:         arith.subi %{{.*}}, %[[LEFT]] : index
// CHECK:         %[[A:.*]]:3 = scf.for %{{.*}} = %[[LO:.*]] to %[[FULLLO:.*]] step
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<window ?, ?>(%[[WL]], %[[WR]]) scale 1.250000e-01
// CHECK:         %[[B:.*]]:3 = scf.for %{{.*}} = %[[FULLLO]] to %[[FULLHI:.*]] step {{.*}} iter_args(%{{.*}} = %[[A]]#0
// CHECK-NOT:       masked
// CHECK:           fa.online_attention %{{.*}} scale 1.250000e-01 :
// CHECK:         scf.for %{{.*}} = %[[FULLHI]] to {{.*}} iter_args(%{{.*}} = %[[B]]#0
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<window ?, ?>(%[[WL]], %[[WR]]) scale 1.250000e-01
func.func @runtime_window(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %wl: i64, %wr: i64) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<window ?, ?>(%wl, %wr) scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A step with a mask_mod is split by its mask attribute like any other (the
// full loop keeps the positions, which the modifier reads, and drops only
// the attribute), in a range narrowed to the key blocks the mask_mod may
// see: a scan in front of the loops runs the verdicts over [lo, hi), chunk
// by chunk, then block by block in the first and the last chunk that may
// see, and keeps [first seen, last seen + Bc). Each step is then decided per
// block: interval arithmetic over the region, on the block's rows [q0,
// min(q0 + 64, Nq) - 1] and keys [k0, min(k0 + 32, Nk) - 1], says whether
// the block may be seen (else the state passes through) and may be hidden
// (else the step runs without the mask_mod; the attribute mask and the
// tail stay). Here i - j < 64 unsigned: exact where i - j >= 0 over the
// block, either value where it may be negative.

// CHECK-LABEL: func.func @modifier
// CHECK-SAME:    %[[Q0:[a-z0-9]+]]: index, %[[NQ:[a-z0-9]+]]: index, %[[NK:[a-z0-9]+]]: index, %{{.*}}: index, %{{.*}}: index)
// The causal range: [0, HI).
// CHECK:         %[[HI:.*]] = arith.minsi %{{.*}}, %[[NK]] : index
// The scan: chunks of 8 blocks (256 keys) first, the first and the last
// chunk that may see (HI if none) ...
// CHECK:         %[[CH:.*]]:2 = scf.for %[[C0:.*]] = %{{.*}} to %[[HI]] step %c256 iter_args(%[[FC:.*]] = %[[HI]], %[[LC:.*]] = %[[HI]]) -> (index, index)
// CHECK:           %[[UNSET:.*]] = arith.cmpi eq, %[[FC]], %[[HI]] : index
// CHECK:           %[[NEW:.*]] = arith.andi %[[MAYSEE:.*]], %[[UNSET]] : i1
// CHECK:           arith.select %[[NEW]], %[[C0]], %[[FC]] : index
// CHECK:           arith.select %[[MAYSEE]], %[[C0]], %[[LC]] : index
// ... then block by block: the first block of the first chunk that may see,
// CHECK:         %[[FIRST:.*]] = scf.for %{{.*}} = %[[CH]]#0 to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[HI]]) -> (index)
// and the end of the last such block of the last chunk.
// CHECK:         %[[LAST:.*]] = scf.for %{{.*}} = %[[CH]]#1 to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[HI]]) -> (index)
// A chunk whose blocks all turn out unseen keeps its bound.
// CHECK:         %[[NONE:.*]] = arith.cmpi eq, %[[FIRST]], %[[HI]] : index
// CHECK:         %[[BEGIN:.*]] = arith.select %[[NONE]], %[[CH]]#0, %[[FIRST]] : index
// CHECK:         %[[END0:.*]] = arith.select %{{.*}}, %{{.*}}, %[[LAST]] : index
// CHECK:         %[[END:.*]] = arith.maxsi %[[END0]], %[[BEGIN]] : index
// Every bound clamped into [first, end).
// CHECK:         arith.minsi %{{.*}}, %[[END]] : index
// CHECK:         %[[LO:.*]] = arith.minsi %{{.*}}, %[[END]] : index
// CHECK:         %[[FULLHI:.*]] = arith.minsi %{{.*}}, %[[END]] : index
// CHECK:         %[[TAILHI:.*]] = arith.minsi %{{.*}}, %[[END]] : index
// Fully visible under the attribute: no mask attribute, positions kept.
// CHECK:         %[[FULL:.*]]:3 = scf.for %[[K0:[a-z0-9]+]] = %[[LO]] to %[[FULLHI]]
// CHECK:           %[[KE:.*]] = arith.minsi %{{.*}}, %[[NK]] : index
// CHECK:           %[[KL:.*]] = arith.subi %[[KE]], %{{.*}} : index
// CHECK:           %[[QE:.*]] = arith.minsi %{{.*}}, %[[NQ]] : index
// CHECK:           %[[QL:.*]] = arith.subi %[[QE]], %{{.*}} : index
// The range of i - j: [q0 - kLast, qLast - k0].
// CHECK:           %[[DHI:.*]] = arith.subi %[[QL]], %[[K0]] : index
// CHECK:           %[[DLO:.*]] = arith.subi %[[Q0]], %[[KL]] : index
// CHECK:           %[[NONNEG:.*]] = arith.cmpi sge, %[[DLO]], %{{.*}} : index
// CHECK:           %[[HIDE0:.*]] = arith.cmpi sge, %[[DHI]], %{{.*}} : index
// CHECK:           %[[SEE0:.*]] = arith.cmpi slt, %[[DLO]], %{{.*}} : index
// CHECK:           %[[HIDE:.*]] = arith.ori %[[HIDE0]], %{{.*}} : i1
// CHECK:           %[[SEE:.*]] = arith.ori %[[SEE0]], %{{.*}} : i1
// CHECK:           scf.if %[[SEE]]
// CHECK:             scf.if %[[HIDE]]
// CHECK:               fa.online_attention {{.*}} masked({{.*}}) at({{.*}}) scale 1.250000e-01 mask_mod(
// CHECK:             } else {
// CHECK:               fa.online_attention {{.*}} masked(%[[Q0]], %[[K0]], %[[NQ]], %[[NK]]) scale 1.250000e-01 :
// CHECK:           } else {
// CHECK-NEXT:        scf.yield %{{.*}}, %{{.*}}, %{{.*}} :
// The diagonal blocks: masked by the attribute, decided the same way.
// CHECK:         scf.for %{{.*}} = %[[FULLHI]] to %[[TAILHI]] {{.*}} iter_args(%{{.*}} = %[[FULL]]#0
// CHECK:           scf.if
// CHECK:             scf.if
// CHECK:               fa.online_attention {{.*}} masked({{.*}}) at({{.*}}) mask<causal> scale 1.250000e-01 mask_mod(
// CHECK:             } else {
// CHECK:               fa.online_attention {{.*}} masked({{.*}}) mask<causal> scale 1.250000e-01 :
// CHECK-NOT:     scf.for
func.func @modifier(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %b: index, %h: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) at(%b, %h) mask<causal> scale 0.125
        mask_mod(%bb: index, %hh: index, %i: index, %j: index) {
          %d = arith.subi %i, %j : index
          %c64 = arith.constant 64 : index
          %v2 = arith.cmpi ult, %d, %c64 : index
          fa.yield %v2 : i1
        } : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A band mask_mod (signed compares of index expressions linear in i and j,
// the scanned j with coefficient +-1: a sliding window of 100 keys) needs
// no scan: its bounds at the block's rows give the range. j >= i - 99 is
// smallest at the first row q0, j <= i largest at the last row; the range
// is widened to whole blocks from lo (0).
// CHECK-LABEL: func.func @band_mask_mod
// CHECK-SAME:    %[[Q0:[a-z0-9]+]]: index, %[[NQ:[a-z0-9]+]]: index, %[[NK:[a-z0-9]+]]: index, %{{.*}}: index, %{{.*}}: index)
// CHECK-NOT:     scf.for {{.*}} -> (index
// CHECK:         %[[QE:.*]] = arith.minsi %{{.*}}, %[[NQ]] : index
// CHECK:         %[[QLAST:.*]] = arith.subi %[[QE]], %c1{{.*}} : index
// CHECK:         %[[BEGIN:.*]] = arith.addi %[[Q0]], %c-99 : index
// CHECK:         %[[X0:.*]] = arith.maxsi %[[BEGIN]], %{{.*}} : index
// CHECK:         %[[END:.*]] = arith.addi %[[QLAST]], %c1{{.*}} : index
// CHECK:         %[[X1:.*]] = arith.minsi %[[END]], %{{.*}} : index
// CHECK:         %[[EMPTY:.*]] = arith.cmpi sle, %[[X1]], %[[X0]] : index
// CHECK-NOT:     scf.for {{.*}} -> (index
// CHECK:         scf.for {{.*}} -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
// CHECK:           scf.if
// CHECK:             scf.if
// CHECK:               fa.online_attention {{.*}} mask_mod(
func.func @band_mask_mod(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %b: index, %h: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) at(%b, %h) scale 0.125
        mask_mod(%bb: index, %hh: index, %i: index, %j: index) {
          %d = arith.subi %i, %j : index
          %zero = arith.constant 0 : index
          %c100 = arith.constant 100 : index
          %ge = arith.cmpi sge, %d, %zero : index
          %lt = arith.cmpi slt, %d, %c100 : index
          %v2 = arith.andi %ge, %lt : i1
          fa.yield %v2 : i1
        } : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A conjunct the band analysis cannot read (a document id compare) only
// hides more: the range comes from the readable one, j <= i (the block's
// last row), still without a scan.
// CHECK-LABEL: func.func @band_and_capture
// CHECK-SAME:    %[[Q0:[a-z0-9]+]]: index, %[[NQ:[a-z0-9]+]]: index, %[[NK:[a-z0-9]+]]: index
// CHECK-NOT:     scf.for {{.*}} -> (index
// CHECK:         %[[QE:.*]] = arith.minsi %{{.*}}, %[[NQ]] : index
// CHECK:         %[[QLAST:.*]] = arith.subi %[[QE]], %c1{{.*}} : index
// CHECK:         arith.addi %[[QLAST]], %c1{{.*}} : index
// CHECK-NOT:     scf.for {{.*}} -> (index
// CHECK:         scf.for {{.*}} -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
func.func @band_and_capture(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %b: index, %h: index, %doc: tensor<128xi32>) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) at(%b, %h) scale 0.125
        captures(%doc : tensor<128xi32>)
        mask_mod(%bb: index, %hh: index, %i: index, %j: index, %d: tensor<128xi32>) {
          %di = tensor.extract %d[%i] : tensor<128xi32>
          %dj = tensor.extract %d[%j] : tensor<128xi32>
          %same = arith.cmpi eq, %di, %dj : i32
          %causal = arith.cmpi sle, %j, %i : index
          %v2 = arith.andi %same, %causal : i1
          fa.yield %v2 : i1
        } : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A mask_mod that reads a capture (a document id per token) may see and
// hide any block: no scan, every block stays (the full blocks and the key
// tail's), each with the mask_mod.

// CHECK-LABEL: func.func @capture_mask_mod
// CHECK-NOT:     -> (index, index)
// CHECK:         scf.for
// CHECK:           %[[T:.*]] = arith.constant true
// CHECK:           scf.if %{{.*}}
// CHECK-NEXT:        scf.if %[[T]]
// CHECK-NEXT:          fa.online_attention {{.*}} masked({{.*}}) at({{.*}}) scale 1.250000e-01 captures(
// CHECK:         scf.for
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) at({{.*}}) scale 1.250000e-01 captures(
// CHECK-NOT:     scf.for
func.func @capture_mask_mod(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %b: index, %h: index, %doc: tensor<128xi32>) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) at(%b, %h) scale 0.125
        captures(%doc : tensor<128xi32>)
        mask_mod(%bb: index, %hh: index, %i: index, %j: index, %d: tensor<128xi32>) {
          %di = tensor.extract %d[%i] : tensor<128xi32>
          %dj = tensor.extract %d[%j] : tensor<128xi32>
          %same = arith.cmpi eq, %di, %dj : i32
          fa.yield %same : i1
        } : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// The same with the keys the mask_mod shows every row (fa.attention's
// 4-column key_ranges): a block inside [begin, end) runs without the
// mask_mod; the masked step no longer carries them.

// CHECK-LABEL: func.func @full_keys
// CHECK-SAME:    %[[F0:[a-zA-Z0-9]+]]: index, %[[F1:[a-zA-Z0-9]+]]: index)
// CHECK:         scf.for %[[K0:[a-z0-9]+]] = 
// CHECK:           %[[GE:.*]] = arith.cmpi sge, %[[K0]], %[[F0]] : index
// CHECK:           %[[END:.*]] = arith.addi %[[K0]], %c32{{.*}} : index
// CHECK:           %[[LE:.*]] = arith.cmpi sle, %[[END]], %[[F1]] : index
// CHECK:           %[[IN:.*]] = arith.andi %[[GE]], %[[LE]] : i1
// CHECK:           %[[OUT:.*]] = arith.xori %[[IN]], %true
// CHECK:           %[[HIDE:.*]] = arith.andi %true{{.*}}, %[[OUT]] : i1
// CHECK:           scf.if %{{.*}}
// CHECK-NEXT:        scf.if %[[HIDE]]
// CHECK-NEXT:          fa.online_attention {{.*}} masked({{.*}}) at({{.*}}) scale 1.250000e-01 captures(
// CHECK:             } else {
// CHECK-NEXT:          fa.online_attention {{.*}} masked({{.*}}) scale 1.250000e-01 :
// CHECK-NOT:     full_keys
func.func @full_keys(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %b: index, %h: index, %doc: tensor<128xi32>, %f0: index, %f1: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) at(%b, %h) full_keys(%f0, %f1) scale 0.125
        captures(%doc : tensor<128xi32>)
        mask_mod(%bb: index, %hh: index, %i: index, %j: index, %d: tensor<128xi32>) {
          %di = tensor.extract %d[%i] : tensor<128xi32>
          %dj = tensor.extract %d[%j] : tensor<128xi32>
          %same = arith.cmpi eq, %di, %dj : i32
          fa.yield %same : i1
        } : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A key loop that starts past 0 at a multiple of the tile (fa.attention's
// key_ranges rounded down) and ends before Nk: the mask's bounds stay
// inside [lb, ub).

// CHECK-LABEL: func.func @from_key_range
// CHECK-SAME:    %[[X:[a-zA-Z0-9]+]]: index, %[[UB:[a-zA-Z0-9]+]]: index)
// CHECK:         %[[LB:.*]] = arith.muli %[[X]], %{{.*}} : index
// The mask's bounds clipped to ub, then raised to lb.
// CHECK:         %[[FULLHI:.*]] = arith.minsi %{{.*}}, %[[UB]] : index
// CHECK:         %[[HI:.*]] = arith.minsi %{{.*}}, %[[UB]] : index
// CHECK:         arith.maxsi %{{.*}}, %[[LB]] : index
// CHECK:         %[[FROM:.*]] = arith.maxsi %{{.*}}, %[[LB]] : index
// CHECK:         %[[TO:.*]] = arith.maxsi %[[FULLHI]], %[[LB]] : index
// CHECK:         %[[END:.*]] = arith.maxsi %[[HI]], %[[LB]] : index
// CHECK:         %[[FULL:.*]]:3 = scf.for %{{.*}} = %[[FROM]] to %[[TO]] step
// CHECK:           fa.online_attention %{{.*}} into %{{.*}} scale 1.250000e-01 :
// CHECK:         scf.for %{{.*}} = %[[TO]] to %[[END]] step {{.*}} iter_args(%{{.*}} = %[[FULL]]#0
// CHECK:           fa.online_attention {{.*}} masked({{.*}}) mask<causal> scale 1.250000e-01
func.func @from_key_range(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %x: index, %ub: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c32 = arith.constant 32 : index
  %lb = arith.muli %x, %c32 : index
  %r:3 = scf.for %k0 = %lb to %ub step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<causal> scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// A start that may not be a multiple of the tile: the loop stays as it is.

// CHECK-LABEL: func.func @unaligned_start
// CHECK:         scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// CHECK-NEXT:      fa.online_attention {{.*}} masked({{.*}}) mask<causal>
// CHECK-NOT:     scf.for
func.func @unaligned_start(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: tensor<64xf32>, %q0: index, %nq: index, %nk: index, %lb: index) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %lb to %nk step %c32 iter_args(%a = %acc, %mm = %m, %ll = %l) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll masked(%q0, %k0, %nq, %nk) mask<causal> scale 0.125 : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}
