// RUN: fa-opt %s --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=4 wgmma=true warp-specialize=true" | FileCheck %s

// The warp-specialized forward (experimental; docs/HOPPER.md): the host
// makes TMA tensor maps of K and V (one 64 x 64 panel per box, 128-byte
// swizzle), the launch gets a producer warpgroup (128 + 128 threads), the
// producer puts K and V of every key block into two 2-stage channels, and
// the consumers get / release them around the two GEMMs; Q still comes by
// cp.async, followed by the consumers' named barrier.

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
// CHECK:             fagpu.channel_put_tma %[[KC]][%[[I]]], %[[KM]]
// CHECK:             fagpu.channel_put_tma %[[VC]][%[[I]]], %[[VM]]
// CHECK:         } consumers {
// CHECK:           nvgpu.device_async_copy
// CHECK:           nvvm.fence.proxy
// CHECK:           nvvm.barrier id = %{{.*}} number_of_threads = %{{.*}}
// CHECK:           scf.for
// CHECK:             fagpu.channel_get %[[KC]]
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             fagpu.channel_release %[[KC]]
// CHECK:             fagpu.channel_get %[[VC]]
// CHECK:             faptx.wgmma_mma_rs
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             fagpu.channel_release %[[VC]]
// CHECK-NOT:         gpu.barrier
// CHECK:             scf.yield

// The Hopper forward: both GEMMs are warpgroup MMAs (sm_90a), so neither
// ldmatrix nor mma.sync may appear anywhere (implicit-check-not above).
// Br = 64 = 16 * 4 warps: one warpgroup owning all 64 query rows.

// Causal bf16, D = 64, Bc = 64. The tiles are 128-byte swizzled panels of
// 64 columns (no padding) from the first 1024-byte boundary of the dynamic
// shared memory: Q 64x64 | K 2x64x64 | V 2x64x64 bf16 = 40 KiB, plus 1 KiB
// of slack for the alignment.

!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// The padding up to the next 1024-byte boundary: (1024 - ptr % 1024) % 1024.
// Panel tiles: flat views of rows x 64 elements, every offset past the pad.
// Matrix descriptors: (address >> 4) | 128-byte swizzle (bit 62) | stride
// byte offset 1024 (8-row groups) | leading byte offset 16 for the K-major
// Q and K, 16 KiB (the V panel stride) for the MN-major V.
// Prologue: cp.async of Q, then of the first K/V block.
// Fully visible key blocks. The K and V descriptors move to this block's
// buffer; cp.async writes through the generic proxy, so a proxy fence
// precedes the barrier that publishes the block to the wgmma (async proxy).
// Prefetch of the next block into the other buffer.
// S = Q K^T: one chain of D / 16 = 4 k-steps, both operands from shared
// memory; the first step overwrites the accumulator (<zero>), the others
// add to it (<one>). One commit, then wait for it.
// The results go through operand fences so that no read moves above the wait.
// No mask on these blocks.
// P stays in registers: packed bf16x2 words in the A-fragment layout.
// O += P V: Bc / 16 = 4 register-A wgmma (faptx: MLIR's op takes A only
// from shared memory) of 16 keys each, accumulating into the 32 O registers
// with P's four packed registers and the V descriptor.
// Diagonal blocks: the same step, with the causal compares between the S
// chain and the softmax.
// The epilogue is the mma.sync one: the O accumulators are laid out as C
// fragments.
func.func @causal_bf16_d64(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}

