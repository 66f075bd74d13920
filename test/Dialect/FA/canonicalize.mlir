// RUN: fa-opt %s --split-input-file --canonicalize | FileCheck %s

// A constant scale or softcap operand folds into the attribute form, so that
// IR built with constants reaches the lowerings as before.

// CHECK-LABEL: func.func @fold_constant_scalars
// CHECK-NOT:     arith.constant
// CHECK:         fa.attention %{{.*}}, %{{.*}}, %{{.*}} softcap 2.000000e+00 scale 1.250000e-01 :
// CHECK-SAME:      (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) ->
func.func @fold_constant_scalars(%q: tensor<1x1x?x64xf16>) -> tensor<1x1x?x64xf16> {
  %s = arith.constant 0.125 : f32
  %c = arith.constant 2.0 : f32
  %o, %l = fa.attention %q, %q, %q softcap %c scale %s
      : (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, f32, f32)
      -> (tensor<1x1x?x64xf16>, tensor<1x1x?xf32>)
  return %o : tensor<1x1x?x64xf16>
}

// -----

// A run-time value stays an operand; only the constant one folds.
// CHECK-LABEL: func.func @keep_runtime_scale
// CHECK-SAME:    %[[S:[^:]*]]: f32
// CHECK:         fa.attention_backward_step {{.*}} softcap 3.000000e+01 scale %[[S]] :
func.func @keep_runtime_scale(%t: tensor<64x64xf16>, %m: tensor<64xf32>,
                              %acc: tensor<64x64xf32>, %s: f32) -> tensor<64x64xf32> {
  %c = arith.constant 30.0 : f32
  %dq = fa.attention_backward_step %t, %t, %t, %t, %m, %m dq(%acc) softcap %c scale %s
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
        tensor<64x64xf16>, tensor<64xf32>
      -> tensor<64x64xf32>
  return %dq : tensor<64x64xf32>
}

// -----

// An invalid constant (not positive) is not folded into an attribute the
// verifier would reject: it stays a value, as the caller gave it.
// CHECK-LABEL: func.func @keep_invalid_constant
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         fa.online_attention {{.*}} scale %[[Z]] :
func.func @keep_invalid_constant(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
                                 %m: tensor<64xf32>) -> tensor<64x64xf32> {
  %z = arith.constant 0.0 : f32
  %a, %mx, %sm = fa.online_attention %t, %t, %t into %acc, %m, %m scale %z
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  return %a : tensor<64x64xf32>
}

// -----

// Constant window operands fold into the mask (a negative size is `inf`,
// unbounded); a causal window's right side is 0 already.
// CHECK-LABEL: func.func @fold_constant_window
// CHECK-NOT:     arith.constant
// CHECK:         fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window 32, inf> scale 1.250000e-01 :
// CHECK-SAME:      (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) ->
// CHECK:         fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<window 7, 0> scale 1.250000e-01 :
// CHECK-SAME:      (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) ->
func.func @fold_constant_window(%q: tensor<1x1x?x64xf16>, %r: i64)
    -> (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>) {
  %l = arith.constant 32 : i64
  %n = arith.constant -5 : i64
  %o, %lse = fa.attention %q, %q, %q mask<window ?, ?>(%l, %n) scale 0.125
      : (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, i64, i64)
      -> (tensor<1x1x?x64xf16>, tensor<1x1x?xf32>)
  %seven = arith.constant 7 : i64
  %o2, %lse2 = fa.attention %q, %q, %q mask<window ?, 0>(%seven) scale 0.125
      : (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, i64)
      -> (tensor<1x1x?x64xf16>, tensor<1x1x?xf32>)
  return %o, %o2 : tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>
}

// -----

// A constant side folds alone; the run-time side stays an operand.
// CHECK-LABEL: func.func @keep_runtime_window
// CHECK-SAME:    %[[R:[^:]*]]: i64
// CHECK:         fa.attention_backward %{{.*}} mask<window 16, ?>(%[[R]]) scale 1.250000e-01 :
// CHECK-SAME:      tensor<1x1x?x64xf16>, i64) ->
func.func @keep_runtime_window(%q: tensor<1x1x?x64xf16>, %lse: tensor<1x1x?xf32>,
                               %r: i64) -> tensor<1x1x?x64xf16> {
  %l = arith.constant 16 : i64
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<window ?, ?>(%l, %r) scale 0.125
      : (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>,
         tensor<1x1x?x64xf16>, tensor<1x1x?xf32>, tensor<1x1x?x64xf16>, i64, i64)
      -> (tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>, tensor<1x1x?x64xf16>)
  return %dq : tensor<1x1x?x64xf16>
}
