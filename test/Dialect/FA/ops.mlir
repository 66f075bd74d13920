// RUN: fa-opt %s | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | fa-opt | FileCheck %s
// RUN: fa-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every op form of the fa dialect: the custom assembly prints
// back to itself, and so does the generic form parsed back. The GENERIC lines
// show the properties each keyword of the custom form stands for.

//===----------------------------------------------------------------------===//
// fa.attention
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @attention_plain
// CHECK: %{{.*}}, %{{.*}} = fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
// CHECK-SAME: -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
func.func @attention_plain(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                           %v: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

// Each optional attribute alone.

// CHECK-LABEL: func.func @attention_causal
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> :
func.func @attention_causal(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                            %v: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %k, %v mask<causal>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

// CHECK-LABEL: func.func @attention_scale
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 :
func.func @attention_scale(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                           %v: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %k, %v scale 0.125
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

// A sliding window of 32 keys to the left and 16 to the right of the diagonal;
// -1 leaves a side unbounded.
// CHECK-LABEL: func.func @attention_window
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window 32, 16> :
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window inf, 8> :
func.func @attention_window(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                            %v: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>) {
  %out, %lse = fa.attention %q, %k, %v mask<window 32, 16>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  %out2, %lse2 = fa.attention %q, %k, %v mask<window inf, 8>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %out2 : tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>
}

// The window sizes known at run time: one i64 mask operand per `?` (a
// negative value is unbounded), on every op that carries a mask; a causal
// window takes the left size only.
// CHECK-LABEL: func.func @attention_runtime_window
// CHECK-SAME:    %[[L:[^:]*]]: i64, %[[R:[^:]*]]: i64
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window ?, ?>(%[[L]], %[[R]]) scale %{{.*}} :
// CHECK-SAME: f32, i64, i64) ->
// CHECK: fa.attention_backward %{{.*}} mask<window ?, 0>(%[[L]]) :
// CHECK: fa.online_attention %{{.*}} masked(%{{.*}}) mask<window ?, ?>(%[[L]], %[[R]]) scale 1.250000e-01 :
// CHECK: fa.attention_backward_step %{{.*}} masked(%{{.*}}) mask<window ?, 0>(%[[L]]) scale 1.250000e-01 :
// GENERIC: "fa.attention"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{mask = #fa.mask<window ?, ?>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 2, 0, 0>}>
func.func @attention_runtime_window(%q: tensor<1x4x128x64xf16>, %l: i64, %r: i64,
                                    %s: f32, %lse: tensor<1x4x128xf32>,
                                    %t: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
                                    %m: tensor<64xf32>, %i: index) {
  %out, %lse2 = fa.attention %q, %q, %q mask<window ?, ?>(%l, %r) scale %s
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         f32, i64, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<window ?, 0>(%l)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  %a, %mx, %sm = fa.online_attention %t, %t, %t into %acc, %m, %m
      masked(%i, %i, %i, %i) mask<window ?, ?>(%l, %r) scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  %g = fa.attention_backward_step %t, %t, %t, %t, %m, %m dq(%acc)
      masked(%i, %i, %i, %i) mask<window ?, 0>(%l) scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
        tensor<64x64xf16>, tensor<64xf32>
      -> tensor<64x64xf32>
  return
}

// The mask attribute: `causal` is `window inf, 0`; `none` sees every key;
// constant and run-time sides mix; the full form `#fa.mask<...>` (generic
// syntax, other attributes, `mask(#...)` the form of other masks) is the
// same attribute.
// CHECK-LABEL: func.func @mask_forms
// CHECK-SAME:    %[[R:[^:]*]]: i64
// CHECK-SAME:    attributes {fa.test_mask = #fa.mask<window ?, inf>}
// CHECK: fa.attention %{{.*}} mask<causal> :
// CHECK: fa.attention %{{.*}} mask<none> :
// CHECK: fa.attention %{{.*}} mask<window 16, ?>(%[[R]]) :
// CHECK: fa.attention %{{.*}} mask<window 2147483647, 0> :
// CHECK: fa.attention %{{.*}} mask<window 128, 0> :
// GENERIC: mask = #fa.mask<window 16, ?>
func.func @mask_forms(%q: tensor<1x4x128x64xf16>, %r: i64)
    attributes {fa.test_mask = #fa.mask<window ?, inf>} {
  %o1, %l1 = fa.attention %q, %q, %q mask<window inf, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  %o2, %l2 = fa.attention %q, %q, %q mask<window inf, inf>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  %o3, %l3 = fa.attention %q, %q, %q mask<window 16, ?>(%r)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  %o4, %l4 = fa.attention %q, %q, %q mask<window 2147483647, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  %o5, %l5 = fa.attention %q, %q, %q mask(#fa.mask<window 128, 0>)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// CHECK-LABEL: func.func @attention_softcap
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} softcap 3.000000e+01 :
func.func @attention_softcap(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                             %v: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %k, %v softcap 30.0
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

// All attributes together; the keywords print in a fixed order whatever the
// order of the input (here the mask comes from the attr-dict).
// CHECK-LABEL: func.func @attention_all_attributes
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window 256, 0> softcap 5.000000e+01 scale 2.500000e-01 :
// GENERIC-LABEL: sym_name = "attention_all_attributes"
// GENERIC: "fa.attention"(%{{.*}}, %{{.*}}, %{{.*}}) <{mask = #fa.mask<window 256, 0>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0>, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32}>
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window 64, 0> scale 5.000000e-01 :
func.func @attention_all_attributes(%q: tensor<1x4x128x128xbf16>,
                                    %k: tensor<1x4x128x128xbf16>,
                                    %v: tensor<1x4x128x128xbf16>)
    -> (tensor<1x4x128x128xbf16>, tensor<1x4x128x128xbf16>) {
  %out, %lse = fa.attention %q, %k, %v mask<window 256, 0> softcap 50.0 scale 0.25
      : (tensor<1x4x128x128xbf16>, tensor<1x4x128x128xbf16>, tensor<1x4x128x128xbf16>)
      -> (tensor<1x4x128x128xbf16>, tensor<1x4x128xf32>)
  %out2, %lse2 = fa.attention %q, %k, %v scale 0.5 {mask = #fa.mask<window 64, 0>}
      : (tensor<1x4x128x128xbf16>, tensor<1x4x128x128xbf16>, tensor<1x4x128x128xbf16>)
      -> (tensor<1x4x128x128xbf16>, tensor<1x4x128xf32>)
  return %out, %out2 : tensor<1x4x128x128xbf16>, tensor<1x4x128x128xbf16>
}

// Dynamic batch, head counts and sequence lengths (the head dims stay static),
// Nq != Nk (cross attention / decoding with a KV cache).
// CHECK-LABEL: func.func @attention_dynamic
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> :
// CHECK-SAME: (tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
// CHECK-SAME: -> (tensor<?x?x?x64xf32>, tensor<?x?x?xf32>)
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<2x8x1x64xf32>, tensor<2x8x?x64xf32>, tensor<2x8x?x64xf32>)
func.func @attention_dynamic(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>,
                             %v: tensor<?x?x?x64xf32>, %q1: tensor<2x8x1x64xf32>,
                             %kc: tensor<2x8x?x64xf32>, %vc: tensor<2x8x?x64xf32>)
    -> (tensor<?x?x?x64xf32>, tensor<2x8x1x64xf32>) {
  %out, %lse = fa.attention %q, %k, %v mask<causal>
      : (tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>)
      -> (tensor<?x?x?x64xf32>, tensor<?x?x?xf32>)
  %out1, %lse1 = fa.attention %q1, %kc, %vc
      : (tensor<2x8x1x64xf32>, tensor<2x8x?x64xf32>, tensor<2x8x?x64xf32>)
      -> (tensor<2x8x1x64xf32>, tensor<2x8x1xf32>)
  return %out, %out1 : tensor<?x?x?x64xf32>, tensor<2x8x1x64xf32>
}

// Grouped-query attention (8 query heads over 2 key/value heads) and
// multi-query attention (one key/value head), bf16.
// CHECK-LABEL: func.func @attention_gqa_mqa
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> :
// CHECK-SAME: (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x128xbf16>)
// CHECK-SAME: -> (tensor<2x8x?x128xbf16>, tensor<2x8x?xf32>)
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<2x8x?x128xbf16>, tensor<2x1x?x128xbf16>, tensor<2x1x?x128xbf16>)
func.func @attention_gqa_mqa(%q: tensor<2x8x?x128xbf16>, %k: tensor<2x2x?x128xbf16>,
                             %v: tensor<2x2x?x128xbf16>, %k1: tensor<2x1x?x128xbf16>,
                             %v1: tensor<2x1x?x128xbf16>)
    -> (tensor<2x8x?x128xbf16>, tensor<2x8x?x128xbf16>) {
  %out, %lse = fa.attention %q, %k, %v mask<causal>
      : (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x128xbf16>)
      -> (tensor<2x8x?x128xbf16>, tensor<2x8x?xf32>)
  %out1, %lse1 = fa.attention %q, %k1, %v1
      : (tensor<2x8x?x128xbf16>, tensor<2x1x?x128xbf16>, tensor<2x1x?x128xbf16>)
      -> (tensor<2x8x?x128xbf16>, tensor<2x8x?xf32>)
  return %out, %out1 : tensor<2x8x?x128xbf16>, tensor<2x8x?x128xbf16>
}

// A value head dim (Dv = 128) different from the query/key one (D = 192), at
// the smallest and the largest head dims.
// CHECK-LABEL: func.func @attention_value_head_dim
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<1x2x16x192xf16>, tensor<1x2x32x192xf16>, tensor<1x2x32x128xf16>)
// CHECK-SAME: -> (tensor<1x2x16x128xf16>, tensor<1x2x16xf32>)
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<1x2x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x256xf16>)
// CHECK-SAME: -> (tensor<1x2x16x256xf16>, tensor<1x2x16xf32>)
func.func @attention_value_head_dim(%q: tensor<1x2x16x192xf16>,
                                    %k: tensor<1x2x32x192xf16>,
                                    %v: tensor<1x2x32x128xf16>,
                                    %q8: tensor<1x2x16x8xf16>,
                                    %k8: tensor<1x2x32x8xf16>,
                                    %v256: tensor<1x2x32x256xf16>)
    -> (tensor<1x2x16x128xf16>, tensor<1x2x16x256xf16>) {
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x2x16x192xf16>, tensor<1x2x32x192xf16>, tensor<1x2x32x128xf16>)
      -> (tensor<1x2x16x128xf16>, tensor<1x2x16xf32>)
  %out2, %lse2 = fa.attention %q8, %k8, %v256
      : (tensor<1x2x16x8xf16>, tensor<1x2x32x8xf16>, tensor<1x2x32x256xf16>)
      -> (tensor<1x2x16x256xf16>, tensor<1x2x16xf32>)
  return %out, %out2 : tensor<1x2x16x128xf16>, tensor<1x2x16x256xf16>
}

// Result shapes may be less static than the inputs (and the other way round):
// the shapes only have to be compatible.
// CHECK-LABEL: func.func @attention_compatible_results
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<?x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
// CHECK-SAME: -> (tensor<2x?x32x64xf32>, tensor<?x4x?xf32>)
func.func @attention_compatible_results(%q: tensor<?x4x?x64xf32>,
                                        %k: tensor<2x4x?x64xf32>,
                                        %v: tensor<2x4x?x64xf32>)
    -> (tensor<2x?x32x64xf32>, tensor<?x4x?xf32>) {
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<?x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
      -> (tensor<2x?x32x64xf32>, tensor<?x4x?xf32>)
  return %out, %lse : tensor<2x?x32x64xf32>, tensor<?x4x?xf32>
}

// Empty batches and sequences are valid: with Nk = 0 every row sees no key
// (out = 0, lse = +inf).
// CHECK-LABEL: func.func @attention_empty
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: (tensor<0x4x16x64xf32>, tensor<0x4x0x64xf32>, tensor<0x4x0x64xf32>)
func.func @attention_empty(%q: tensor<0x4x16x64xf32>, %k: tensor<0x4x0x64xf32>,
                           %v: tensor<0x4x0x64xf32>)
    -> (tensor<0x4x16x64xf32>, tensor<0x4x16xf32>) {
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<0x4x16x64xf32>, tensor<0x4x0x64xf32>, tensor<0x4x0x64xf32>)
      -> (tensor<0x4x16x64xf32>, tensor<0x4x16xf32>)
  return %out, %lse : tensor<0x4x16x64xf32>, tensor<0x4x16xf32>
}

