// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=32" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu | FileCheck %s

// Packed sequences ([H, T, D] memrefs; cu_seqlens i32): one block per
// (query block, head, sequence). Each block loads its sequence's offsets
// from the i32 memrefs, copies Q rows base + q0 on (the rows past the
// sequence's zero-filled), K/V through views that start at the sequence's
// first key row, and stores out [H, T, D] / lse [H, T] without a batch index.

// CHECK-LABEL: func.func @varlen_causal
// CHECK-SAME:    %[[Q:[a-zA-Z0-9]+]]: memref<4x?x64xf16, {{.*}}>, %[[K:[a-zA-Z0-9]+]]: memref<2x?x64xf16, {{.*}}>, %[[V:[a-zA-Z0-9]+]]: memref<2x?x64xf16, {{.*}}>, %[[OUT:[a-zA-Z0-9]+]]: memref<4x?x64xf16, {{.*}}>, %[[LSE:[a-zA-Z0-9]+]]: memref<4x?xf32, {{.*}}>, %[[CUQ:[a-zA-Z0-9]+]]: memref<?xi32>, %[[CUK:[a-zA-Z0-9]+]]: memref<?xi32>, %[[MAXQ:[a-zA-Z0-9]+]]: index
// The grid: ceil(max_seqlen_q / 64) query blocks, 4 heads, B = dim(cu) - 1.
// CHECK:         %[[NB:.*]] = arith.subi %{{.*}}, %{{.*}} : index
// CHECK:         %[[QBLOCKS:.*]] = arith.ceildivui %[[MAXQ]], %{{.*}} : index
// CHECK:         gpu.launch blocks(%{{[a-z0-9_]+}}, %[[H:[a-z0-9_]+]], %[[SEQ:[a-z0-9_]+]]) in (%{{.*}} = %[[QBLOCKS]], %{{.*}} = %{{.*}}, %{{.*}} = %[[NB]])
// CHECK:           memref.load %[[CUQ]][%[[SEQ]]] : memref<?xi32>
// CHECK:           %[[KB0:.*]] = memref.load %[[CUK]][%[[SEQ]]] : memref<?xi32>
// CHECK:           %[[KBASE:.*]] = arith.index_cast %[[KB0]] : i32 to index
// Q's view: head h's rows (no batch stride).
// CHECK:           %{{.*}}, %{{.*}}, %{{.*}}:3, %[[QST:.*]]:3 = memref.extract_strided_metadata %[[Q]]
// CHECK:           %{{.*}} = arith.muli %[[H]], %[[QST]]#0 : index
// CHECK:           memref.reinterpret_cast %[[Q]]
// K's view: the key head's rows from the sequence's first key row.
// CHECK:           %{{.*}}, %{{.*}}, %{{.*}}:3, %[[KST:.*]]:3 = memref.extract_strided_metadata %[[K]]
// CHECK:           arith.muli %[[KBASE]], %[[KST]]#1 : index
// CHECK:           %[[KG:.*]] = memref.reinterpret_cast %[[K]]
// CHECK:           memref.reinterpret_cast %[[V]]
// CHECK:           nvgpu.device_async_copy %[[KG]]
// The epilogue: rows of this sequence only, at [h, base + q0 + r, col].
// CHECK:           vector.store %{{.*}}, %[[OUT]][%[[H]], %{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<4x?x64xf16, {{.*}}>, vector<2xf16>
// CHECK:           memref.store %{{.*}}, %[[LSE]][%[[H]], %{{.*}}] : memref<4x?xf32, {{.*}}>

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

// A paged cache: the K/V views start at page 0 of the key head; each key
// block loads its page from the page table (row b, block / 64), K and V
// sharing it, and adds page * stride[0] to the copies' addresses; rows past
// the batch's cache length are zero-filled.

