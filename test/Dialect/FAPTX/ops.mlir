// RUN: fa-opt %s -split-input-file | FileCheck %s
// RUN: fa-opt %s -split-input-file -mlir-print-op-generic | fa-opt -split-input-file | FileCheck %s
// RUN: fa-opt %s -split-input-file -canonicalize -cse | FileCheck %s --check-prefix=CSE

// Round trip of every faptx op.

// CHECK-LABEL: func @wgmma_mma_rs
// CHECK: %{{.*}}:4 = faptx.wgmma_mma_rs n = 8, bf16, a[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], b %{{.*}}, acc[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: faptx.wgmma_mma_rs n = 8, f16,
func.func @wgmma_mma_rs(%a: i32, %d: i64, %c: f32) -> (f32, f32) {
  %r:4 = faptx.wgmma_mma_rs n = 8, bf16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c]
  %s:4 = faptx.wgmma_mma_rs n = 8, f16, a[%a, %a, %a, %a], b %d, acc[%r#0, %r#1, %r#2, %r#3]
  return %s#0, %s#3 : f32, f32
}

// -----

// CHECK-LABEL: func @red_global_add
// CHECK: faptx.red_global_add %{{.*}}, [%{{.*}}, %{{.*}}]
// CHECK: faptx.red_global_add %{{.*}}, [%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
func.func @red_global_add(%p: i64, %x: f32) {
  faptx.red_global_add %p, [%x, %x]
  faptx.red_global_add %p, [%x, %x, %x, %x]
  return
}

// -----

// CHECK-LABEL: func @fences
// CHECK: faptx.operand_fence %{{.*}} : f32
// CHECK: faptx.operand_fence %{{.*}} : i32
// CHECK: faptx.opaque %{{.*}}
func.func @fences(%x: f32, %y: i32, %d: i64) -> (f32, i32, i64) {
  %0 = faptx.operand_fence %x : f32
  %1 = faptx.operand_fence %y : i32
  %2 = faptx.opaque %d
  return %0, %1, %2 : f32, i32, i64
}

// -----

// The fences and the wgmma have no declared memory effects: an unused one
// is not dead (it stands for a side-effecting instruction).
// CHECK-LABEL: func @not_dead
// CHECK: faptx.operand_fence
// CHECK: faptx.opaque
// CHECK: faptx.wgmma_mma_rs
func.func @not_dead(%x: f32, %a: i32, %d: i64) {
  %0 = faptx.operand_fence %x : f32
  %1 = faptx.opaque %d
  %r:4 = faptx.wgmma_mma_rs n = 8, bf16, a[%a, %a, %a, %a], b %d, acc[%x, %x, %x, %x]
  return
}

// -----

!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK-LABEL: gpu.func @tensormap_param
// CHECK: faptx.tensormap_param %{{.*}} : !llvm.ptr -> !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b
gpu.module @m {
  gpu.func @tensormap_param(%p: !llvm.ptr) kernel {
    %0 = faptx.tensormap_param %p : !llvm.ptr -> !map
    gpu.return
  }
}

// -----

// ex2 is Pure: unused, it folds away; used twice, CSE keeps one.
// CHECK-LABEL: func @ex2
// CHECK-COUNT-3: faptx.ex2 %{{.*}} : f32
// CSE-LABEL: func @ex2
// CSE-COUNT-1: faptx.ex2
// CSE-NOT: faptx.ex2
func.func @ex2(%x: f32) -> (f32, f32) {
  %unused = faptx.ex2 %x : f32
  %a = faptx.ex2 %x : f32
  %b = faptx.ex2 %x : f32
  return %a, %b : f32, f32
}

// -----

// tanh is Pure like ex2: unused, it folds away; used twice, CSE keeps one.
// CHECK-LABEL: func @tanh
// CHECK-COUNT-3: faptx.tanh %{{.*}} : f32
// CSE-LABEL: func @tanh
// CSE-COUNT-1: faptx.tanh
// CSE-NOT: faptx.tanh
func.func @tanh(%x: f32) -> (f32, f32) {
  %unused = faptx.tanh %x : f32
  %a = faptx.tanh %x : f32
  %b = faptx.tanh %x : f32
  return %a, %b : f32, f32
}