//===----------------------------------------------------------------------===//
// fa.attention: score_mod and mask_mod
//===----------------------------------------------------------------------===//

// ALiBi: the slopes are a capture, the score_mod's trailing block argument;
// the region reads it with tensor.extract at the query head.
// CHECK-LABEL: func.func @attention_alibi
// CHECK-SAME: %[[SLOPES:[^:]*]]: tensor<4xf32>
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> captures(%[[SLOPES]])
// CHECK-SAME: score_mod(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[SL:.*]]: tensor<4xf32>) {
// CHECK:   %[[SLOPE:.*]] = tensor.extract %[[SL]][%[[H]]] : tensor<4xf32>
// CHECK:   arith.subi %[[J]], %[[I]] : index
// CHECK:   %[[R:.*]] = arith.addf %[[S]], %{{.*}} : f32
// CHECK:   fa.yield %[[R]] : f32
// CHECK: } : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<4xf32>)
// CHECK-NOT: mask_mod
// GENERIC-LABEL: sym_name = "attention_alibi"
// GENERIC: "fa.attention"({{.*}}) <{mask = #fa.mask<causal>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 1>}> ({
// GENERIC: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<4xf32>):
// GENERIC: "fa.yield"(%{{.*}}) : (f32) -> ()
// GENERIC-NEXT: }, {
// GENERIC-NEXT: })
func.func @attention_alibi(%q: tensor<1x4x128x64xf16>, %slopes: tensor<4xf32>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %q, %q mask<causal> captures(%slopes)
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
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<4xf32>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

// A mask_mod alone (prefix-LM: the first 16 keys, then causal), no captures;
// the op being isolated from above, its constants live in the region and its
// argument names may repeat the function's.
// CHECK-LABEL: func.func @attention_prefix_lm
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask_mod(%{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index) {
// CHECK:   %[[P:.*]] = arith.constant 16 : index
// CHECK:   %[[IN:.*]] = arith.cmpi ult, %[[J]], %[[P]] : index
// CHECK:   %[[C:.*]] = arith.cmpi ule, %[[J]], %[[I]] : index
// CHECK:   %[[V:.*]] = arith.ori %[[IN]], %[[C]] : i1
// CHECK:   fa.yield %[[V]] : i1
// CHECK: } : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>) ->
func.func @attention_prefix_lm(%q: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %q, %q
      mask_mod(%b: index, %h: index, %q: index, %j: index) {
        %prefix = arith.constant 16 : index
        %in = arith.cmpi ult, %j, %prefix : index
        %causal = arith.cmpi ule, %j, %q : index
        %v = arith.ori %in, %causal : i1
        fa.yield %v : i1
      }
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

// Both modifiers with every attribute, two captures (a bias table [2N - 1]
// and document ids) that both regions receive, and run-time scalars.
// CHECK-LABEL: func.func @attention_all_modifiers
// CHECK-SAME: %[[T:[^:]*]]: tensor<255xf32>, %[[D:[^:]*]]: tensor<128xi32>, %[[SC:[^:]*]]: f32
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window 64, 0> softcap 3.000000e+01 scale %[[SC]] captures(%[[T]], %[[D]])
// CHECK-SAME: score_mod(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<255xf32>, %{{.*}}: tensor<128xi32>) {
// CHECK: fa.yield %{{.*}} : f32
// CHECK-NEXT: } mask_mod(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<255xf32>, %{{.*}}: tensor<128xi32>) {
// CHECK: fa.yield %{{.*}} : i1
// CHECK-NEXT: } {note} : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, f32, tensor<255xf32>, tensor<128xi32>)
// GENERIC-LABEL: sym_name = "attention_all_modifiers"
// GENERIC: "fa.attention"({{.*}}) <{mask = #fa.mask<window 64, 0>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 0, 0, 2>, softcap = 3.000000e+01 : f32}> ({
func.func @attention_all_modifiers(%q: tensor<1x4x128x64xf16>,
                                   %table: tensor<255xf32>,
                                   %doc: tensor<128xi32>, %scale: f32)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %q, %q mask<window 64, 0> softcap 30.0
      scale %scale captures(%table, %doc)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %t: tensor<255xf32>, %d: tensor<128xi32>) {
        %c127 = arith.constant 127 : index
        %rel = arith.subi %j, %i : index
        %at = arith.addi %rel, %c127 : index
        %bias = tensor.extract %t[%at] : tensor<255xf32>
        %r = arith.addf %s, %bias : f32
        fa.yield %r : f32
      }
      mask_mod(%b: index, %h: index, %i: index, %j: index,
               %t: tensor<255xf32>, %d: tensor<128xi32>) {
        %di = tensor.extract %d[%i] : tensor<128xi32>
        %dj = tensor.extract %d[%j] : tensor<128xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      } {note}
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         f32, tensor<255xf32>, tensor<128xi32>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}

//===----------------------------------------------------------------------===//
// fa.attention_backward
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @attention_backward
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask<causal> deterministic :
// GENERIC-LABEL: sym_name = "attention_backward"
// GENERIC: "fa.attention_backward"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>}>
// GENERIC: "fa.attention_backward"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{deterministic, mask = #fa.mask<causal>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>}>
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask<window 16, 0> softcap 2.000000e+01 scale 1.250000e-01 deterministic :
func.func @attention_backward(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                              %v: tensor<1x4x128x64xf16>, %o: tensor<1x4x128x64xf16>,
                              %lse: tensor<1x4x128xf32>, %do: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  %dq1, %dk1, %dv1 = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal> deterministic
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  %dq2, %dk2, %dv2 = fa.attention_backward %q, %k, %v, %o, %lse, %do
      mask<window 16, 0> softcap 20.0 scale 0.125 deterministic
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return %dq, %dk1, %dv2 : tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>
}

// Backward of a GQA bf16 forward with a dynamic sequence length and Dv != D:
// dk and dv have the key/value head count.
// CHECK-LABEL: func.func @attention_backward_gqa
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask<window inf, 32> :
// CHECK-SAME: (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x64xbf16>,
// CHECK-SAME:  tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>, tensor<2x8x?x64xbf16>)
// CHECK-SAME: -> (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x64xbf16>)
func.func @attention_backward_gqa(%q: tensor<2x8x?x128xbf16>, %k: tensor<2x2x?x128xbf16>,
                                  %v: tensor<2x2x?x64xbf16>, %o: tensor<2x8x?x64xbf16>,
                                  %lse: tensor<2x8x?xf32>, %do: tensor<2x8x?x64xbf16>)
    -> (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x64xbf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<window inf, 32>
      : (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x64xbf16>,
         tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>, tensor<2x8x?x64xbf16>)
      -> (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x64xbf16>)
  return %dq, %dk, %dv : tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x64xbf16>
}

// The backward carries the forward's regions and captures, after
// `deterministic`, and the derivative of the score_mod.
// CHECK-LABEL: func.func @attention_backward_modifiers
// CHECK: fa.attention_backward {{.*}} mask<causal> deterministic captures(%{{[^)]*}})
// CHECK-SAME: score_mod(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<2xf32>) {
// CHECK: } mask_mod(
// CHECK: } score_mod_grad(
// CHECK: fa.yield %{{.*}} : f32
// CHECK-NEXT: } : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>, tensor<2xf32>)
// GENERIC-LABEL: sym_name = "attention_backward_modifiers"
// GENERIC: "fa.attention_backward"({{.*}}) <{deterministic, mask = #fa.mask<causal>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1>}> ({
func.func @attention_backward_modifiers(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>,
                                        %slopes: tensor<2xf32>) -> tensor<1x2x16x32xf32> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<causal>
      deterministic captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<2xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %r = arith.addf %s, %slope : f32
        fa.yield %r : f32
      }
      mask_mod(%b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      score_mod_grad(%s: f32, %b: index, %h: index, %i: index, %j: index,
                     %sl: tensor<2xf32>) {
        %one = arith.constant 1.0 : f32
        fa.yield %one : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>, tensor<2xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq : tensor<1x2x16x32xf32>
}

//===----------------------------------------------------------------------===//
// fa.online_attention and fa.online_attention_finalize
//===----------------------------------------------------------------------===//

// A fully visible block: no mask operands, natural-log units.
// CHECK-LABEL: func.func @online_attention_unmasked
// GENERIC-LABEL: sym_name = "online_attention_unmasked"
// GENERIC: "fa.online_attention"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, scale = 1.250000e-01 : f32}>
// GENERIC: "fa.online_attention_finalize"({{.*}}) :
// CHECK: %[[ACC:.*]], %[[MAX:.*]], %[[SUM:.*]] = fa.online_attention %{{.*}}, %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 :
// CHECK-SAME: tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
// CHECK: fa.online_attention_finalize %[[ACC]], %[[MAX]], %[[SUM]] :
// CHECK-SAME: tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf16>
func.func @online_attention_unmasked(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>,
                                     %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>,
                                     %max: tensor<64xf32>, %sum: tensor<64xf32>)
    -> (tensor<64x64xf16>, tensor<64xf32>) {
  %acc1, %max1, %sum1 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  %out, %lse = fa.online_attention_finalize %acc1, %max1, %sum1
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf16>
  return %out, %lse : tensor<64x64xf16>, tensor<64xf32>
}

// Modifiers on the tile step (what fa-tile-attention makes of fa.attention's
// regions): the tile's batch and head, the captures with their types.
// CHECK-LABEL: func.func @online_attention_modifiers
// CHECK-SAME: %[[B:[a-zA-Z0-9]+]]: index, %[[H:[a-zA-Z0-9]+]]: index, %[[T:[a-zA-Z0-9]+]]: tensor<4xf32>
// CHECK: fa.online_attention {{.*}} masked({{.*}}) at(%[[B]], %[[H]]) scale 1.250000e-01 captures(%[[T]] : tensor<4xf32>) score_mod(
// CHECK: tensor.extract
// CHECK: fa.yield {{.*}} : f32
// CHECK: } mask_mod(
// CHECK: fa.yield {{.*}} : i1
// GENERIC-LABEL: sym_name = "online_attention_modifiers"
// GENERIC: "fa.online_attention"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1>, scale = 1.250000e-01 : f32}> ({
func.func @online_attention_modifiers(%q: tensor<64x64xbf16>, %acc: tensor<64x64xf32>,
                                      %max: tensor<64xf32>, %i: index, %b: index,
                                      %h: index, %t: tensor<4xf32>) -> tensor<64x64xf32> {
  %a, %m, %s = fa.online_attention %q, %q, %q into %acc, %max, %max
      masked(%i, %i, %i, %i) at(%b, %h) scale 0.125 captures(%t : tensor<4xf32>)
      score_mod(%x: f32, %bb: index, %hh: index, %r: index, %c: index, %tt: tensor<4xf32>) {
        %e = tensor.extract %tt[%hh] : tensor<4xf32>
        %y = arith.addf %x, %e : f32
        fa.yield %y : f32
      }
      mask_mod(%bb: index, %hh: index, %r: index, %c: index, %tt: tensor<4xf32>) {
        %v = arith.cmpi ule, %c, %r : index
        fa.yield %v : i1
      }
      : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  return %a : tensor<64x64xf32>
}

// A boundary block: the mask operands (block origins and sequence lengths)
// alone hide the keys past the end; then with a causal and a window mask.
// CHECK-LABEL: func.func @online_attention_masked
// CHECK-SAME: %[[QS:[a-zA-Z0-9]+]]: index, %[[KS:[a-zA-Z0-9]+]]: index, %[[QL:[a-zA-Z0-9]+]]: index, %[[KL:[a-zA-Z0-9]+]]: index
// CHECK: fa.online_attention {{.*}} masked(%[[QS]], %[[KS]], %[[QL]], %[[KL]]) scale 1.250000e-01 :
// GENERIC-LABEL: sym_name = "online_attention_masked"
// GENERIC: "fa.online_attention"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0>, scale = 1.250000e-01 : f32}>
// CHECK: fa.online_attention {{.*}} masked(%[[QS]], %[[KS]], %[[QL]], %[[KL]]) mask<causal> scale 1.250000e-01 :
// CHECK: fa.online_attention {{.*}} masked(%[[QS]], %[[KS]], %[[QL]], %[[KL]]) mask<window 128, 0> scale 1.250000e-01 :
// CHECK: fa.online_attention {{.*}} masked(%[[QS]], %[[KS]], %[[QL]], %[[KL]]) mask<window 16, 16> scale 1.250000e-01 :
func.func @online_attention_masked(%q: tensor<64x64xbf16>, %k: tensor<64x64xbf16>,
                                   %v: tensor<64x64xbf16>, %acc: tensor<64x64xf32>,
                                   %max: tensor<64xf32>, %sum: tensor<64xf32>,
                                   %qs: index, %ks: index, %ql: index, %kl: index)
    -> tensor<64x64xf32> {
  %a0, %m0, %s0 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      masked(%qs, %ks, %ql, %kl) scale 0.125
      : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  %a1, %m1, %s1 = fa.online_attention %q, %k, %v into %a0, %m0, %s0
      masked(%qs, %ks, %ql, %kl) mask<causal> scale 0.125
      : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  %a2, %m2, %s2 = fa.online_attention %q, %k, %v into %a1, %m1, %s1
      masked(%qs, %ks, %ql, %kl) mask<window 128, 0> scale 0.125
      : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  %a3, %m3, %s3 = fa.online_attention %q, %k, %v into %a2, %m2, %s2
      masked(%qs, %ks, %ql, %kl) mask<window 16, 16> scale 0.125
      : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  return %a3 : tensor<64x64xf32>
}

// The base-2 form (fa-use-exp2's output) with a softcap, f32 inputs, a
// value head dim different from the head dim, and dynamic tile sizes.
// CHECK-LABEL: func.func @online_attention_exp2_softcap
// CHECK: %[[ACC:.*]], %[[MAX:.*]], %[[SUM:.*]] = fa.online_attention {{.*}} softcap 3.000000e+01 scale 0.180336893 exp2 :
// CHECK-SAME: tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32> -> tensor<?x32xf32>, tensor<?xf32>
// CHECK: fa.online_attention {{.*}} masked({{.*}}) mask<causal> softcap 3.000000e+01 scale 0.180336893 exp2 :
// CHECK: fa.online_attention_finalize %{{.*}}, %{{.*}}, %{{.*}} exp2 :
// GENERIC-LABEL: sym_name = "online_attention_exp2_softcap"
// GENERIC: "fa.online_attention"({{.*}}) <{exp2, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, scale = 0.180336893 : f32, softcap = 3.000000e+01 : f32}>
// GENERIC: "fa.online_attention_finalize"({{.*}}) <{exp2}>
// CHECK-SAME: tensor<?x32xf32>, tensor<?xf32> -> tensor<?x32xf32>
func.func @online_attention_exp2_softcap(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>,
                                         %v: tensor<?x32xf32>, %acc: tensor<?x32xf32>,
                                         %max: tensor<?xf32>, %sum: tensor<?xf32>,
                                         %i: index)
    -> (tensor<?x32xf32>, tensor<?xf32>) {
  %a0, %m0, %s0 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      softcap 30.0 scale 0.1803369 exp2
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>
      -> tensor<?x32xf32>, tensor<?xf32>
  %a1, %m1, %s1 = fa.online_attention %q, %k, %v into %a0, %m0, %s0
      masked(%i, %i, %i, %i) mask<causal> softcap 30.0 scale 0.1803369 exp2
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>
      -> tensor<?x32xf32>, tensor<?xf32>
  %out, %lse = fa.online_attention_finalize %a1, %m1, %s1 exp2
      : tensor<?x32xf32>, tensor<?xf32> -> tensor<?x32xf32>
  return %out, %lse : tensor<?x32xf32>, tensor<?xf32>
}

//===----------------------------------------------------------------------===//
// fa.attention_backward_step
//===----------------------------------------------------------------------===//

// The fast mode's step: all three accumulators, a fully visible tile pair.
// The result types follow `->` in the order dk, dv, dq.
// CHECK-LABEL: func.func @attention_backward_step_all
// CHECK-SAME: %[[Q:[a-zA-Z0-9]+]]: tensor<64x128xf16>, %[[K:[a-zA-Z0-9]+]]: tensor<32x128xf16>, %[[V:[a-zA-Z0-9]+]]: tensor<32x128xf16>, %[[DO:[a-zA-Z0-9]+]]: tensor<64x128xf16>, %[[LSE:[a-zA-Z0-9]+]]: tensor<64xf32>, %[[DI:[a-zA-Z0-9]+]]: tensor<64xf32>, %[[DK:[a-zA-Z0-9]+]]: tensor<32x128xf32>, %[[DV:[a-zA-Z0-9]+]]: tensor<32x128xf32>, %[[DQ:[a-zA-Z0-9]+]]: tensor<64x128xf32>
// CHECK: %{{.*}}, %{{.*}}, %{{.*}} = fa.attention_backward_step %[[Q]], %[[K]], %[[V]], %[[DO]], %[[LSE]], %[[DI]] dkv(%[[DK]], %[[DV]]) dq(%[[DQ]]) scale 1.250000e-01 :
// CHECK-SAME: tensor<64x128xf16>, tensor<32x128xf16>, tensor<32x128xf16>, tensor<64x128xf16>, tensor<64xf32> -> tensor<32x128xf32>, tensor<32x128xf32>, tensor<64x128xf32>
// GENERIC-LABEL: sym_name = "attention_backward_step_all"
// GENERIC: "fa.attention_backward_step"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 1>, scale = 1.250000e-01 : f32}>
func.func @attention_backward_step_all(%q: tensor<64x128xf16>, %k: tensor<32x128xf16>,
                                       %v: tensor<32x128xf16>, %do: tensor<64x128xf16>,
                                       %lse: tensor<64xf32>, %delta: tensor<64xf32>,
                                       %dk: tensor<32x128xf32>, %dv: tensor<32x128xf32>,
                                       %dq: tensor<64x128xf32>)
    -> (tensor<32x128xf32>, tensor<32x128xf32>, tensor<64x128xf32>) {
  %dk1, %dv1, %dq1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x128xf16>, tensor<32x128xf16>, tensor<32x128xf16>,
        tensor<64x128xf16>, tensor<64xf32>
      -> tensor<32x128xf32>, tensor<32x128xf32>, tensor<64x128xf32>
  return %dk1, %dv1, %dq1 : tensor<32x128xf32>, tensor<32x128xf32>, tensor<64x128xf32>
}

// The deterministic dK/dV nest's step: dk and dv only, on a boundary tile
// pair (the mask operands, then a causal and a window mask), bf16 with a
// value head dim different from the head dim.
// CHECK-LABEL: func.func @attention_backward_step_dkv_masked
// CHECK-SAME: %[[QS:[a-zA-Z0-9]+]]: index, %[[KS:[a-zA-Z0-9]+]]: index, %[[QL:[a-zA-Z0-9]+]]: index, %[[KL:[a-zA-Z0-9]+]]: index
// CHECK: %[[DK1:.*]], %[[DV1:.*]] = fa.attention_backward_step {{.*}} dkv(%{{.*}}, %{{.*}}) masked(%[[QS]], %[[KS]], %[[QL]], %[[KL]]) scale 1.250000e-01 :
// CHECK-SAME: tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64xf32> -> tensor<64x128xf32>, tensor<64x64xf32>
// CHECK: fa.attention_backward_step {{.*}} dkv(%[[DK1]], %[[DV1]]) masked(%[[QS]], %[[KS]], %[[QL]], %[[KL]]) mask<window 128, 0> scale 1.250000e-01 :
// CHECK: fa.attention_backward_step {{.*}} masked({{.*}}) mask<window 16, 16> softcap 3.000000e+01 scale 1.250000e-01 :
// GENERIC-LABEL: sym_name = "attention_backward_step_dkv_masked"
// GENERIC: "fa.attention_backward_step"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0>, scale = 1.250000e-01 : f32}>
// GENERIC: "fa.attention_backward_step"({{.*}}) <{mask = #fa.mask<window 128, 0>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0>, scale = 1.250000e-01 : f32}>
func.func @attention_backward_step_dkv_masked(
    %q: tensor<64x128xbf16>, %k: tensor<64x128xbf16>, %v: tensor<64x64xbf16>,
    %do: tensor<64x64xbf16>, %lse: tensor<64xf32>, %delta: tensor<64xf32>,
    %dk: tensor<64x128xf32>, %dv: tensor<64x64xf32>,
    %qs: index, %ks: index, %ql: index, %kl: index)
    -> (tensor<64x128xf32>, tensor<64x64xf32>) {
  %dk1, %dv1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk, %dv) masked(%qs, %ks, %ql, %kl) scale 0.125
      : tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<64x64xbf16>,
        tensor<64x64xbf16>, tensor<64xf32>
      -> tensor<64x128xf32>, tensor<64x64xf32>
  %dk2, %dv2 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk1, %dv1) masked(%qs, %ks, %ql, %kl) mask<window 128, 0> scale 0.125
      : tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<64x64xbf16>,
        tensor<64x64xbf16>, tensor<64xf32>
      -> tensor<64x128xf32>, tensor<64x64xf32>
  %dk3, %dv3 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dkv(%dk2, %dv2) masked(%qs, %ks, %ql, %kl) mask<window 16, 16> softcap 30.0
      scale 0.125
      : tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<64x64xbf16>,
        tensor<64x64xbf16>, tensor<64xf32>
      -> tensor<64x128xf32>, tensor<64x64xf32>
  return %dk3, %dv3 : tensor<64x128xf32>, tensor<64x64xf32>
}

