// REQUIRES: ptxas
// RUN: fa-opt %s --fa-gpu-to-binary="chip=sm_90a toolkit=%cuda_root" -o %t.mlir
// RUN: python3 %S/extract-ptx.py %t.mlir %t --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s < %t-0.ptx

// A TMA load whose tensor map is a by-value kernel parameter (CUDA's
// `const __grid_constant__ CUtensorMap`), the ABI the runtime's tensor maps
// use: an `!llvm.ptr` argument declared by `faptx.tensormap_param` becomes a
// `.param .align 64 .b8 [128]` whose address the TMA instruction reads.
// The kernel copies one 64 x 64 bf16 box of a [B, H, N, D] tensor at
// (b, h, n0, d0) to `out` through shared memory (`x` is the tensor the map
// covers, as the runtime's manifests name it), with the upstream nvgpu
// TMA and mbarrier ops. The H200 test python/tests/test_gpu_tensormap.py
// runs it with maps encoded by the runtime.

// CHECK:       .visible .entry tma_copy(
// CHECK-NEXT:  .param .align 64 .b8 tma_copy_param_0[128]
// The TMA destination is 128-byte aligned.
// CHECK:       .shared .align 128 .b8 __wg_tma_copy_0[8192];
// CHECK:       mbarrier.init.shared
// CHECK:       mbarrier.arrive.expect_tx.shared
// CHECK:       cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}]
// CHECK:       mbarrier.try_wait.parity.shared
// PTXAS:       0 bytes spill stores, 0 bytes spill loads

!tile = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !tile, swizzle = none,
                                   l2promo = none, oob = zero,
                                   interleave = none>
!barrier = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>

module attributes {gpu.container_module} {
  gpu.module @tma_copy_kernels {
    gpu.func @tma_copy(
        %map_arg: !llvm.ptr,
        %out: memref<64x64xbf16>, %b: index, %h: index, %n0: index,
        %d0: index, %x: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>)
        workgroup(%tile: !tile {llvm.align = 128 : i64}) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %c4096 = arith.constant 4096 : index
      %bytes = arith.constant 8192 : index
      %phase = arith.constant false
      %ticks = arith.constant 10000000 : index
      %map = faptx.tensormap_param %map_arg : !llvm.ptr -> !map
      %bar = nvgpu.mbarrier.create -> !barrier
      %tid = gpu.thread_id x
      %ntid = gpu.block_dim x
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        nvgpu.mbarrier.init %bar[%c0], %c1 : !barrier
      }
      gpu.barrier
      scf.if %first {
        nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barrier
        // Coordinates innermost first: (d, n, h, b).
        nvgpu.tma.async.load %map[%d0, %n0, %h, %b], %bar[%c0] to %tile
            : !map, !barrier -> !tile
      }
      nvgpu.mbarrier.try_wait.parity %bar[%c0], %phase, %ticks : !barrier
      scf.for %i = %tid to %c4096 step %ntid {
        %r = arith.divui %i, %c64 : index
        %c = arith.remui %i, %c64 : index
        %e = memref.load %tile[%c0, %c0, %r, %c] : !tile
        memref.store %e, %out[%r, %c] : memref<64x64xbf16>
      }
      gpu.return
    }
  }
}
