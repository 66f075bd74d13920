// REQUIRES: ptxas
// RUN: fa-opt %s --fa-gpu-to-binary="chip=sm_90a toolkit=%cuda_root" -o %t.mlir
// RUN: python3 %S/extract-ptx.py %t.mlir %t --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s < %t-0.ptx

// The schedule the Hopper forward's passes are to produce, written by hand
// at the GPU level: a producer warpgroup streams 64 x 64 bf16 tiles of a
// [B, H, N, 64] tensor with TMA into a ring of 3 shared-memory stages, each
// with a "full" mbarrier (the TMA's transaction count) and an "empty" one
// (every consumer thread arrives when done with the stage); two consumer
// warpgroups wait on "full", use the tile and release it. The roles
// rebalance registers with setmaxnreg (40 for the producer, 232 for the
// consumers, within 384 x 168), and the consumers alone meet at named
// barrier 1 for the epilogue. The "use" is a column sum (out[b, h, d] =
// sum_n x[b, h, n, d] in f32: each consumer thread adds 16 rows of one
// column per tile, the four partial sums per column meet in shared memory),
// so python/tests/test_gpu_tensormap.py checks the pipeline's phases and
// barriers exactly on the H200, N not a multiple of 64 included.

// CHECK:       .visible .entry ws_colsum(
// CHECK-NEXT:  .param .align 64 .b8 ws_colsum_param_0[128]
// CHECK:       .maxntid 384, 1, 1
// CHECK-DAG:   mbarrier.init.shared.b64
// CHECK-DAG:   fence.mbarrier_init.release.cluster
// CHECK-DAG:   setmaxnreg.dec.sync.aligned.u32 40
// CHECK-DAG:   setmaxnreg.inc.sync.aligned.u32 232
// CHECK-DAG:   cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG:   mbarrier.try_wait.parity.shared.b64
// CHECK-DAG:   mbarrier.arrive.shared.b64
// CHECK-DAG:   bar.sync {{.*}}1, {{.*}}256;
// PTXAS:       0 bytes spill stores, 0 bytes spill loads

!stage = memref<1x1x64x64xbf16, strided<[4096, 4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
!box = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = none,
                                   l2promo = l2promo_128b, oob = zero,
                                   interleave = none>
!barriers = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>

module attributes {gpu.container_module} {
  gpu.module @ws_kernels {
    gpu.func @ws_colsum(
        %map_arg: !llvm.ptr,
        %out: memref<?x?x64xf32, strided<[?, ?, 1], offset: ?>>, %n: index,
        %x: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>)
        workgroup(%ring: memref<3x1x64x64xbf16, #gpu.address_space<workgroup>> {llvm.align = 128 : i64},
                  %partial: memref<4x64xf32, #gpu.address_space<workgroup>>)
        kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c16 = arith.constant 16 : index
      %c32 = arith.constant 32 : index
      %c63 = arith.constant 63 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c256 = arith.constant 256 : index
      %bytes = arith.constant 8192 : index
      %ticks = arith.constant 10000000 : index
      %id1 = arith.constant 1 : i32
      %n256 = arith.constant 256 : i32
      %zero = arith.constant 0.0 : f32
      %map = faptx.tensormap_param %map_arg : !llvm.ptr -> !map
      %full = nvgpu.mbarrier.create -> !barriers
      %empty = nvgpu.mbarrier.create -> !barriers
      %h = gpu.block_id x
      %b = gpu.block_id y
      %tid = gpu.thread_id x
      %tiles = arith.ceildivui %n, %c64 : index
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        scf.for %s = %c0 to %c3 step %c1 {
          nvgpu.mbarrier.init %full[%s], %c1 : !barriers
          nvgpu.mbarrier.init %empty[%s], %c256 : !barriers
        }
        nvvm.fence.mbarrier.init
      }
      gpu.barrier
      %wg = arith.divui %tid, %c128 : index
      %producer = arith.cmpi eq, %wg, %c0 : index
      scf.if %producer {
        nvvm.setmaxregister decrease 40
        scf.if %first {
          scf.for %t = %c0 to %tiles step %c1 {
            %s = arith.remui %t, %c3 : index
            %round = arith.divui %t, %c3 : index
            %reuse = arith.cmpi uge, %t, %c3 : index
            scf.if %reuse {
              // Stage s was used in round - 1: wait for that phase of empty.
              %prev = arith.subi %round, %c1 : index
              %pbit = arith.remui %prev, %c2 : index
              %parity = arith.index_cast %pbit : index to i1
              nvgpu.mbarrier.try_wait.parity %empty[%s], %parity, %ticks : !barriers
            }
            nvgpu.mbarrier.arrive.expect_tx %full[%s], %bytes : !barriers
            %dst = memref.subview %ring[%s, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1]
                : memref<3x1x64x64xbf16, #gpu.address_space<workgroup>> to !stage
            %row = arith.muli %t, %c64 : index
            nvgpu.tma.async.load %map[%c0, %row, %h, %b], %full[%s] to %dst
                : !map, !barriers -> !stage
          }
        }
      } else {
        nvvm.setmaxregister increase 232
        %ct = arith.subi %tid, %c128 : index
        %col = arith.remui %ct, %c64 : index
        %slot = arith.divui %ct, %c64 : index
        %row0 = arith.muli %slot, %c16 : index
        %sum = scf.for %t = %c0 to %tiles step %c1 iter_args(%acc = %zero) -> (f32) {
          %s = arith.remui %t, %c3 : index
          %round = arith.divui %t, %c3 : index
          %rbit = arith.remui %round, %c2 : index
          %parity = arith.index_cast %rbit : index to i1
          nvgpu.mbarrier.try_wait.parity %full[%s], %parity, %ticks : !barriers
          %next = scf.for %r = %c0 to %c16 step %c1 iter_args(%a = %acc) -> (f32) {
            %row = arith.addi %row0, %r : index
            %e = memref.load %ring[%s, %c0, %row, %col]
                : memref<3x1x64x64xbf16, #gpu.address_space<workgroup>>
            %f = arith.extf %e : bf16 to f32
            %a2 = arith.addf %a, %f : f32
            scf.yield %a2 : f32
          }
          %token = nvgpu.mbarrier.arrive %empty[%s] : !barriers -> !nvgpu.mbarrier.token
          scf.yield %next : f32
        }
        memref.store %sum, %partial[%slot, %col] : memref<4x64xf32, #gpu.address_space<workgroup>>
        // The consumers only (256 threads): the producer warps have left.
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
      }
      gpu.return
    }
  }
}