// The deterministic dQ nest's step: dq only, f32, dynamic tile sizes.
// CHECK-LABEL: func.func @attention_backward_step_dq
// CHECK: %{{.*}} = fa.attention_backward_step {{.*}} dq(%{{.*}}) masked({{.*}}) mask<causal> softcap 3.000000e+01 scale 0.180336878 :
// CHECK-SAME: tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xf32> -> tensor<?x64xf32>
// GENERIC-LABEL: sym_name = "attention_backward_step_dq"
// GENERIC: "fa.attention_backward_step"({{.*}}) <{mask = #fa.mask<causal>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 0, 0, 1>, scale = 0.180336878 : f32, softcap = 3.000000e+01 : f32}>
func.func @attention_backward_step_dq(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>,
                                      %v: tensor<?x32xf32>, %do: tensor<?x32xf32>,
                                      %lse: tensor<?xf32>, %delta: tensor<?xf32>,
                                      %dq: tensor<?x64xf32>, %i: index)
    -> tensor<?x64xf32> {
  %dq1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
      dq(%dq) masked(%i, %i, %i, %i) mask<causal> softcap 30.0 scale 0.180336878
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>,
        tensor<?xf32>
      -> tensor<?x64xf32>
  return %dq1 : tensor<?x64xf32>
}

