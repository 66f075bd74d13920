// RUN: fa-opt %s --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-split-kv="splits=4" --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu | FileCheck %s

// fa-split-kv's partials are read by fa.attention_merge_splits, not stored
// into the function's memrefs: the conversion gives each a workspace buffer
// (memref.alloc tagged fa.workspace, the launcher's name for it) that the
// kernel writes, f32 rows straight from the accumulators (no conversion to
// f16), and the merge reads it through to_tensor. The kernel's grid is
// (query blocks x 4 chunks, heads, batches).

// CHECK-LABEL: func.func @split
// CHECK:         %[[PO:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) {fa.workspace = "out_partial"} : memref<?x?x?x64xf32>
// CHECK:         %[[PL:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %{{.*}}) {fa.workspace = "lse_partial"} : memref<?x?x?xf32>
// CHECK:         gpu.launch
// CHECK:           vector.store %{{.*}}, %[[PO]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<?x?x?x64xf32>, vector<2xf32>
// CHECK:           memref.store %{{.*}}, %[[PL]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x?xf32>
// CHECK:         %[[TL:.*]] = bufferization.to_tensor %[[PL]] restrict
// CHECK:         %[[TO:.*]] = bufferization.to_tensor %[[PO]] restrict
// CHECK:         %[[EO:.*]] = tensor.expand_shape %[[TO]]
// CHECK:         %[[EL:.*]] = tensor.expand_shape %[[TL]]
// CHECK:         %[[OUT:.*]], %[[LSE:.*]] = fa.attention_merge_splits %[[EO]], %[[EL]]
// CHECK:         bufferization.materialize_in_destination %[[OUT]] in restrict writable %arg3
// CHECK:         bufferization.materialize_in_destination %[[LSE]] in restrict writable %arg4
!m = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>
func.func @split(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
