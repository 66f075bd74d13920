// RUN: fa-opt %s --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=4 wgmma=true warp-specialize=true intra-warpgroup-overlap=false" | FileCheck %s
// RUN: fa-opt %s --fa-tile-attention="block-q=128 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=8 wgmma=true warp-specialize=true" | FileCheck %s --check-prefix=OVL

// The warp-specialized forward (docs/HOPPER.md): the host makes TMA tensor
// maps of K and V (one 64 x 64 panel per box, 128-byte swizzle), the launch
// gets a producer warpgroup (128 threads more), the producer puts K and V
// of every key block into two 2-stage channels, and the consumers get /
// release them around the two GEMMs; Q still comes by cp.async, followed by
// the consumers' named barrier (id 1).

// Serial schedule (intra-warpgroup-overlap=false), one consumer warpgroup:
// each key block is S, softmax, P V, each GEMM waited for.

// CHECK-LABEL: func.func @causal_bf16_d64
// CHECK:       %[[KH:.*]] = fagpu.host_tensor_map %{{.*}} as !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = l2promo_128b, oob = zero, interleave = none>
// CHECK:       %[[VH:.*]] = fagpu.host_tensor_map
// CHECK:       gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c256
// CHECK:         %[[KM:.*]] = faptx.tensormap_param %[[KH]]
// CHECK:         %[[KC:.*]] = fagpu.channel_create %{{.*}} arrivals 128 : memref<2x1x1x1x64x64xbf16, #gpu.address_space<workgroup>> -> !fagpu.channel<2 x memref<1x1x1x64x64xbf16, #gpu.address_space<workgroup>>>
// CHECK:         %[[VM:.*]] = faptx.tensormap_param %[[VH]]
// CHECK:         %[[VC:.*]] = fagpu.channel_create
// CHECK:         fagpu.warp_specialize consumer_warpgroups 1 registers(24, 240) producer {
// CHECK:           scf.for %[[I:.*]] =
// CHECK:             %[[IT:.*]] = arith.addi %{{.*}}, %[[I]] : index
// CHECK:             fagpu.channel_put_tma %[[KC]][%[[IT]]], %[[KM]]
// CHECK:             fagpu.channel_put_tma %[[VC]][%[[IT]]], %[[VM]]
// CHECK:         } consumers {
// CHECK:           nvgpu.device_async_copy
// CHECK:           nvvm.fence.proxy
// CHECK:           nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK-NOT:       nvvm.barrier.arrive
// CHECK:           scf.for
// CHECK:             fagpu.channel_get %[[KC]]
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             fagpu.channel_release %[[KC]]
// CHECK:             faptx.ex2
// CHECK:             fagpu.channel_get %[[VC]]
// CHECK:             faptx.wgmma_mma_rs
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             fagpu.channel_release %[[VC]]
// CHECK-NOT:         gpu.barrier
// CHECK:             scf.yield

// The default schedule with two consumer warpgroups: a prologue (if any key
// block is visible) computes P of the first block; each iteration issues
// S(j) = Q K(j)^T and O += P(j-1) V(j-1) back to back in its warpgroup's
// turn (bar.sync on its barrier, bar.arrive on the next warpgroup's; the
// first warpgroup starts with the turn), waits for S only (wait_group 1),
// runs the softmax of S(j) while P V runs, then waits for P V; an epilogue
// adds the last block's P V.
// Each warpgroup computes only the key blocks its 64 rows can see (its last
// row's causal edge; none for rows past Nq), a count in i32 broadcast from
// lane 0: the prologue and epilogue test it, the key loops stop at it, and
// a drain loop takes and releases the tile's remaining blocks (the other
// warpgroups need them), passing the turn on as the loops would.