// CHECK-LABEL: func.func @paged
// CHECK-SAME:    %[[KP:[a-zA-Z0-9]+]]: memref<?x2x64x64xbf16, {{.*}}>, %{{.*}}: memref<?x2x64x64xbf16, {{.*}}>, %{{.*}}: memref<?x8x1x64xbf16, {{.*}}>, %{{.*}}: memref<?x8x1xf32, {{.*}}>, %[[T:[a-zA-Z0-9]+]]: memref<?x?xi32>, %[[N:[a-zA-Z0-9]+]]: memref<?xi32>
// CHECK:         gpu.launch blocks(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[B:[a-z0-9_]+]]) in
// CHECK:           memref.load %[[N]][%[[B]]] : memref<?xi32>
// CHECK:           %{{.*}}, %{{.*}}, %{{.*}}:4, %[[KST:.*]]:4 = memref.extract_strided_metadata %[[KP]]
// CHECK:           %[[KG:.*]] = memref.reinterpret_cast %[[KP]]
// CHECK:           scf.if
// CHECK:             %[[KEY:.*]] = arith.minsi %[[K0:[a-z0-9_]+]], %{{.*}} : index
// CHECK:             %[[ROW:.*]] = arith.remui %[[K0]], %{{.*}} : index
// CHECK:             %[[PI:.*]] = arith.divui %[[KEY]], %{{.*}} : index
// CHECK:             %[[P:.*]] = memref.load %[[T]][%[[B]], %[[PI]]] : memref<?x?xi32>
// CHECK:             %[[PAGE:.*]] = arith.index_cast %[[P]] : i32 to index
// CHECK:             %[[PBASE:.*]] = arith.muli %[[PAGE]], %[[KST]]#0 : index
// CHECK:             %[[R:.*]] = arith.muli %[[ROW]], %[[KST]]#2 : index
// CHECK:             %[[AT:.*]] = arith.addi %[[PBASE]], %[[R]] : index
// CHECK:             nvgpu.device_async_copy %[[KG]][%[[AT]]]
// The key loop: the next block's page (its key clamped to the last: the
// look-ahead past the end reads an entry that exists), loaded before the
// wait for this block's copies.
// CHECK:           scf.for
// CHECK:             arith.minsi
// CHECK:             memref.load %[[T]][%[[B]], %{{.*}}] : memref<?x?xi32>
// CHECK:             nvvm.cp.async.wait.group 0
func.func @paged(%q: memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %kp: memref<?x2x64x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %vp: memref<?x2x64x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %out: memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x8x1xf32, strided<[?, ?, ?], offset: ?>>, %t: memref<?x?xi32>, %n: memref<?xi32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x8x1x64xbf16>
  %kt = bufferization.to_tensor %kp restrict : memref<?x2x64x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x2x64x64xbf16>
  %vt = bufferization.to_tensor %vp restrict : memref<?x2x64x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x2x64x64xbf16>
  %tt = bufferization.to_tensor %t restrict : memref<?x?xi32> to tensor<?x?xi32>
  %nt = bufferization.to_tensor %n restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_paged %qt, %kt, %vt pages(%tt) seqlens(%nt) : (tensor<?x8x1x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x8x1x64xbf16>, memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x8x1xf32>, memref<?x8x1xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

// Pages of 16 keys, blocks of 32: a block spans pages, so each round of a
// thread's copy rows (16 rows of 128 threads) looks its page up for its own
// key, clamped to the batch's last key (rows past it are zero-filled; the
// table holds no page for them); the views start at row 0 of the page.

// CHECK-LABEL: func.func @paged_spanning
// CHECK-SAME:    %[[KP:[a-zA-Z0-9]+]]: memref<?x2x16x64xbf16, {{.*}}>, %{{.*}}: memref<?x2x16x64xbf16, {{.*}}>, %{{.*}}: memref<?x8x1x64xbf16, {{.*}}>, %{{.*}}: memref<?x8x1xf32, {{.*}}>, %[[T:[a-zA-Z0-9]+]]: memref<?x?xi32>, %[[N:[a-zA-Z0-9]+]]: memref<?xi32>
// CHECK:         gpu.launch blocks(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[B:[a-z0-9_]+]]) in
// CHECK:           %[[NK:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK:           %{{.*}}, %{{.*}}, %{{.*}}:4, %[[KST:.*]]:4 = memref.extract_strided_metadata %[[KP]]
// CHECK:           %[[KG:.*]] = memref.reinterpret_cast %[[KP]]
// CHECK:           scf.if
// CHECK:             %[[LAST:.*]] = arith.subi %[[NK]], %{{c1(_[0-9]+)?}} : index
// CHECK:             %[[KEY:.*]] = arith.addi %[[K0:[a-z0-9_]+]], %{{[a-z0-9_]+}} : index
// CHECK:             %[[KEYC:.*]] = arith.minsi %[[KEY]], %[[LAST]] : index
// CHECK:             %[[PI:.*]] = arith.divui %[[KEYC]], %{{c16(_[0-9]+)?}} : index
// CHECK:             %[[P:.*]] = memref.load %[[T]][%[[B]], %[[PI]]] : memref<?x?xi32>
// CHECK:             %[[PAGE:.*]] = arith.index_cast %[[P]] : i32 to index
// CHECK:             %[[ROW:.*]] = arith.remui %[[KEYC]], %{{c16(_[0-9]+)?}} : index
// The second round: 16 rows further.
// CHECK:             arith.addi %{{[a-z0-9_]+}}, %{{c16(_[0-9]+)?}} : index
// CHECK:             arith.minsi
// CHECK:             memref.load %[[T]][%[[B]], %{{.*}}] : memref<?x?xi32>
// CHECK:             %[[PBASE:.*]] = arith.muli %[[PAGE]], %[[KST]]#0 : index
// CHECK:             %[[R:.*]] = arith.muli %[[ROW]], %[[KST]]#2 : index
// CHECK:             %[[AT:.*]] = arith.addi %[[PBASE]], %[[R]] : index
// CHECK:             nvgpu.device_async_copy %[[KG]][%[[AT]]]
func.func @paged_spanning(%q: memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %kp: memref<?x2x16x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %vp: memref<?x2x16x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %out: memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x8x1xf32, strided<[?, ?, ?], offset: ?>>, %t: memref<?x?xi32>, %n: memref<?xi32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x8x1x64xbf16>
  %kt = bufferization.to_tensor %kp restrict : memref<?x2x16x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x2x16x64xbf16>
  %vt = bufferization.to_tensor %vp restrict : memref<?x2x16x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x2x16x64xbf16>
  %tt = bufferization.to_tensor %t restrict : memref<?x?xi32> to tensor<?x?xi32>
  %nt = bufferization.to_tensor %n restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_paged %qt, %kt, %vt pages(%tt) seqlens(%nt) : (tensor<?x8x1x64xbf16>, tensor<?x2x16x64xbf16>, tensor<?x2x16x64xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x8x1x64xbf16>, memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x8x1xf32>, memref<?x8x1xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}
