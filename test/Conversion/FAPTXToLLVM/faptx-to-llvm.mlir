// RUN: fa-opt %s -split-input-file -fa-convert-faptx-to-llvm | FileCheck %s

// Each faptx op becomes the side-effecting inline PTX it stands for; other
// ops are left alone.

// The accumulator is tied in and out; scale-d is a register predicate set
// from the constant 1 (always accumulate); B is read transposed (tnspB = 1).
// CHECK-LABEL: func @wgmma_mma_rs
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[R:.*]] = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $13, 0;\0Awgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {$0, $1, $2, $3}, {$8, $9, $10, $11}, $12, p, 1, 1, 1;\0A}\0A", "=f,=f,=f,=f,0,1,2,3,r,r,r,r,l,n" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[A0:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %[[D:.*]], %[[ONE]] : (f32, f32, f32, f32, i32, i32, i32, i32, i64, i32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: %[[E0:.*]] = llvm.extractvalue %[[R]][0]
// CHECK: %[[E3:.*]] = llvm.extractvalue %[[R]][3]
// CHECK: return %[[E0]], %[[E3]]
func.func @wgmma_mma_rs(%a: i32, %d: i64, %c: f32) -> (f32, f32) {
  %r:4 = faptx.wgmma_mma_rs n = 8, bf16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c]
  return %r#0, %r#3 : f32, f32
}

// -----

// CHECK-LABEL: func @wgmma_mma_rs_f16_n64
// CHECK: llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, {{.*}}, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;
// CHECK-SAME: -> !llvm.struct<(f32, {{.*}})>
func.func @wgmma_mma_rs_f16_n64(%a: i32, %d: i64, %c: f32) -> f32 {
  %r:32 = faptx.wgmma_mma_rs n = 64, f16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c, %c]
  return %r#31 : f32
}

// -----

// CHECK-LABEL: func @red_global_add
// CHECK: llvm.inline_asm has_side_effects "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f" %{{.*}}, %{{.*}}, %{{.*}} : (i64, f32, f32) -> ()
// CHECK: llvm.inline_asm has_side_effects "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f" %{{.*}} : (i64, f32, f32, f32, f32) -> ()
// CHECK-NOT: faptx
func.func @red_global_add(%p: i64, %x: f32) {
  faptx.red_global_add %p, [%x, %x]
  faptx.red_global_add %p, [%x, %x, %x, %x]
  return
}

// -----

// CHECK-LABEL: func @fences
// CHECK: llvm.inline_asm has_side_effects "", "=f,0" %{{.*}} : (f32) -> f32
// CHECK: llvm.inline_asm has_side_effects "", "=r,0" %{{.*}} : (i32) -> i32
// CHECK: llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l" %{{.*}} : (i64) -> i64
// CHECK: arith.addf
func.func @fences(%x: f32, %y: i32, %d: i64) -> (f32, i32, i64) {
  %0 = faptx.operand_fence %x : f32
  %1 = faptx.operand_fence %y : i32
  %2 = faptx.opaque %d
  %3 = arith.addf %0, %0 : f32
  return %3, %1, %2 : f32, i32, i64
}

// -----

// On the kernel's llvm.func (after convert-gpu-to-nvvm) the argument becomes
// a by-value, 64-byte aligned, 128-byte grid constant; the descriptor is the
// argument itself.
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
// CHECK-LABEL: llvm.func @tensormap_param
// CHECK-SAME: (%[[P:.*]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %{{.*}}: i64)
// CHECK-NOT: faptx
// CHECK: %[[D:.*]] = builtin.unrealized_conversion_cast %[[P]] : !llvm.ptr to !nvgpu.tensormap.descriptor
// CHECK: builtin.unrealized_conversion_cast %[[D]] : !nvgpu.tensormap.descriptor<{{.*}}> to !llvm.ptr
llvm.func @tensormap_param(%p: !llvm.ptr, %x: i64) attributes {nvvm.kernel} {
  %0 = faptx.tensormap_param %p : !llvm.ptr -> !map
  %1 = builtin.unrealized_conversion_cast %0 : !map to !llvm.ptr
  llvm.return
}

// -----

// The flushing 2^x is the NVVM intrinsic (one MUFU.EX2), not inline PTX: it
// has no side effects, so LLVM may schedule and CSE it.
// CHECK-LABEL: func @ex2
// CHECK: %[[Y:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz"(%{{.*}}) : (f32) -> f32
// CHECK: return %[[Y]]
func.func @ex2(%x: f32) -> f32 {
  %y = faptx.ex2 %x : f32
  return %y : f32
}

// -----

// The softcap's tanh is LLVM's tanh with `afn`, which NVPTX selects as
// tanh.approx.f32 (one MUFU.TANH); LLVM 22 has no NVVM tanh intrinsic.
// CHECK-LABEL: func @tanh
// CHECK: %[[Y:.*]] = llvm.intr.tanh(%{{.*}}) {fastmathFlags = #llvm.fastmath<afn>} : (f32) -> f32
// CHECK: return %[[Y]]
func.func @tanh(%x: f32) -> f32 {
  %y = faptx.tanh %x : f32
  return %y : f32
}