//===----------------------------------------------------------------------===//
// Run-time score scalars: scale and softcap as f32 operands
//===----------------------------------------------------------------------===//

// The scale and the softcap as values (kernel arguments on the GPU): the
// operands print in place of the constants and appear in the type list.
// CHECK-LABEL: func.func @attention_runtime_scalars
// CHECK-SAME: (%{{.*}}: tensor<1x4x?x64xbf16>, %[[S:.*]]: f32, %[[C:.*]]: f32)
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> softcap %[[C]] scale %[[S]] :
// CHECK-SAME: (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, f32, f32)
// CHECK: fa.attention_backward {{.*}} mask<window 8, 8> scale %[[S]] deterministic :
// GENERIC-LABEL: sym_name = "attention_runtime_scalars"
// GENERIC: "fa.attention"({{.*}}) <{mask = #fa.mask<causal>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0>}>
// GENERIC: "fa.attention_backward"({{.*}}) <{deterministic, mask = #fa.mask<window 8, 8>, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0>}>
func.func @attention_runtime_scalars(%q: tensor<1x4x?x64xbf16>, %s: f32, %c: f32)
    -> tensor<1x4x?x64xbf16> {
  %out, %lse = fa.attention %q, %q, %q mask<causal> softcap %c scale %s
      : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, f32, f32)
      -> (tensor<1x4x?x64xbf16>, tensor<1x4x?xf32>)
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %out, %lse, %out
      mask<window 8, 8> scale %s deterministic
      : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>,
         tensor<1x4x?x64xbf16>, tensor<1x4x?xf32>, tensor<1x4x?x64xbf16>, f32)
      -> (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>)
  return %dq : tensor<1x4x?x64xbf16>
}

