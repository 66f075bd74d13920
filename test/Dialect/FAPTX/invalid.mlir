// RUN: fa-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the faptx ops (lib/Dialect/FAPTX/IR).

func.func @wgmma_n(%a: i32, %d: i64, %c: f32) {
  // expected-error @+1 {{n must be a multiple of 8 from 8 to 256, not 12}}
  %r:6 = faptx.wgmma_mma_rs n = 12, bf16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c, %c, %c]
  return
}

// -----

func.func @wgmma_n_big(%a: i32, %d: i64, %c: f32) {
  // expected-error @+1 {{n must be a multiple of 8 from 8 to 256, not 264}}
  %r:4 = faptx.wgmma_mma_rs n = 264, bf16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c]
  return
}

// -----

func.func @wgmma_n_positive(%a: i32, %d: i64, %c: f32) {
  // expected-error @+1 {{attribute 'n' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %r:4 = faptx.wgmma_mma_rs n = 0, bf16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c]
  return
}

// -----

func.func @wgmma_a(%a: i32, %d: i64, %c: f32) {
  // expected-error @+1 {{A (64 x 16 from registers) takes 4 i32 registers per thread, not 2}}
  %r:4 = faptx.wgmma_mma_rs n = 8, bf16, a[%a, %a], b %d, acc[%c, %c, %c, %c]
  return
}

// -----

func.func @wgmma_acc(%a: i32, %d: i64, %c: f32) {
  // expected-error @+1 {{an m64n16k16 accumulator has 8 f32 registers per thread, not 4}}
  %r:4 = faptx.wgmma_mma_rs n = 16, bf16, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c]
  return
}

// -----

func.func @wgmma_type(%a: i32, %d: i64, %c: f32) {
  // expected-error @+1 {{attribute 'element_type' failed to satisfy constraint: type attribute of f16 or bf16}}
  %r:4 = faptx.wgmma_mma_rs n = 8, f32, a[%a, %a, %a, %a], b %d, acc[%c, %c, %c, %c]
  return
}

// -----

func.func @wgmma_results(%a: i32, %d: i64, %c: f32) {
  // The results are one f32 per accumulator register.
  // expected-error @+2 {{'faptx.wgmma_mma_rs' op inferred type(s) 'f32', 'f32', 'f32', 'f32' are incompatible with return type(s) of operation 'f32', 'f32'}}
  // expected-error @+1 {{'faptx.wgmma_mma_rs' op failed to infer returned types}}
  %r:2 = "faptx.wgmma_mma_rs"(%a, %a, %a, %a, %d, %c, %c, %c, %c) {n = 8 : i64, element_type = bf16, operandSegmentSizes = array<i32: 4, 1, 4>} : (i32, i32, i32, i32, i64, f32, f32, f32, f32) -> (f32, f32)
  return
}

// -----

func.func @red_count(%p: i64, %x: f32) {
  // expected-error @+1 {{red.global.add.v<n>.f32 takes 2 or 4 values, not 3}}
  faptx.red_global_add %p, [%x, %x, %x]
  return
}

// -----

func.func @red_type(%p: i64, %x: f16) {
  // expected-error @+1 {{'faptx.red_global_add' op operand #1 must be variadic of 32-bit float, but got 'f16'}}
  "faptx.red_global_add"(%p, %x, %x) : (i64, f16, f16) -> ()
  return
}

// -----

func.func @fence_type(%x: f16) {
  // expected-error @+1 {{'faptx.operand_fence' op operand #0 must be 32-bit float or 32-bit signless integer, but got 'f16'}}
  %0 = faptx.operand_fence %x : f16
  return
}

// -----

!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
func.func @tensormap_not_an_argument(%p: !llvm.ptr) {
  %q = llvm.getelementptr %p[1] : (!llvm.ptr) -> !llvm.ptr, i8
  // expected-error @+1 {{'faptx.tensormap_param' op takes an argument of the enclosing kernel function (or a value its gpu.launch captures)}}
  %0 = faptx.tensormap_param %q : !llvm.ptr -> !map
  return
}

// -----

!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
func.func @tensormap_nested_block(%p: !llvm.ptr, %c: i1) {
  cf.cond_br %c, ^bb1(%p : !llvm.ptr), ^bb2
^bb1(%arg: !llvm.ptr):
  // expected-error @+1 {{'faptx.tensormap_param' op takes an argument of the enclosing kernel function (or a value its gpu.launch captures)}}
  %0 = faptx.tensormap_param %arg : !llvm.ptr -> !map
  cf.br ^bb2
^bb2:
  return
}
