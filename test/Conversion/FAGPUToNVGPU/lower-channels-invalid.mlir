// RUN: fa-opt %s -split-input-file -allow-unregistered-dialect -fa-lower-channels -verify-diagnostics

!box = memref<64xbf16, #gpu.address_space<workgroup>>
!ring = memref<2x64xbf16, #gpu.address_space<workgroup>>
func.func @foreign_user(%ring: !ring) {
  %ch = fagpu.channel_create %ring arrivals 128 : !ring -> !fagpu.channel<2 x !box>
  // expected-error @+1 {{'test.use' op uses a channel; fa-lower-channels lowers only fagpu channel ops}}
  "test.use"(%ch) : (!fagpu.channel<2 x !box>) -> ()
  return
}
