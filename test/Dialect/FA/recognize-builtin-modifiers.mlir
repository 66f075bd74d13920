// RUN: fa-opt %s --split-input-file --fa-recognize-builtin-modifiers | FileCheck %s

// The softcap written as a score_mod (what FlexAttention users write and
// flashmlir.trace_modifiers traces): the op's softcap attribute instead.
// CHECK-LABEL: func.func @softcap
// CHECK:         fa.attention %{{.*}}, %{{.*}}, %{{.*}} softcap 3.000000e+01 :
// CHECK-NOT:     score_mod
func.func @softcap(%q: tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>) {
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 3.0e+01 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %c2 = arith.constant 3.0e+01 : f32
        %r = arith.mulf %c2, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  return %o, %l : tensor<1x2x16x32xf32>, tensor<1x2x16xf32>
}

// -----

// The product by the reciprocal, the factors in the other order; a
// mask_mod stays, with its captures.
// CHECK-LABEL: func.func @reciprocal
// CHECK:         fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> softcap 5.000000e+01 captures(%{{.*}}) mask_mod(
// CHECK-NOT:     score_mod
func.func @reciprocal(%q: tensor<1x2x16x32xf32>, %doc: tensor<16xi32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>) {
  %o, %l = fa.attention %q, %q, %q mask<causal> captures(%doc)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index, %d: tensor<16xi32>) {
        %inv = arith.constant 2.0e-02 : f32
        %x = arith.mulf %inv, %s : f32
        %t = math.tanh %x : f32
        %c = arith.constant 5.0e+01 : f32
        %r = arith.mulf %t, %c : f32
        fa.yield %r : f32
      }
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<16xi32>) {
        %di = tensor.extract %d[%i] : tensor<16xi32>
        %dj = tensor.extract %d[%j] : tensor<16xi32>
        %v = arith.cmpi eq, %di, %dj : i32
        fa.yield %v : i1
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<16xi32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  return %o, %l : tensor<1x2x16x32xf32>, tensor<1x2x16xf32>
}

// -----

// The backward: its derivative goes with it.
// CHECK-LABEL: func.func @backward
// CHECK:         fa.attention_backward {{.*}} softcap 3.000000e+01 :
// CHECK-NOT:     score_mod
func.func @backward(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 3.0e+01 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %c, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}

// -----

// Not the softcap: different constants, something added, or a softcap
// already there (the score_mod then comes before it).
// CHECK-LABEL: func.func @others
// CHECK:         fa.attention {{.*}} score_mod(
// CHECK:         fa.attention {{.*}} score_mod(
// CHECK:         fa.attention {{.*}} softcap 2.000000e+01 score_mod(
func.func @others(%q: tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  %o1, %l1 = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 3.0e+01 : f32
        %c2 = arith.constant 2.0e+01 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %c2, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  %o2, %l2 = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 3.0e+01 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %c, %t : f32
        %r2 = arith.addf %r, %c : f32
        fa.yield %r2 : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  %o3, %l3 = fa.attention %q, %q, %q softcap 20.0
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 3.0e+01 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %c, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  return %o1, %o2, %o3 : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}
