// RUN: fa-opt %s -split-input-file -fa-lower-channels | FileCheck %s

!box = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
!ring = memref<3x1x64x64xbf16, #gpu.address_space<workgroup>>
!stage = memref<1x64x64xbf16, strided<[4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = none, l2promo = none, oob = zero, interleave = none>

// Creation: a full and an empty group of 3 mbarriers, initialized by thread 0
// (1 arrival + transaction bytes / 256 consumer arrivals), fenced for the
// async proxy, then a block-wide barrier.
// CHECK-LABEL: func.func @create_put_get_release
// CHECK-SAME: (%[[RING:.*]]: memref<3x1x64x64xbf16, #gpu.address_space<workgroup>>, %[[MAP:.*]]: !nvgpu.tensormap.descriptor{{.*}}, %[[I:.*]]: index, %[[ROW:.*]]: index)
// CHECK:      %[[FULL:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK:      %[[EMPTY:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
// CHECK:      %[[TID:.*]] = gpu.thread_id x
// CHECK:      %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %{{.*}}
// CHECK:      scf.if %[[FIRST]] {
// CHECK-COUNT-3: nvgpu.mbarrier.init %[[FULL]][%{{.*}}], %{{.*}}
// CHECK:        nvvm.fence.mbarrier.init
// CHECK:      }
// CHECK-NEXT: gpu.barrier
// The put: thread 0 of the warpgroup; from the second round (i >= 3) it waits
// for phase (i / 3 - 1) % 2 of the stage's empty barrier, then arms the full
// barrier with 8192 bytes and issues the TMA into ring[i % 3].
// CHECK:      %[[LANE:.*]] = arith.remui %{{.*}}, %c128
// CHECK:      scf.if %{{.*}} {
// CHECK:        %[[S:.*]] = arith.remui %[[I]], %c3
// CHECK:        %[[R:.*]] = arith.divui %[[I]], %c3
// CHECK:        %[[REUSE:.*]] = arith.cmpi uge, %[[I]], %c3
// CHECK:        scf.if %[[REUSE]] {
// CHECK:          %[[PREV:.*]] = arith.subi %[[R]], %c1
// CHECK:          %[[PB:.*]] = arith.remui %[[PREV]], %c2
// CHECK:          %[[PAR:.*]] = arith.index_cast %[[PB]] : index to i1
// CHECK:          nvgpu.mbarrier.try_wait.parity %[[EMPTY]][%[[S]]], %[[PAR]], %{{.*}}
// CHECK:        }
// CHECK:        %[[BYTES:.*]] = arith.constant 8192 : index
// CHECK:        nvgpu.mbarrier.arrive.expect_tx %[[FULL]][%[[S]]], %[[BYTES]]
// CHECK:        %[[DST:.*]] = memref.subview %[[RING]][%[[S]], 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1]
// CHECK:        nvgpu.tma.async.load %[[MAP]][%{{.*}}, %[[ROW]], %{{.*}}], %[[FULL]][%[[S]]] to %[[DST]]
// CHECK:      }
// The get: phase (i / 3) % 2 of the full barrier, then the stage's buffer.
// CHECK:      %[[GS:.*]] = arith.remui %[[I]], %c3
// CHECK:      %[[GR:.*]] = arith.divui %[[I]], %c3
// CHECK:      %[[GB:.*]] = arith.remui %[[GR]], %c2
// CHECK:      %[[GP:.*]] = arith.index_cast %[[GB]] : index to i1
// CHECK:      nvgpu.mbarrier.try_wait.parity %[[FULL]][%[[GS]]], %[[GP]], %{{.*}}
// CHECK:      %[[BUF:.*]] = memref.subview %[[RING]][%[[GS]], 0, 0, 0]
// CHECK:      memref.load %[[BUF]]
// The release: one arrival on the stage's empty barrier.
// CHECK:      %[[RS:.*]] = arith.remui %[[I]], %c3
// CHECK:      nvgpu.mbarrier.arrive %[[EMPTY]][%[[RS]]]
// CHECK-NOT:  fagpu.
func.func @create_put_get_release(%ring: !ring, %map: !map, %i: index, %row: index) -> bf16 {
  %c0 = arith.constant 0 : index
  %ch = fagpu.channel_create %ring arrivals 256 : !ring -> !fagpu.channel<3 x !box>
  fagpu.channel_put_tma %ch[%i], %map[%c0, %row, %c0] : !fagpu.channel<3 x !box>, !map
  %buf = fagpu.channel_get %ch[%i] : !fagpu.channel<3 x !box> -> !stage
  %e = memref.load %buf[%c0, %c0, %c0] : !stage
  fagpu.channel_release %ch[%i] : !fagpu.channel<3 x !box>
  return %e : bf16
}

// -----

// Two channels get their own barriers; f32 buffers count 4 bytes an element.
!a = memref<16x32xf32, #gpu.address_space<workgroup>>
!ringa = memref<2x16x32xf32, #gpu.address_space<workgroup>>
!mapa = !nvgpu.tensormap.descriptor<tensor = !a, swizzle = none, l2promo = none, oob = zero, interleave = none>
// CHECK-LABEL: func.func @two_channels
// CHECK-COUNT-2: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
// CHECK:         gpu.barrier
// CHECK-COUNT-2: nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
// CHECK:         gpu.barrier
// CHECK:         arith.constant 2048 : index
// CHECK:         nvgpu.tma.async.load
// CHECK:         arith.constant 2048 : index
// CHECK:         nvgpu.tma.async.load
func.func @two_channels(%r1: !ringa, %r2: !ringa, %map: !mapa, %i: index) {
  %c0 = arith.constant 0 : index
  %x = fagpu.channel_create %r1 arrivals 128 : !ringa -> !fagpu.channel<2 x !a>
  %y = fagpu.channel_create %r2 arrivals 128 : !ringa -> !fagpu.channel<2 x !a>
  fagpu.channel_put_tma %x[%i], %map[%c0, %i] : !fagpu.channel<2 x !a>, !mapa
  fagpu.channel_put_tma %y[%i], %map[%c0, %i] : !fagpu.channel<2 x !a>, !mapa
  return
}

// -----

// A buffer of two boxes (two 64-column panels): one transaction count for
// both (2 x 64 x 64 x 2 = 16384 bytes), one TMA per panel, the second 64
// columns further along the innermost coordinate.
!panel = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
!pbuf = memref<2x1x64x64xbf16, #gpu.address_space<workgroup>>
!pring = memref<2x2x1x64x64xbf16, #gpu.address_space<workgroup>>
!pmap = !nvgpu.tensormap.descriptor<tensor = !panel, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK-LABEL: func.func @panels
// CHECK-SAME: (%[[RING:.*]]: memref<2x2x1x64x64xbf16, #gpu.address_space<workgroup>>, %[[MAP:.*]]: !nvgpu.tensormap.descriptor{{.*}}, %[[I:.*]]: index, %[[D:.*]]: index)
// CHECK:      arith.constant 16384 : index
// CHECK:      nvgpu.mbarrier.arrive.expect_tx
// CHECK:      %[[STAGE:.*]] = memref.subview %[[RING]][%{{.*}}, 0, 0, 0, 0] [1, 2, 1, 64, 64] [1, 1, 1, 1, 1]
// CHECK:      %[[P0:.*]] = memref.subview %[[STAGE]][0, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1]
// CHECK:      %[[C0:.*]] = arith.addi %[[D]], %c0
// CHECK:      nvgpu.tma.async.load %[[MAP]][%[[C0]], %[[I]], %[[I]]], %{{.*}} to %[[P0]]
// CHECK:      %[[P1:.*]] = memref.subview %[[STAGE]][1, 0, 0, 0] [1, 1, 64, 64] [1, 1, 1, 1]
// CHECK:      %[[C64:.*]] = arith.addi %[[D]], %c64
// CHECK:      nvgpu.tma.async.load %[[MAP]][%[[C64]], %[[I]], %[[I]]], %{{.*}} to %[[P1]]
func.func @panels(%ring: !pring, %map: !pmap, %i: index, %d: index) {
  %ch = fagpu.channel_create %ring arrivals 128 : !pring -> !fagpu.channel<2 x !pbuf>
  fagpu.channel_put_tma %ch[%i], %map[%d, %i, %i] : !fagpu.channel<2 x !pbuf>, !pmap
  return
}

// -----

// A sequence of one box ([1 x box]: a D = 64 tile, one panel) is loaded
// through its leading slice, like the longer sequences.
!one = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>
!obuf = memref<1x1x1x64x64xbf16, #gpu.address_space<workgroup>>
!oring = memref<2x1x1x1x64x64xbf16, #gpu.address_space<workgroup>>
!omap = !nvgpu.tensormap.descriptor<tensor = !one, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK-LABEL: func.func @one_panel
// CHECK:      arith.constant 8192 : index
// CHECK:      %[[STAGE:.*]] = memref.subview %{{.*}}[%{{.*}}, 0, 0, 0, 0, 0] [1, 1, 1, 1, 64, 64]
// CHECK:      %[[P0:.*]] = memref.subview %[[STAGE]][0, 0, 0, 0, 0] [1, 1, 1, 64, 64]
// CHECK:      nvgpu.tma.async.load %{{.*}} to %[[P0]]
// CHECK-NOT:  nvgpu.tma.async.load
func.func @one_panel(%ring: !oring, %map: !omap, %i: index) {
  %ch = fagpu.channel_create %ring arrivals 128 : !oring -> !fagpu.channel<2 x !obuf>
  fagpu.channel_put_tma %ch[%i], %map[%i, %i, %i, %i] : !fagpu.channel<2 x !obuf>, !omap
  return
}

// -----

// Acquire: the put's wait alone (thread 0 of the warpgroup, from the second
// round on), so that the producer can write the item's side-band value (a
// tile index) before publishing it. Signal: thread 0 of the warpgroup
// completes the item with a plain arrival on its full barrier (no
// transaction bytes: an item without data).
!box = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
!ring = memref<2x1x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-LABEL: func.func @acquire_signal
// CHECK-SAME: (%[[RING:.*]]: memref<2x1x64x64xbf16, #gpu.address_space<workgroup>>, %[[I:.*]]: index, %[[SLOT:.*]]: memref<2xi32, #gpu.address_space<workgroup>>, %[[V:.*]]: i32)
// CHECK:      %[[FULL:.*]] = nvgpu.mbarrier.create
// CHECK:      %[[EMPTY:.*]] = nvgpu.mbarrier.create
// CHECK:      gpu.barrier
// CHECK:      arith.remui %{{.*}}, %c128
// CHECK:      scf.if %{{.*}} {
// CHECK:        %[[S:.*]] = arith.remui %[[I]], %c2
// CHECK:        %[[REUSE:.*]] = arith.cmpi uge, %[[I]], %c2
// CHECK:        scf.if %[[REUSE]] {
// CHECK:          nvgpu.mbarrier.try_wait.parity %[[EMPTY]][%[[S]]]
// CHECK:        }
// CHECK-NOT:    nvgpu.mbarrier.arrive
// CHECK:      }
// CHECK:      memref.store %[[V]], %[[SLOT]]
// CHECK:      arith.remui %{{.*}}, %c128
// CHECK:      scf.if %{{.*}} {
// CHECK:        %[[SS:.*]] = arith.remui %[[I]], %c2
// CHECK-NOT:    expect_tx
// CHECK:        nvgpu.mbarrier.arrive %[[FULL]][%[[SS]]]
// CHECK-NEXT: }
// CHECK-NOT:  fagpu.
func.func @acquire_signal(%ring: !ring, %i: index, %slot: memref<2xi32, #gpu.address_space<workgroup>>, %v: i32) {
  %c0 = arith.constant 0 : index
  %ch = fagpu.channel_create %ring arrivals 256 : !ring -> !fagpu.channel<2 x !box>
  fagpu.channel_acquire %ch[%i] : !fagpu.channel<2 x !box>
  memref.store %v, %slot[%c0] : memref<2xi32, #gpu.address_space<workgroup>>
  fagpu.channel_signal %ch[%i] : !fagpu.channel<2 x !box>
  return
}