// The tile-level ops take the same operands.
// CHECK-LABEL: func.func @tile_ops_runtime_scalars
// CHECK-SAME: %[[S:[^:]*]]: f32, %[[C:[^:]*]]: f32)
// CHECK: fa.online_attention {{.*}} softcap %[[C]] scale %[[S]] exp2 :
// CHECK: fa.attention_backward_step {{.*}} dq(%{{.*}}) scale %[[S]] :
// GENERIC-LABEL: sym_name = "tile_ops_runtime_scalars"
// GENERIC: "fa.online_attention"({{.*}}) <{exp2, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0>}>
// GENERIC: "fa.attention_backward_step"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0>, resultSegmentSizes = array<i32: 0, 0, 1>}>
func.func @tile_ops_runtime_scalars(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
                                    %m: tensor<64xf32>, %s: f32, %c: f32)
    -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %a, %mx, %sm = fa.online_attention %t, %t, %t into %acc, %m, %m softcap %c
      scale %s exp2
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  %dq = fa.attention_backward_step %t, %t, %t, %t, %m, %m dq(%acc) scale %s
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
        tensor<64x64xf16>, tensor<64xf32>
      -> tensor<64x64xf32>
  return %a, %dq : tensor<64x64xf32>, tensor<64x64xf32>
}

