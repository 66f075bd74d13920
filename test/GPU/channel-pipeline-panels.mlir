// REQUIRES: ptxas
// RUN: fa-opt %s --fa-gpu-to-binary="chip=sm_90a toolkit=%cuda_root" -o %t.mlir
// RUN: python3 %S/extract-ptx.py %t.mlir %t --ptxas %ptxas --arch sm_90a | FileCheck %s --check-prefix=PTXAS
// RUN: FileCheck %s < %t-0.ptx

// channel-pipeline.mlir's column sum on a D = 128 tensor staged the way the
// wgmma kernels keep their tiles: each 64 x 128 bf16 tile is two 64-column
// panels of 128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8)),
// one TMA box each, both completing one "full" barrier of 16384 bytes.
// The consumers read through the swizzle, so the H200 test
// (python/tests/test_gpu_tensormap.py) checks the TMA's swizzle against the
// layout the kernels' wgmma descriptors assume.

// CHECK:       .visible .entry ws_colsum_panels(
// CHECK-NEXT:  .param .align 64 .b8 ws_colsum_panels_param_0[128]
// CHECK:       .shared .align 1024 .b8
// CHECK-DAG:   mbarrier.arrive.expect_tx.shared.b64 {{.*}}, {{.*}}, %r{{[0-9]+}};
// CHECK-DAG:   cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK-DAG:   setmaxnreg.inc.sync.aligned.u32 232
// PTXAS:       0 bytes spill stores, 0 bytes spill loads

!ring = memref<3x2x1x1x64x64xbf16, #gpu.address_space<workgroup>>
!buffer = memref<2x1x1x64x64xbf16, #gpu.address_space<workgroup>>
!box = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>
!stage = memref<2x1x1x64x64xbf16, strided<[4096, 4096, 4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
!channel = !fagpu.channel<3 x !buffer>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = swizzle_128b,
                                   l2promo = l2promo_128b, oob = zero,
                                   interleave = none>
!partial = memref<2x128xf32, #gpu.address_space<workgroup>>

module attributes {gpu.container_module} {
  gpu.module @ws_kernels {
    gpu.func @ws_colsum_panels(
        %map_arg: !llvm.ptr,
        %out: memref<?x?x128xf32, strided<[?, ?, 1], offset: ?>>, %n: index,
        %x: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>)
        workgroup(%ring: !ring {llvm.align = 1024 : i64},
                  %partial: !partial)
        kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c32 = arith.constant 32 : index
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
      } consumers {
        %tid = gpu.thread_id x
        %ct = arith.subi %tid, %c128 : index
        %col = arith.remui %ct, %c128 : index
        %slot = arith.divui %ct, %c128 : index
        %row0 = arith.muli %slot, %c32 : index
        %panel = arith.divui %col, %c64 : index
        %pcol = arith.remui %col, %c64 : index
        %chunk = arith.divui %pcol, %c8 : index
        %within = arith.remui %pcol, %c8 : index
        %sum = scf.for %t = %c0 to %tiles step %c1 iter_args(%acc = %zero) -> (f32) {
          %buf = fagpu.channel_get %tiles_ch[%t] : !channel -> !stage
          %next = scf.for %r = %c0 to %c32 step %c1 iter_args(%a = %acc) -> (f32) {
            %row = arith.addi %row0, %r : index
            // The 128-byte swizzle: chunk ^ (row % 8).
            %r8 = arith.remui %row, %c8 : index
            %swz = arith.xori %chunk, %r8 : index
            %base = arith.muli %swz, %c8 : index
            %e_col = arith.addi %base, %within : index
            %e = memref.load %buf[%panel, %c0, %c0, %row, %e_col] : !stage
            %f = arith.extf %e : bf16 to f32
            %a2 = arith.addf %a, %f : f32
            scf.yield %a2 : f32
          }
          fagpu.channel_release %tiles_ch[%t] : !channel
          scf.yield %next : f32
        }
        memref.store %sum, %partial[%slot, %col] : !partial
        nvvm.barrier id = %id1 number_of_threads = %n256
        %lead = arith.cmpi ult, %ct, %c128 : index
        scf.if %lead {
          %p0 = memref.load %partial[%c0, %col] : !partial
          %p1 = memref.load %partial[%c1, %col] : !partial
          %total = arith.addf %p0, %p1 : f32
          memref.store %total, %out[%b, %h, %col] : memref<?x?x128xf32, strided<[?, ?, 1], offset: ?>>
        }
      }
      gpu.return
    }
  }
}
