// RUN: fa-opt %s --split-input-file --fa-tile-attention --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu -verify-diagnostics | FileCheck %s

// The dynamic tile scheduler (tile_scheduler = dynamic): the persistent
// warp-specialized kernel (min(tiles, SMS) blocks, Q through a two-stage
// channel, TMA-store epilogue) whose blocks take their tiles from an atomic
// counter. The host allocates the counter as a one-word workspace the
// launcher zeroes (fa.workspace "tile_counter", fa.workspace_zeroed). One
// producer thread loops while its tile is in range: block b's first tile is
// b, each next one the counter's old value plus gridDim.x (taken at the
// start of the tile, so the atomic's latency passes under its puts). Before
// each tile's Q it waits for the Q buffer to be free (channel_acquire) and
// writes the tile index into the buffer's slot after O's staging tile (Q's
// full barrier publishes it); past the last tile it writes the end marker
// into the next slot and completes that Q item without data
// (channel_signal). The consumers take each Q item in the loop's test, read
// its slot, and stop at the end marker.

!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @causal_dynamic
// CHECK:       %[[SMS:.*]] = fagpu.host_multiprocessor_count
// CHECK:       %[[GRID:.*]] = arith.minui %{{.*}}, %[[SMS]] : index
// CHECK:       %[[CTR:.*]] = memref.alloc() {fa.workspace = "tile_counter", fa.workspace_zeroed} : memref<1xi32>
// CHECK:       gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %[[GRID]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c384
// CHECK-SAME:    dynamic_shared_memory_size %c115728_i32
// CHECK:         fagpu.channel_create
// CHECK:         fagpu.channel_create
// CHECK:         %[[QC:.*]] = fagpu.channel_create %{{.*}} arrivals 256 : memref<2x1x1x1x128x64xbf16
// CHECK:         %[[SLOTS:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xi32, #gpu.address_space<workgroup>>
// CHECK:         fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232) producer {
// CHECK:           scf.if %{{.*}} {
// CHECK:             arith.muli
// CHECK-NEXT:        %[[TILES:.*]] = arith.muli
// CHECK:             %[[END:.*]]:3 = scf.while (%[[T:.*]] = %[[BX]], %{{.*}} = %c0{{.*}}, %{{.*}} = %c0{{.*}}) : (index, index, index) -> (index, index, index) {
// CHECK:               %[[IN:.*]] = arith.cmpi slt, %[[T]], %[[TILES]] : index
// CHECK:               scf.condition(%[[IN]])
// CHECK:             } do {
// CHECK:             ^bb0(%[[PT:.*]]: index, %[[PBASE:.*]]: index, %[[PTILE:.*]]: index):
// CHECK:               %[[OLD:.*]] = memref.atomic_rmw addi %{{.*}}, %[[CTR]][%{{.*}}] : (i32, memref<1xi32>) -> i32
// CHECK:               %[[OLDX:.*]] = arith.index_castui %[[OLD]] : i32 to index
// CHECK:               %[[NEXT:.*]] = arith.addi %[[OLDX]], %[[GX]] : index
// CHECK:               fagpu.channel_acquire %[[QC]][%[[PTILE]]]
// CHECK:               %[[PT32:.*]] = arith.index_cast %[[PT]] : index to i32
// CHECK:               memref.store %[[PT32]], %[[SLOTS]][%{{.*}}]
// CHECK:               fagpu.channel_put_tma %[[QC]][%[[PTILE]]]
// CHECK:               scf.for %[[I:.*]] = %c0{{.*}} to %{{.*}} step
// CHECK:                 %[[IT:.*]] = arith.addi %[[PBASE]], %[[I]]
// CHECK:                 fagpu.channel_put_tma %{{.*}}[%[[IT]]]
// CHECK:                 fagpu.channel_put_tma %{{.*}}[%[[IT]]]
// CHECK:               scf.yield %[[NEXT]], %{{.*}}, %{{.*}} : index, index, index
// CHECK:             fagpu.channel_acquire %[[QC]][%[[END]]#2]
// CHECK:             memref.store %{{.*}}, %[[SLOTS]][%{{.*}}]
// CHECK:             fagpu.channel_signal %[[QC]][%[[END]]#2]
// CHECK:         } consumers {
// CHECK:           nvvm.barrier.arrive
// CHECK:           scf.while (%{{.*}} = %c0{{.*}}, %[[CTILE:.*]] = %c0{{.*}}) : (index, index) -> (index, index, index) {
// CHECK:             fagpu.channel_get %[[QC]][%[[CTILE]]]
// CHECK:             %[[SLOT:.*]] = memref.load %[[SLOTS]][%{{.*}}] : memref<2xi32, #gpu.address_space<workgroup>>
// CHECK:             %[[CT:.*]] = arith.index_castui %[[SLOT]] : i32 to index
// CHECK:             %[[MORE:.*]] = arith.cmpi slt, %[[CT]], %{{.*}} : index
// CHECK:             scf.condition(%[[MORE]])
// CHECK:           } do {
// CHECK:           ^bb0(%[[BASE:.*]]: index, %[[TILE:.*]]: index, %{{.*}}: index):
// CHECK-NOT:         fagpu.channel_get %[[QC]]
// CHECK:             scf.if
// CHECK:               fagpu.channel_get %{{.*}}[%[[BASE]]]
// CHECK:             nvgpu.tma.async.store
// CHECK:             fagpu.channel_release %[[QC]][%[[TILE]]]
// CHECK:           nvvm.cp.async.bulk.wait_group 0 {read}
func.func @causal_dynamic(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = dynamic>} : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}

// -----

// Only the warp-specialized kernel loops over tiles.

!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

func.func @dynamic_needs_warp_specialized(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  // expected-error @below {{the dynamic tile scheduler needs the warp_specialized schedule}}
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, tile_scheduler = dynamic>} : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
