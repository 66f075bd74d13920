// The GPU pipelines check their target options when they are built: a chip,
// PTX version or binary format they cannot honour is an error that names the
// option, not a fatal error of the LLVM back end later.
// RUN: not fa-opt %s --fa-gpu-forward="chip=sm_70" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not fa-opt %s --fa-gpu-backward="chip=bogus" 2>&1 | FileCheck %s --check-prefix=BOGUS
// RUN: not fa-opt %s --fa-gpu-forward="chip=sm_90a features=+ptx60" 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: not fa-opt %s --fa-gpu-forward="features=+ptxabc" 2>&1 | FileCheck %s --check-prefix=PTXBAD
// RUN: not fa-opt %s --fa-gpu-forward="format=-1" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not fa-opt %s --fa-gpu-forward="warps=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=WARPS

// CHIP: error: fa-gpu-forward: unknown chip 'sm_70' (supported: sm_80, sm_90, sm_90a)
// BOGUS: error: fa-gpu-backward: unknown chip 'bogus' (supported: sm_80, sm_90, sm_90a)
// PTX: error: fa-gpu-forward: features: sm_90a needs PTX 8.1 or newer, got +ptx60
// PTXBAD: error: fa-gpu-forward: features: bad PTX version '+ptxabc'
// FORMAT: error: fa-gpu-forward: format must be isa, bin, fatbin or offloading, got '-1'
// Out-of-range kernel configuration fields (a thread block has at most 32
// warps).
// WARPS: error: fa-select-kernel-config: warps must be in [0, 32] (0 = choose), got 9223372036854775807

!m = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>
func.func @forward(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