// CHECK-LABEL: func.func @merge
// CHECK: fa.attention_merge out(%{{.*}}, %{{.*}}) lse(%{{.*}}, %{{.*}}) : (tensor<1x8x1x128xf32>, tensor<?x8x1x128xf32>), (tensor<1x8x1xf32>, tensor<1x8x1xf32>) -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
// GENERIC-LABEL: sym_name = "merge"
// GENERIC: "fa.attention_merge"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
func.func @merge(%o0: tensor<1x8x1x128xf32>, %o1: tensor<?x8x1x128xf32>,
                 %l0: tensor<1x8x1xf32>, %l1: tensor<1x8x1xf32>)
    -> (tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>) {
  %o, %l = fa.attention_merge out(%o0, %o1) lse(%l0, %l1)
      : (tensor<1x8x1x128xf32>, tensor<?x8x1x128xf32>),
        (tensor<1x8x1xf32>, tensor<1x8x1xf32>)
      -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return %o, %l : tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
}

// CHECK-LABEL: func.func @merge_splits
// CHECK: fa.attention_merge_splits %{{.*}}, %{{.*}} : tensor<8x8x?x4x128xf32>, tensor<8x8x?x4xf32> -> tensor<8x8x4x128xbf16>, tensor<8x8x4xf32>
// GENERIC-LABEL: sym_name = "merge_splits"
// GENERIC: "fa.attention_merge_splits"(%{{.*}}, %{{.*}})
func.func @merge_splits(%o: tensor<8x8x?x4x128xf32>, %l: tensor<8x8x?x4xf32>)
    -> (tensor<8x8x4x128xbf16>, tensor<8x8x4xf32>) {
  %out, %lse = fa.attention_merge_splits %o, %l
      : tensor<8x8x?x4x128xf32>, tensor<8x8x?x4xf32>
      -> tensor<8x8x4x128xbf16>, tensor<8x8x4xf32>
  return %out, %lse : tensor<8x8x4x128xbf16>, tensor<8x8x4xf32>
}

