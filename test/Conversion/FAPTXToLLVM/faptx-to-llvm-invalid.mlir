// RUN: fa-opt %s -split-input-file -fa-convert-faptx-to-llvm -verify-diagnostics

// A gpu.func loses its argument attributes in convert-gpu-to-nvvm: the
// tensor-map ABI is set on the llvm.func, so the pass must run after it.
!map = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, 3>, swizzle = none, l2promo = none, oob = zero, interleave = none>
gpu.module @m {
  gpu.func @k(%p: !llvm.ptr) kernel {
    // expected-error @+1 {{'faptx.tensormap_param' op lowers on the kernel's llvm.func: run fa-convert-faptx-to-llvm after convert-gpu-to-nvvm}}
    %0 = faptx.tensormap_param %p : !llvm.ptr -> !map
    gpu.return
  }
}
