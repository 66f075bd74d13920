// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=128 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=8 wgmma=true warp-specialize=true" | FileCheck %s --check-prefix=WS
// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a" --fa-tile-attention --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu | FileCheck %s --check-prefix=DYN

// Warp-specialized: rank-3 TMA boxes [1, Bc, 64] of the packed K and V; the
// producer's coordinates are (column 0, the sequence's first key row + the
// block's start, the key head).
// WS-LABEL: func.func @varlen_causal
// WS-SAME:    %[[CUK:[a-zA-Z0-9]+]]: memref<?xi32>, %{{[a-zA-Z0-9]+}}: index
// WS:         fagpu.host_tensor_map %{{.*}} as !nvgpu.tensormap.descriptor<tensor = memref<1x64x64xf16, #gpu.address_space<workgroup>>, {{.*}}> : memref<2x?x64xf16, {{.*}}>
// WS:         %[[KB0:.*]] = memref.load %[[CUK]][%{{.*}}] : memref<?xi32>
// WS:         %[[KBASE:.*]] = arith.index_cast %[[KB0]] : i32 to index
// WS:         fagpu.warp_specialize
// WS:           scf.for
// WS:             %[[ROW:.*]] = arith.addi %[[KBASE]], %{{.*}} : index
// WS:             fagpu.channel_put_tma %{{.*}}[%{{.*}}], %{{.*}}[%{{.*}}, %[[ROW]], %{{.*}}] : !fagpu.channel<2 x memref<1x1x64x64xf16, #gpu.address_space<workgroup>>>, !nvgpu.tensormap.descriptor<tensor = memref<1x64x64xf16

func.func @varlen_causal(%q: memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>, %k: memref<2x?x64xf16, strided<[?, ?, 1], offset: ?>>, %v: memref<2x?x64xf16, strided<[?, ?, 1], offset: ?>>, %out: memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>, %lse: memref<4x?xf32, strided<[?, ?], offset: ?>>, %cu_q: memref<?xi32>, %cu_k: memref<?xi32>, %max_q: index) {
  %qt = bufferization.to_tensor %q restrict : memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>> to tensor<4x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x?x64xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x?x64xf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x64xf16>
  %cq = bufferization.to_tensor %cu_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_k restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_varlen %qt, %kt, %vt seqlens(%cq, %ck) max_seqlen_q(%max_q) mask<causal> : (tensor<4x?x64xf16>, tensor<2x?x64xf16>, tensor<2x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index) -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<4x?x64xf16>, memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<4x?xf32>, memref<4x?xf32, strided<[?, ?], offset: ?>>) -> ()
  return
}

// -----

// The default for packed sequences on sm_90a: the dynamic tile scheduler
// (an atomic tile counter). Q comes through its rank-3 TMA box too (rows of
// the next sequence are computed, not stored). O is staged in shared
// memory; a warpgroup whose 64 rows all lie in the sequence stores them as
// rank-3 TMA boxes [1, 64, 64], one with rows past the sequence's end
// (a box would write the next sequence's rows) copies its valid rows out,
// 16 bytes per thread.
// DYN-LABEL: func.func @varlen_dynamic
// DYN:         memref.alloc() {fa.workspace = "tile_counter", fa.workspace_zeroed} : memref<1xi32>
// DYN:         fagpu.host_tensor_map %arg1 as !nvgpu.tensormap.descriptor<tensor = memref<1x128x64xbf16
// DYN:         fagpu.host_tensor_map %arg2 as
// DYN:         fagpu.host_tensor_map %arg0 as !nvgpu.tensormap.descriptor<tensor = memref<1x128x64xbf16
// DYN:         fagpu.host_tensor_map %arg3 as !nvgpu.tensormap.descriptor<tensor = memref<1x64x64xbf16
// DYN:         memref.atomic_rmw addi
// DYN:         vector.store %{{.*}}, %[[STAGE:.*]][%{{.*}}] : memref<16384xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// DYN:         %[[FULL:.*]] = arith.cmpi sge, %[[ROWS:.*]], %{{.*}} : index
// DYN:         scf.if %[[FULL]] {
// DYN:           nvgpu.tma.async.store %{{.*}} to %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<1x64x64xbf16, #gpu.address_space<workgroup>>
// DYN:           nvgpu.tma.async.store
// DYN:           nvvm.cp.async.bulk.commit.group
// DYN:         } else {
// DYN:           scf.for %{{.*}} = %{{.*}} to %c1024{{.*}} step %c128
// DYN:             %[[IN:.*]] = arith.cmpi slt, %{{.*}}, %[[ROWS]] : index
// DYN:             scf.if %[[IN]] {
// DYN:               %[[CHUNK:.*]] = vector.load %[[STAGE]][%{{.*}}] {alignment = 16 : i64} : memref<16384xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// DYN:               vector.store %[[CHUNK]], %arg3[%{{.*}}, %{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<4x?x128xbf16, {{.*}}>, vector<8xbf16>
func.func @varlen_dynamic(%q: memref<4x?x128xbf16, strided<[?, ?, 1], offset: ?>>, %k: memref<2x?x128xbf16, strided<[?, ?, 1], offset: ?>>, %v: memref<2x?x128xbf16, strided<[?, ?, 1], offset: ?>>, %out: memref<4x?x128xbf16, strided<[?, ?, 1], offset: ?>>, %lse: memref<4x?xf32, strided<[?, ?], offset: ?>>, %cu_q: memref<?xi32>, %cu_k: memref<?xi32>, %max_q: index) {
  %qt = bufferization.to_tensor %q restrict : memref<4x?x128xbf16, strided<[?, ?, 1], offset: ?>> to tensor<4x?x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x?x128xbf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x?x128xbf16, strided<[?, ?, 1], offset: ?>> to tensor<2x?x128xbf16>
  %cq = bufferization.to_tensor %cu_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_k restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_varlen %qt, %kt, %vt seqlens(%cq, %ck) max_seqlen_q(%max_q) mask<causal> : (tensor<4x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x128xbf16>, tensor<?xi32>, tensor<?xi32>, index) -> (tensor<4x?x128xbf16>, tensor<4x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<4x?x128xbf16>, memref<4x?x128xbf16, strided<[?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<4x?xf32>, memref<4x?xf32, strided<[?, ?], offset: ?>>) -> ()
  return
}