//===----------------------------------------------------------------------===//
// fa.attention_varlen, fa.attention_paged
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @attention_varlen
// CHECK: fa.attention_varlen %{{.*}}, %{{.*}}, %{{.*}} seqlens(%{{.*}}, %{{.*}}) max_seqlen_q(%{{.*}}) mask<causal> softcap 3.000000e+01 scale 1.250000e-01 :
// CHECK-SAME: (tensor<8x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x64xbf16>, tensor<?xi32>, tensor<?xi32>, index)
// CHECK-SAME: -> (tensor<8x?x64xbf16>, tensor<8x?xf32>)
// GENERIC: sym_name = "attention_varlen"
// GENERIC: "fa.attention_varlen"
// GENERIC-SAME: operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0>
func.func @attention_varlen(%q: tensor<8x?x128xbf16>, %k: tensor<2x?x128xbf16>,
                            %v: tensor<2x?x64xbf16>, %cu_q: tensor<?xi32>,
                            %cu_k: tensor<?xi32>, %max_q: index)
    -> (tensor<8x?x64xbf16>, tensor<8x?xf32>) {
  %out, %lse = fa.attention_varlen %q, %k, %v seqlens(%cu_q, %cu_k)
      max_seqlen_q(%max_q) mask<causal> softcap 30.0 scale 0.125
      : (tensor<8x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x64xbf16>,
         tensor<?xi32>, tensor<?xi32>, index)
      -> (tensor<8x?x64xbf16>, tensor<8x?xf32>)
  return %out, %lse : tensor<8x?x64xbf16>, tensor<8x?xf32>
}

// Run-time window sizes and scale.

// CHECK-LABEL: func.func @attention_varlen_runtime
// CHECK: fa.attention_varlen {{.*}} mask<window ?, ?>(%{{.*}}, %{{.*}}) scale %{{.*}} :
func.func @attention_varlen_runtime(%q: tensor<4x10x64xf16>, %k: tensor<4x12x64xf16>,
                                    %v: tensor<4x12x64xf16>, %cu_q: tensor<3xi32>,
                                    %cu_k: tensor<3xi32>, %max_q: index,
                                    %l: i64, %r: i64, %s: f32)
    -> (tensor<4x10x64xf16>, tensor<4x10xf32>) {
  %out, %lse = fa.attention_varlen %q, %k, %v seqlens(%cu_q, %cu_k)
      max_seqlen_q(%max_q) mask<window ?, ?>(%l, %r) scale %s
      : (tensor<4x10x64xf16>, tensor<4x12x64xf16>, tensor<4x12x64xf16>,
         tensor<3xi32>, tensor<3xi32>, index, f32, i64, i64)
      -> (tensor<4x10x64xf16>, tensor<4x10xf32>)
  return %out, %lse : tensor<4x10x64xf16>, tensor<4x10xf32>
}

