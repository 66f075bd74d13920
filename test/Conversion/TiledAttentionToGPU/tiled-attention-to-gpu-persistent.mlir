// RUN: fa-opt %s --fa-tile-attention --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu | FileCheck %s
// RUN: not fa-opt %s --fa-tile-attention --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="intra-warpgroup-overlap=false" 2>&1 | FileCheck %s --check-prefix=SERIAL

// SERIAL: error: fa-convert-tiled-attention-to-gpu: the persistent tile scheduler needs the overlapped warp-specialized schedule (intra-warpgroup-overlap)

// The persistent tile scheduler (tile_scheduler = persistent, on the
// warp-specialized kernel): the grid is min(tiles, SMS) blocks on x, the
// host's fagpu.host_multiprocessor_count (the manifest's SMS, bound by the
// runtime). Both roles loop over rounds of gridDim.x tiles, block b taking
// the b-th tile of even rounds and the b-th from the end of odd ones (a
// snake: long and short causal tiles pair up), carrying the channel item of
// the tile's first key block and the tile count. Q comes through a third,
// two-stage channel (tensor map of block-q-row boxes): the producer loads
// the next tile's Q and K/V while the consumers finish this one, and the
// consumers release Q after their epilogue. The producer gets 40 registers
// (the consumers 232 of the 504 per warpgroup a 384-thread block is
// launched with). The first ping-pong turn is given once, before the loop.
// O leaves through a staging tile after the K/V rings and one TMA store
// per warpgroup and 64-column panel (boxes of 64 rows): each warpgroup
// waits for its last store to have read the tile, writes its rows
// (128-byte swizzle), fences them for the async proxy, and its first thread
// stores and commits; the block waits for its last stores before it exits.

!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @causal_persistent
// CHECK:       %[[SMS:.*]] = fagpu.host_multiprocessor_count
// CHECK:       %[[GRID:.*]] = arith.minui %{{.*}}, %[[SMS]] : index
// CHECK:       fagpu.host_tensor_map %arg1
// CHECK:       fagpu.host_tensor_map %arg2
// CHECK:       fagpu.host_tensor_map %arg0 as !nvgpu.tensormap.descriptor<tensor = memref<1x1x128x64xbf16
// CHECK:       fagpu.host_tensor_map %arg3 as !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16
// CHECK:       gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %[[GRID]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c384
// CHECK:         fagpu.channel_create
// CHECK:         fagpu.channel_create
// CHECK:         %[[QC:.*]] = fagpu.channel_create %{{.*}} arrivals 256 : memref<2x1x1x1x128x64xbf16
// CHECK:         fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232) producer {
// CHECK:           %[[ROUNDS:.*]] = arith.ceildivui %{{.*}}, %[[GX]] : index
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[ROUNDS]] step %{{.*}} iter_args(%[[PBASE:.*]] = %{{.*}}, %[[PTILE:.*]] = %{{.*}}) -> (index, index) {
// CHECK:             arith.select %{{.*}}, %{{.*}}, %[[BX]] : index
// CHECK:             scf.if %{{.*}} -> (index, index) {
// CHECK:               fagpu.channel_put_tma %[[QC]][%[[PTILE]]]
// CHECK:               scf.for %[[I:.*]] = %c0{{.*}} to %{{.*}} step
// CHECK:                 %[[IT:.*]] = arith.addi %[[PBASE]], %[[I]]
// CHECK:                 fagpu.channel_put_tma %{{.*}}[%[[IT]]]
// CHECK:                 fagpu.channel_put_tma %{{.*}}[%[[IT]]]
// CHECK:               scf.yield %{{.*}}, %{{.*}} : index, index
// CHECK:             } else {
// CHECK:               scf.yield %[[PBASE]], %[[PTILE]] : index, index
// CHECK:         } consumers {
// CHECK:           nvvm.barrier.arrive
// CHECK:           scf.for %{{.*}} iter_args(%[[BASE:.*]] = %{{.*}}, %[[TILE:.*]] = %{{.*}}) -> (index, index) {
// CHECK:             scf.if %{{.*}} -> (index, index) {
// CHECK-NOT:           nvgpu.device_async_copy
// CHECK:               fagpu.channel_get %[[QC]][%[[TILE]]]
// CHECK:               scf.if
// CHECK:                 fagpu.channel_get %{{.*}}[%[[BASE]]]
// CHECK:               nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:               nvvm.barrier id
// CHECK:               vector.store %{{.*}} : memref<8192xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK:               nvvm.fence.proxy
// CHECK:               nvvm.barrier id
// CHECK:               nvgpu.tma.async.store
// CHECK:               nvvm.cp.async.bulk.commit.group
// CHECK:               fagpu.channel_release %[[QC]][%[[TILE]]]
// CHECK:           nvvm.cp.async.bulk.wait_group 0 {read}
func.func @causal_persistent(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>} : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
