// RUN: fa-opt %s -split-input-file -allow-unregistered-dialect -fa-lower-warp-specialize | FileCheck %s

// Warpgroup 0 runs the producer with 40 registers, the others the consumers
// with 232; the roles' ops move into the two branches unchanged.
// CHECK-LABEL: gpu.func @roles
// CHECK:       %[[TID:.*]] = gpu.thread_id x
// CHECK:       %[[WG:.*]] = arith.divui %[[TID]], %{{.*}} : index
// CHECK:       %[[P:.*]] = arith.cmpi eq, %[[WG]], %{{.*}} : index
// CHECK:       scf.if %[[P]] {
// CHECK-NEXT:    nvvm.setmaxregister decrease 40
// CHECK-NEXT:    "test.produce"() : () -> ()
// CHECK-NEXT:  } else {
// CHECK-NEXT:    nvvm.setmaxregister increase 232
// CHECK-NEXT:    "test.consume"() : () -> ()
// CHECK-NEXT:  }
// CHECK-NEXT:  gpu.return
// CHECK-NOT:   fagpu.
gpu.module @m {
  gpu.func @roles() kernel attributes {known_block_size = array<i32: 384, 1, 1>} {
    fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232) producer {
      "test.produce"() : () -> ()
    } consumers {
      "test.consume"() : () -> ()
    }
    gpu.return
  }
}