// CHECK-LABEL: func.func @attention_paged
// CHECK: fa.attention_paged %{{.*}}, %{{.*}}, %{{.*}} pages(%{{.*}}) seqlens(%{{.*}}) mask<causal> :
// CHECK-SAME: (tensor<?x32x1x128xbf16>, tensor<?x8x256x128xbf16>, tensor<?x8x256x128xbf16>, tensor<?x?xi32>, tensor<?xi32>)
// CHECK-SAME: -> (tensor<?x32x1x128xbf16>, tensor<?x32x1xf32>)
// GENERIC: sym_name = "attention_paged"
// GENERIC: "fa.attention_paged"
// GENERIC-SAME: operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0>
func.func @attention_paged(%q: tensor<?x32x1x128xbf16>, %kp: tensor<?x8x256x128xbf16>,
                           %vp: tensor<?x8x256x128xbf16>, %table: tensor<?x?xi32>,
                           %lens: tensor<?xi32>)
    -> (tensor<?x32x1x128xbf16>, tensor<?x32x1xf32>) {
  %out, %lse = fa.attention_paged %q, %kp, %vp pages(%table) seqlens(%lens)
      mask<causal>
      : (tensor<?x32x1x128xbf16>, tensor<?x8x256x128xbf16>,
         tensor<?x8x256x128xbf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> (tensor<?x32x1x128xbf16>, tensor<?x32x1xf32>)
  return %out, %lse : tensor<?x32x1x128xbf16>, tensor<?x32x1xf32>
}

// CHECK-LABEL: func.func @attention_varlen_backward
// CHECK: fa.attention_varlen_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} seqlens(%{{.*}}, %{{.*}}) max_seqlen_q(%{{.*}}) max_seqlen_k(%{{.*}}) mask<causal> deterministic :
func.func @attention_varlen_backward(%q: tensor<8x?x64xbf16>, %k: tensor<2x?x64xbf16>,
                                     %v: tensor<2x?x64xbf16>, %o: tensor<8x?x64xbf16>,
                                     %l: tensor<8x?xf32>, %do: tensor<8x?x64xbf16>,
                                     %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>, %max_q: index,
                                     %max_k: index)
    -> (tensor<8x?x64xbf16>, tensor<2x?x64xbf16>, tensor<2x?x64xbf16>) {
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %v, %o, %l, %do
      seqlens(%cu_q, %cu_k) max_seqlen_q(%max_q) max_seqlen_k(%max_k)
      mask<causal> deterministic
      : (tensor<8x?x64xbf16>, tensor<2x?x64xbf16>, tensor<2x?x64xbf16>,
         tensor<8x?x64xbf16>, tensor<8x?xf32>, tensor<8x?x64xbf16>,
         tensor<?xi32>, tensor<?xi32>, index, index)
      -> (tensor<8x?x64xbf16>, tensor<2x?x64xbf16>, tensor<2x?x64xbf16>)
  return %dq, %dk, %dv : tensor<8x?x64xbf16>, tensor<2x?x64xbf16>, tensor<2x?x64xbf16>
}

// A key block of a paged cache (tile level): 64 keys over 16-key pages.
// CHECK-LABEL: func.func @paged_key_block
// CHECK:         fa.paged_key_block %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] table(%{{.*}}) limit(%{{.*}}) : tensor<?x8x16x128xbf16>, tensor<?x?xi32> -> tensor<64x128xbf16>
// GENERIC-LABEL: sym_name = "paged_key_block"
// GENERIC:       "fa.paged_key_block"
func.func @paged_key_block(%pages: tensor<?x8x16x128xbf16>, %t: tensor<?x?xi32>,
                           %b: index, %h: index, %k0: index, %n: index)
    -> tensor<64x128xbf16> {
  %k = fa.paged_key_block %pages[%b, %h, %k0] table(%t) limit(%n)
      : tensor<?x8x16x128xbf16>, tensor<?x?xi32> -> tensor<64x128xbf16>
  return %k : tensor<64x128xbf16>
}

// Run-time key ranges (a document mask): per batch, query head and group of
// 64 query rows, the keys [r[..., 0], r[..., 1]) the mask may show.
// CHECK-LABEL: func.func @attention_key_ranges
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} key_ranges(%{{.*}} rows 64) captures(%{{.*}}) mask_mod(
// GENERIC-LABEL: sym_name = "attention_key_ranges"
// GENERIC: "fa.attention"({{.*}}) <{key_range_rows = 64 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 1, 1>}> ({
func.func @attention_key_ranges(%q: tensor<2x4x?x64xbf16>, %r: tensor<2x4x?x2xi32>,
                                %doc: tensor<2x?xi32>)
    -> (tensor<2x4x?x64xbf16>, tensor<2x4x?xf32>) {
  %out, %lse = fa.attention %q, %q, %q key_ranges(%r rows 64) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<2x?xi32>) {
        %di = tensor.extract %d[%b, %i] : tensor<2x?xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<2x?xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      }
      : (tensor<2x4x?x64xbf16>, tensor<2x4x?x64xbf16>, tensor<2x4x?x64xbf16>,
         tensor<2x4x?x2xi32>, tensor<2x?xi32>)
      -> (tensor<2x4x?x64xbf16>, tensor<2x4x?xf32>)
  return %out, %lse : tensor<2x4x?x64xbf16>, tensor<2x4x?xf32>
}

// The backward's ranges: per batch, kv head and group of 64 keys the queries
// [r[..., 0], r[..., 1]) that may see them (GQA 4:2), and the forward's key
// ranges for the deterministic dQ.
// CHECK-LABEL: func.func @attention_backward_ranges
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} deterministic query_ranges(%{{.*}} rows 64) key_ranges(%{{.*}} rows 128) captures(%{{.*}}) mask_mod(
// GENERIC-LABEL: sym_name = "attention_backward_ranges"
// GENERIC: "fa.attention_backward"({{.*}}) <{deterministic, key_range_rows = 128 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1>, query_range_rows = 64 : i64}> ({
func.func @attention_backward_ranges(%q: tensor<2x4x?x64xbf16>, %k: tensor<2x2x?x64xbf16>,
                                     %l: tensor<2x4x?xf32>, %qr: tensor<2x2x?x2xi32>,
                                     %kr: tensor<2x4x?x4xi32>, %doc: tensor<2x?xi32>)
    -> (tensor<2x4x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %k, %q, %l, %q deterministic
      query_ranges(%qr rows 64) key_ranges(%kr rows 128) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<2x?xi32>) {
        %di = tensor.extract %d[%b, %i] : tensor<2x?xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<2x?xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      }
      : (tensor<2x4x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>,
         tensor<2x4x?x64xbf16>, tensor<2x4x?xf32>, tensor<2x4x?x64xbf16>,
         tensor<2x2x?x2xi32>, tensor<2x4x?x4xi32>, tensor<2x?xi32>)
      -> (tensor<2x4x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>)
  return %dq, %dk, %dv : tensor<2x4x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>
}

// With 4 columns the ranges also say which keys the mask_mod shows to every
// row of a group; the tile step carries them for its query block.
// CHECK-LABEL: func.func @attention_full_key_ranges
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} key_ranges(%{{.*}} rows 32) mask_mod(
// CHECK: fa.online_attention {{.*}} masked({{.*}}) at(%{{.*}}, %{{.*}}) full_keys(%[[F0:.*]], %[[F1:.*]]) scale 1.250000e-01 mask_mod(
// GENERIC-LABEL: sym_name = "attention_full_key_ranges"
// GENERIC: "fa.online_attention"({{.*}}) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0>, scale = 1.250000e-01 : f32}> ({
func.func @attention_full_key_ranges(%q: tensor<1x2x64x64xbf16>, %r: tensor<1x2x2x4xi32>,
                                     %acc: tensor<64x64xf32>, %max: tensor<64xf32>,
                                     %i: index, %b: index, %h: index, %f0: index,
                                     %f1: index)
    -> (tensor<1x2x64x64xbf16>, tensor<64x64xf32>) {
  %out, %lse = fa.attention %q, %q, %q key_ranges(%r rows 32)
      mask_mod(%bb: index, %hh: index, %x: index, %y: index) {
        %v = arith.cmpi ule, %y, %x : index
        fa.yield %v : i1
      }
      : (tensor<1x2x64x64xbf16>, tensor<1x2x64x64xbf16>, tensor<1x2x64x64xbf16>,
         tensor<1x2x2x4xi32>) -> (tensor<1x2x64x64xbf16>, tensor<1x2x64xf32>)
  %qt = tensor.extract_slice %q[0, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1]
      : tensor<1x2x64x64xbf16> to tensor<64x64xbf16>
  %a, %m, %s = fa.online_attention %qt, %qt, %qt into %acc, %max, %max
      masked(%i, %i, %i, %i) at(%b, %h) full_keys(%f0, %f1) scale 0.125
      mask_mod(%bb: index, %hh: index, %x: index, %y: index) {
        %v = arith.cmpi ule, %y, %x : index
        fa.yield %v : i1
      }
      : tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  return %out, %a : tensor<1x2x64x64xbf16>, tensor<64x64xf32>
}
