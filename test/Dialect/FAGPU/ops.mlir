// RUN: fa-opt %s -split-input-file | FileCheck %s
// RUN: fa-opt %s -split-input-file -mlir-print-op-generic | fa-opt -split-input-file | FileCheck %s

// Round trip of the fagpu ops and the channel type.

!box = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>
!ring = memref<2x1x1x64x64xbf16, #gpu.address_space<workgroup>>
!stage = memref<1x1x64x64xbf16, strided<[4096, 4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>

// CHECK-LABEL: gpu.func @roles
// CHECK: %[[CH:.*]] = fagpu.channel_create %{{.*}} arrivals 128 : memref<2x1x1x64x64xbf16, #gpu.address_space<workgroup>> -> !fagpu.channel<2 x memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>>
// CHECK: fagpu.warp_specialize consumer_warpgroups 1 registers(24, 240) producer {
// CHECK:   fagpu.channel_put_tma %[[CH]][%{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : !fagpu.channel<2 x memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>>, !nvgpu.tensormap.descriptor
// CHECK: } consumers {
// CHECK:   %{{.*}} = fagpu.channel_get %[[CH]][%{{.*}}] : !fagpu.channel<2 x memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>> -> memref<1x1x64x64xbf16, strided<[4096, 4096, 64, 1], offset: ?>, #gpu.address_space<workgroup>>
// CHECK:   fagpu.channel_release %[[CH]][%{{.*}}] : !fagpu.channel
gpu.module @m {
  gpu.func @roles(%p: !llvm.ptr, %i: index) workgroup(%ring: !ring) kernel
      attributes {known_block_size = array<i32: 256, 1, 1>} {
    %map = faptx.tensormap_param %p : !llvm.ptr -> !map
    %ch = fagpu.channel_create %ring arrivals 128 : !ring -> !fagpu.channel<2 x !box>
    fagpu.warp_specialize consumer_warpgroups 1 registers(24, 240)
    producer {
      fagpu.channel_put_tma %ch[%i], %map[%i, %i, %i, %i] : !fagpu.channel<2 x !box>, !map
      fagpu.yield
    } consumers {
      %buf = fagpu.channel_get %ch[%i] : !fagpu.channel<2 x !box> -> !stage
      fagpu.channel_release %ch[%i] : !fagpu.channel<2 x !box>
      fagpu.yield
    }
    gpu.return
  }
}
