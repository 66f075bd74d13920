// RUN: fa-opt %s --split-input-file --verify-diagnostics --fa-use-exp2 | FileCheck %s

// The loop of one query block, as fa-tile-attention builds it: the running
// max starts at -inf, is carried by the loop and read by the finalize. Every
// step and the finalize switch to exp2 together.

// CHECK-LABEL: func.func @key_loop
// CHECK:         scf.for
// CHECK:           fa.online_attention
// CHECK-SAME:        scale 1.250000e-01 exp2
// CHECK:         fa.online_attention_finalize
// CHECK-SAME:      exp2
func.func @key_loop(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>,
                    %v: tensor<64x64xf16>, %n: index)
    -> (tensor<64x64xf16>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %max0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %sum0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %acc, %max, %sum = scf.for %i = %c0 to %n step %c1
      iter_args(%a = %acc0, %m = %max0, %s = %sum0)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %a1, %m1, %s1 = fa.online_attention %q, %k, %v into %a, %m, %s scale 0.125
        : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>
          -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %a1, %m1, %s1 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf16>
  return %out, %lse : tensor<64x64xf16>, tensor<64xf32>
}

// -----

// After fa-specialize-masks: masked, unmasked and masked loops in a row, the
// state of one loop seeding the next; a dense -inf constant as the initial
// max. Ops already in exp2 form stay so (the pass is idempotent).

// CHECK-LABEL: func.func @split_loops
// CHECK-COUNT-3: fa.online_attention {{.*}} exp2
// CHECK:         fa.online_attention_finalize {{.*}} exp2
func.func @split_loops(%q: tensor<16x64xf32>, %k: tensor<16x64xf32>,
                       %v: tensor<16x64xf32>, %acc0: tensor<16x64xf32>,
                       %sum0: tensor<16xf32>, %lo: index, %mid: index,
                       %hi: index, %qs: index, %ql: index, %kl: index)
    -> (tensor<16x64xf32>, tensor<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %max0 = arith.constant dense<0xFF800000> : tensor<16xf32>
  %r0:3 = scf.for %i = %c0 to %lo step %c1
      iter_args(%a = %acc0, %m = %max0, %s = %sum0)
      -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
    %r:3 = fa.online_attention %q, %k, %v into %a, %m, %s
        masked(%qs, %i, %ql, %kl) mask<causal> scale 0.125
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
          -> tensor<16x64xf32>, tensor<16xf32>
    scf.yield %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
  }
  %r1:3 = scf.for %i = %lo to %mid step %c1
      iter_args(%a = %r0#0, %m = %r0#1, %s = %r0#2)
      -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
    %r:3 = fa.online_attention %q, %k, %v into %a, %m, %s scale 0.125 exp2
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
          -> tensor<16x64xf32>, tensor<16xf32>
    scf.yield %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
  }
  %r2:3 = scf.for %i = %mid to %hi step %c1
      iter_args(%a = %r1#0, %m = %r1#1, %s = %r1#2)
      -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
    %r:3 = fa.online_attention %q, %k, %v into %a, %m, %s
        masked(%qs, %i, %ql, %kl) mask<causal> scale 0.125
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
          -> tensor<16x64xf32>, tensor<16xf32>
    scf.yield %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
  }
  %out, %lse = fa.online_attention_finalize %r2#0, %r2#1, %r2#2
      : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf32>
  return %out, %lse : tensor<16x64xf32>, tensor<16xf32>
}

// -----

// A running max handed in from outside has units the pass cannot change:
// switching the finalize alone would misread it.

func.func @foreign_max(%acc: tensor<16x64xf32>,
                       // expected-note @below {{the running max comes from here}}
                       %max: tensor<16xf32>, %sum: tensor<16xf32>)
    -> (tensor<16x64xf32>, tensor<16xf32>) {
  // expected-error @below {{cannot switch to exp2}}
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf32>
  return %out, %lse : tensor<16x64xf32>, tensor<16xf32>
}

// -----

// Same for a step seeded with a finite max (in natural-log units).

func.func @finite_initial_max(%q: tensor<16x64xf32>, %k: tensor<16x64xf32>,
                              %v: tensor<16x64xf32>, %acc: tensor<16x64xf32>,
                              %sum: tensor<16xf32>)
    -> (tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>) {
  // expected-note @below {{the running max comes from here}}
  %max = arith.constant dense<1.0> : tensor<16xf32>
  // expected-error @below {{cannot switch to exp2}}
  %r:3 = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
        -> tensor<16x64xf32>, tensor<16xf32>
  return %r#0, %r#1, %r#2 : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>
}