// OVL-LABEL: func.func @causal_bf16_d64
// OVL:         %[[KC:.*]] = fagpu.channel_create %{{.*}} arrivals 256
// OVL:         %[[VC:.*]] = fagpu.channel_create %{{.*}} arrivals 256
// OVL:         fagpu.warp_specialize consumer_warpgroups 2 registers(24, 240) producer {
// OVL:         } consumers {
// OVL:           nvvm.barrier id = %{{.*}} number_of_threads = %c256
// OVL:           scf.if
// OVL:             nvvm.barrier.arrive id = %{{.*}} number_of_threads = %{{.*}}
// OVL:           %[[CEIL:.*]] = arith.ceildivsi %{{.*}}, %c64{{.*}} : i32
// OVL:           %[[COUNT:.*]] = arith.select %{{.*}}, %{{.*}}, %c0{{.*}} : i32
// OVL:           %[[MINE:.*]], %{{.*}} = gpu.shuffle  idx %[[COUNT]], %c0{{.*}}, %c32{{.*}} : i32
// OVL-NEXT:      %[[BLOCKS:.*]] = arith.index_cast %[[MINE]] : i32 to index
// OVL:           %[[HIW:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// OVL:           %[[ANY:.*]] = arith.cmpi slt, %c0{{.*}}, %[[BLOCKS]] : index
// OVL:           scf.if %[[ANY]]
// OVL:             fagpu.channel_get %[[KC]][%{{.*}}]
// OVL:             nvvm.wgmma.mma_async
// OVL:             nvvm.wgmma.wait.group.sync.aligned 0
// OVL:             fagpu.channel_release %[[KC]]
// OVL:             faptx.ex2
// OVL-NOT:         faptx.wgmma_mma_rs
// OVL:             scf.yield
// OVL:           scf.for
// OVL:             fagpu.channel_get %[[KC]][%[[IT:[0-9a-z_]+]]]
// OVL:             nvvm.barrier id = %{{.*}} number_of_threads = %[[TURN:.*]]
// OVL:             nvvm.wgmma.mma_async
// OVL:             fagpu.channel_get %[[VC]][%[[PREV:[0-9a-z_]+]]]
// OVL:             faptx.wgmma_mma_rs
// OVL:             nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[TURN]]
// OVL:             nvvm.wgmma.wait.group.sync.aligned 1
// OVL:             fagpu.channel_release %[[KC]][%[[IT]]]
// OVL:             faptx.ex2
// OVL:             nvvm.wgmma.wait.group.sync.aligned 0
// OVL:             fagpu.channel_release %[[VC]][%[[PREV]]]
// OVL:             scf.yield
// (The count cast again after the loops, from the same i32.)
// OVL:           %[[BLOCKS2:.*]] = arith.index_cast %[[MINE]] : i32 to index
// OVL:           %[[ANY2:.*]] = arith.cmpi slt, %c0{{.*}}, %[[BLOCKS2]] : index
// OVL:           scf.if %[[ANY2]]
// OVL:             fagpu.channel_get %[[VC]]
// OVL:             faptx.wgmma_mma_rs
// OVL:             nvvm.wgmma.wait.group.sync.aligned 0
// OVL:             fagpu.channel_release %[[VC]]
// OVL:           scf.for %[[D:.*]] = %[[BLOCKS2]] to %{{.*}} step %c1
// OVL:             fagpu.channel_get %[[KC]]
// OVL:             %[[LATER:.*]] = arith.cmpi slt, %c0{{.*}}, %[[D]] : index
// OVL-NEXT:        scf.if %[[LATER]] {
// OVL:               nvvm.barrier id = %{{.*}} number_of_threads = %[[TURN]]
// OVL:               nvvm.barrier.arrive id = %{{.*}} number_of_threads = %[[TURN]]
// OVL:             fagpu.channel_release %[[KC]]
// OVL-NEXT:        fagpu.channel_get %[[VC]]
// OVL-NEXT:        fagpu.channel_release %[[VC]]

// Causal bf16, D = 64, Bc = 64: the full blocks and the diagonal ones (two
// key loops) share the one pipeline of items.

!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

func.func @causal_bf16_d64(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}

