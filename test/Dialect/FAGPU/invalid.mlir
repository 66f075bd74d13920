// RUN: fa-opt %s -split-input-file -verify-diagnostics

// One case per verifier error of the fagpu ops and type (lib/Dialect/FAGPU/IR).

// expected-error @+1 {{a channel has at least one stage, not 0}}
func.func private @stages() -> !fagpu.channel<0 x memref<64xbf16, #gpu.address_space<workgroup>>>

// -----

// expected-error @+1 {{a channel buffer has a static shape and the identity layout, not 'memref<?xbf16, #gpu.address_space<workgroup>>'}}
func.func private @dynamic() -> !fagpu.channel<2 x memref<?xbf16, #gpu.address_space<workgroup>>>

// -----

// expected-error @+1 {{a channel buffer lives in workgroup (shared) memory, not 'memref<64xbf16>'}}
func.func private @global() -> !fagpu.channel<2 x memref<64xbf16>>

// -----

func.func @ring_shape(%ring: memref<3x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{the ring must be 2 contiguous buffers of 'memref<64xbf16, #gpu.address_space<workgroup>>', not 'memref<3x64xbf16, #gpu.address_space<workgroup>>'}}
  %ch = fagpu.channel_create %ring arrivals 128 : memref<3x64xbf16, #gpu.address_space<workgroup>> -> !fagpu.channel<2 x memref<64xbf16, #gpu.address_space<workgroup>>>
  return
}

// -----

func.func @nested(%ring: memref<2x64xbf16, #gpu.address_space<workgroup>>, %c: i1) {
  scf.if %c {
    // expected-error @+1 {{must be in the kernel's entry block (its lowering synchronizes the whole thread block)}}
    %ch = fagpu.channel_create %ring arrivals 128 : memref<2x64xbf16, #gpu.address_space<workgroup>> -> !fagpu.channel<2 x memref<64xbf16, #gpu.address_space<workgroup>>>
  }
  return
}

// -----

func.func @arrivals(%ring: memref<2x64xbf16, #gpu.address_space<workgroup>>) {
  // expected-error @+1 {{attribute 'arrivals' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %ch = fagpu.channel_create %ring arrivals 0 : memref<2x64xbf16, #gpu.address_space<workgroup>> -> !fagpu.channel<2 x memref<64xbf16, #gpu.address_space<workgroup>>>
  return
}

// -----

!box = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = memref<1x64x32xbf16, #gpu.address_space<workgroup>>, swizzle = none, l2promo = none, oob = zero, interleave = none>
func.func @put_box(%ch: !fagpu.channel<2 x !box>, %map: !map, %i: index) {
  // expected-error @+1 {{the channel's buffer 'memref<1x64x64xbf16, #gpu.address_space<workgroup>>' must be the tensor map's box 'memref<1x64x32xbf16, #gpu.address_space<workgroup>>' or a sequence of them along a leading dimension}}
  fagpu.channel_put_tma %ch[%i], %map[%i, %i, %i] : !fagpu.channel<2 x !box>, !map
  return
}

// -----

!box = memref<1x64x64xbf16, #gpu.address_space<workgroup>>
!map = !nvgpu.tensormap.descriptor<tensor = !box, swizzle = none, l2promo = none, oob = zero, interleave = none>
func.func @put_coords(%ch: !fagpu.channel<2 x !box>, %map: !map, %i: index) {
  // expected-error @+1 {{takes one coordinate per box dimension (3), not 2}}
  fagpu.channel_put_tma %ch[%i], %map[%i, %i] : !fagpu.channel<2 x !box>, !map
  return
}

// -----

!box = memref<64x64xbf16, #gpu.address_space<workgroup>>
func.func @get_type(%ch: !fagpu.channel<2 x !box>, %i: index) {
  // expected-error @+1 {{returns the stage buffer type 'memref<64x64xbf16, strided<[64, 1], offset: ?>, #gpu.address_space<workgroup>>', not 'memref<64x64xbf16, #gpu.address_space<workgroup>>'}}
  %b = fagpu.channel_get %ch[%i] : !fagpu.channel<2 x !box> -> !box
  return
}

// -----

func.func @registers() {
  // expected-error @+1 {{setmaxnreg takes a multiple of 8 from 24 to 256 registers, not 20}}
  fagpu.warp_specialize consumer_warpgroups 2 registers(20, 232) producer {
    fagpu.yield
  } consumers {
    fagpu.yield
  }
  return
}

// -----

func.func @register_file() {
  // expected-error @+1 {{the roles would hold 69632 registers, more than the 65536 of a multiprocessor}}
  fagpu.warp_specialize consumer_warpgroups 2 registers(48, 248) producer {
    fagpu.yield
  } consumers {
    fagpu.yield
  }
  return
}

// -----

gpu.module @m {
  gpu.func @block() kernel attributes {known_block_size = array<i32: 256, 1, 1>} {
    // expected-error @+1 {{needs the kernel's known_block_size to be [384, 1, 1] (one producer and 2 consumer warpgroups)}}
    fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232) producer {
      fagpu.yield
    } consumers {
      fagpu.yield
    }
    gpu.return
  }
}
