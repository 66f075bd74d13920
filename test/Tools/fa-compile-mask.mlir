// fa-compile names kernels by mask kind (causal, window, causal window):
// an `#fa.mask` with one run-time and one constant side other than a causal
// window's right 0 has no kind, and is refused with a precise error.
// RUN: not fa-compile %s --chip=sm_80 -o %t 2>&1 | FileCheck %s
// CHECK: fa-compile: a window with one run-time and one constant size (other than a causal window's right bound 0) has no kernel kind, got #fa.mask<window 64, ?>

func.func @fa_fwd(%q: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %out: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, %r: i64) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %o, %l = fa.attention %qt, %kt, %vt mask<window 64, ?>(%r) scale 0.25 : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, i64) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x?x?x64xf16>, memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}
