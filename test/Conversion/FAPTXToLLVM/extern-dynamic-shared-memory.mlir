// RUN: fa-opt %s --split-input-file --fa-extern-dynamic-shared-memory | FileCheck %s

// The zero-length shared global of gpu.dynamic_shared_memory becomes
// external (printed `.extern .shared ... []`, after all static shared
// memory); static shared variables and other address spaces stay.

// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.mlir.global internal @__mbarrier() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<2 x i64>
// CHECK: llvm.mlir.global internal @zero_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
gpu.module @kernels {
  llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.mlir.global internal @__mbarrier() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<2 x i64>
  llvm.mlir.global internal @zero_global() {addr_space = 1 : i32} : !llvm.array<0 x i8>
}
