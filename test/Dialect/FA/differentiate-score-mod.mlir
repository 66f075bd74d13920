// RUN: fa-opt %s --split-input-file --fa-differentiate-score-mod --verify-diagnostics | FileCheck %s

// fa-differentiate-score-mod: the score_mod_grad of each backward, by
// forward-mode differentiation of the score_mod in the score %s.

// ALiBi: s + slope[h] * (j - i). The bias does not depend on s (copied, no
// tangent); the tangent of the sum is that of s, the constant 1.
// CHECK-LABEL: func.func @alibi
// CHECK: fa.attention_backward
// CHECK: score_mod(
// CHECK: score_mod_grad(%[[S:[^:]*]]: f32, %{{.*}}: index, %[[H:[^:]*]]: index, %{{.*}}: index, %{{.*}}: index, %[[SL:[^:]*]]: tensor<2xf32>) {
// CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:   %[[SLOPE:.*]] = tensor.extract %[[SL]][%[[H]]] : tensor<2xf32>
// CHECK:        arith.addf %[[S]], %{{.*}} : f32
// CHECK-NEXT:   fa.yield %[[ONE]] : f32
// CHECK-NEXT: } :
func.func @alibi(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>, %slopes: tensor<2xf32>) -> tensor<1x2x16x32xf32> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<2xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %r = arith.addf %s, %bias : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>, tensor<2xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq : tensor<1x2x16x32xf32>
}

// -----

// A softcap as a score_mod, c * tanh(s / c): the chain rule through divf
// (d(s / c) = ds / c), tanh (times 1 - tanh^2) and mulf (times c).
// CHECK-LABEL: func.func @softcap
// CHECK: score_mod_grad(%[[S:[^:]*]]: f32,
// CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:   %[[C:.*]] = arith.constant 3.000000e+01 : f32
// CHECK-NEXT:   %[[X:.*]] = arith.divf %[[S]], %[[C]] : f32
// CHECK-NEXT:   %[[DX:.*]] = arith.divf %[[ONE]], %[[C]] : f32
// CHECK-NEXT:   %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT:   %[[T2:.*]] = arith.mulf %[[T]], %[[T]] : f32
// CHECK-NEXT:   %[[ONE2:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:   %[[SLOPE:.*]] = arith.subf %[[ONE2]], %[[T2]] : f32
// CHECK-NEXT:   %[[DT:.*]] = arith.mulf %[[DX]], %[[SLOPE]] : f32
// CHECK-NEXT:   %[[R:.*]] = arith.mulf %[[C]], %[[T]] : f32
// CHECK-NEXT:   %[[DR:.*]] = arith.mulf %[[DT]], %[[C]] : f32
// CHECK-NEXT:   fa.yield %[[DR]] : f32
func.func @softcap(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x32xf32> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 30.0 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %c, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq : tensor<1x2x16x32xf32>
}

// -----

// Products, a maximum and a select: the product rule, the tangent of the
// operand picked; a comparison of s has no tangent (derivative 0 almost
// everywhere).
// CHECK-LABEL: func.func @product_max_select
// CHECK: score_mod_grad(%[[S:[^:]*]]: f32,
// CHECK:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:   %[[SQ:.*]] = arith.mulf %[[S]], %[[S]] : f32
// CHECK:   %[[A:.*]] = arith.mulf %[[ONE]], %[[S]] : f32
// CHECK:   %[[B:.*]] = arith.mulf %[[ONE]], %[[S]] : f32
// CHECK:   %[[DSQ:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK:   %[[M:.*]] = arith.maximumf %[[SQ]], %{{.*}} : f32
// CHECK:   %[[GE:.*]] = arith.cmpf oge, %[[SQ]], %{{.*}} : f32
// CHECK:   %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:   %[[DM:.*]] = arith.select %[[GE]], %[[DSQ]], %[[Z]] : f32
// CHECK:   %[[NEG:.*]] = arith.cmpf olt, %[[S]], %{{.*}} : f32
// CHECK:   arith.select %[[NEG]], %[[M]], %[[S]] : f32
// CHECK:   %[[D:.*]] = arith.select %[[NEG]], %[[DM]], %[[ONE]] : f32
// CHECK:   fa.yield %[[D]] : f32
func.func @product_max_select(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x32xf32> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %zero = arith.constant 0.0 : f32
        %sq = arith.mulf %s, %s : f32
        %m = arith.maximumf %sq, %zero : f32
        %neg = arith.cmpf olt, %s, %zero : f32
        %r = arith.select %neg, %m, %s : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq : tensor<1x2x16x32xf32>
}

// -----

// A score_mod that does not depend on s has derivative 0; an existing
// score_mod_grad is kept as written.
// CHECK-LABEL: func.func @constant_and_given
// CHECK: score_mod_grad(
// CHECK:   %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:   fa.yield %[[Z]] : f32
// CHECK: score_mod_grad(
// CHECK-NEXT:   %[[G:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:   fa.yield %[[G]] : f32
func.func @constant_and_given(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 1.0 : f32
        fa.yield %c : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  %dq2, %dk2, %dv2 = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %two = arith.constant 2.0 : f32
        %r = arith.mulf %s, %two : f32
        fa.yield %r : f32
      }
      score_mod_grad(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %two = arith.constant 2.0 : f32
        fa.yield %two : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dq2 : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}

// -----

// An op without a rule that depends on s is an error naming it.
func.func @floor(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x32xf32> {
  // expected-error @below {{fa-differentiate-score-mod: cannot differentiate 'math.floor' (an op of the score_mod that depends on the score)}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %f = math.floor %s : f32
        fa.yield %f : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq : tensor<1x2x16x32xf32>
}
