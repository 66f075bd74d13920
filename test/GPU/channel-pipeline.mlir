// REQUIRES: ptxas
// RUN: fa-opt %s --fa-gpu-to-binary="chip=sm_90a toolkit=%cuda_root" -o %t.mlir
// RUN: python3 %S/extract-ptx.py %t.mlir %t --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s < %t-0.ptx

// warp-specialized-pipeline.mlir's column sum written at the fagpu level:
// the roles are one fagpu.warp_specialize and the ring one !fagpu.channel;
// fa-gpu-to-binary's fa-lower-channels writes the mbarrier protocol and its
// fa-lower-warp-specialize the role split. python/tests/test_gpu_tensormap.py runs the result on the
// H200 with the same checks as the hand-written kernel.

// CHECK:       .visible .entry ws_colsum(
// CHECK-NEXT:  .param .align 64 .b8 ws_colsum_param_0[128]
// CHECK-DAG:   fence.mbarrier_init.release.cluster
// CHECK-DAG:   setmaxnreg.dec.sync.aligned.u32 40
// CHECK-DAG:   setmaxnreg.inc.sync.aligned.u32 232
// CHECK-DAG:   cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG:   mbarrier.try_wait.parity.shared.b64
// CHECK-DAG:   mbarrier.arrive.shared.b64
// CHECK-DAG:   bar.sync {{.*}}1, {{.*}}256;
// PTXAS:       0 bytes spill stores, 0 bytes spill loads

!ring = memref<3x1x1x64x64xbf16, #gpu.address_space<workgroup>>
!box = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>
!stage = memref<1x1x64x64xbf16, strided<[4096, 4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
!channel = !fagpu.channel<3 x !box>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = none,
                                   l2promo = l2promo_128b, oob = zero,
                                   interleave = none>

module attributes {gpu.container_module} {
  gpu.module @ws_kernels {
    gpu.func @ws_colsum(
        %map_arg: !llvm.ptr,
        %out: memref<?x?x64xf32, strided<[?, ?, 1], offset: ?>>, %n: index,
        %x: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>)
        workgroup(%ring: !ring {llvm.align = 128 : i64},
                  %partial: memref<4x64xf32, #gpu.address_space<workgroup>>)
        kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c16 = arith.constant 16 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %id1 = arith.constant 1 : i32
      %n256 = arith.constant 256 : i32
      %zero = arith.constant 0.0 : f32
      %map = faptx.tensormap_param %map_arg : !llvm.ptr -> !map
      %tiles_ch = fagpu.channel_create %ring arrivals 256 : !ring -> !channel
      %h = gpu.block_id x
      %b = gpu.block_id y
      %tiles = arith.ceildivui %n, %c64 : index
      fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232)
      producer {
        scf.for %t = %c0 to %tiles step %c1 {
          %row = arith.muli %t, %c64 : index
          fagpu.channel_put_tma %tiles_ch[%t], %map[%c0, %row, %h, %b] : !channel, !map
        }
        fagpu.yield
      } consumers {
        %tid = gpu.thread_id x
        %ct = arith.subi %tid, %c128 : index
        %col = arith.remui %ct, %c64 : index
        %slot = arith.divui %ct, %c64 : index
        %row0 = arith.muli %slot, %c16 : index
        %sum = scf.for %t = %c0 to %tiles step %c1 iter_args(%acc = %zero) -> (f32) {
          %buf = fagpu.channel_get %tiles_ch[%t] : !channel -> !stage
          %next = scf.for %r = %c0 to %c16 step %c1 iter_args(%a = %acc) -> (f32) {
            %row = arith.addi %row0, %r : index
            %e = memref.load %buf[%c0, %c0, %row, %col] : !stage
            %f = arith.extf %e : bf16 to f32
            %a2 = arith.addf %a, %f : f32
            scf.yield %a2 : f32
          }
          fagpu.channel_release %tiles_ch[%t] : !channel
          scf.yield %next : f32
        }
        memref.store %sum, %partial[%slot, %col] : memref<4x64xf32, #gpu.address_space<workgroup>>
        nvvm.barrier id = %id1 number_of_threads = %n256
        %lead = arith.cmpi ult, %ct, %c64 : index
        scf.if %lead {
          %p0 = memref.load %partial[%c0, %col] : memref<4x64xf32, #gpu.address_space<workgroup>>
          %p1 = memref.load %partial[%c1, %col] : memref<4x64xf32, #gpu.address_space<workgroup>>
          %p2 = memref.load %partial[%c2, %col] : memref<4x64xf32, #gpu.address_space<workgroup>>
          %p3 = memref.load %partial[%c3, %col] : memref<4x64xf32, #gpu.address_space<workgroup>>
          %s01 = arith.addf %p0, %p1 : f32
          %s23 = arith.addf %p2, %p3 : f32
          %total = arith.addf %s01, %s23 : f32
          memref.store %total, %out[%b, %h, %col] : memref<?x?x64xf32, strided<[?, ?, 1], offset: ?>>
        }
        fagpu.yield
      }
      gpu.return
    }
  }
}
