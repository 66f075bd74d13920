// REQUIRES: mlir-runner
// RUN: fa-opt %s --fa-lower-to-reference --fa-cpu-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:     -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils \
// RUN: | FileCheck %s

// fa.attention_merge on the CPU (through its reference lowering): attention
// of 4 queries over 8 keys (B = 1, H = 2, D = 8) equals the merge of the
// attentions over keys [0, 3) and [3, 8); a partial whose rows saw no key
// (lse = +inf, out arbitrary) changes nothing; a merge of such partials
// only gives out = 0, lse = +inf. Each line is 1 when out and lse match
// (|a - b| <= 1e-5, +inf == +inf).

// CHECK:      {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NOT:  {{.}}

!q = tensor<1x2x4x8xf32>
!kv = tensor<1x2x8x8xf32>
!l = tensor<1x2x4xf32>

func.func private @printI64(i64)
func.func private @printNewline()

// x[b, h, n, d] = sin(a * (n + 8 h) + c * d + e).
func.func @wave(%a: f32, %c: f32, %e: f32, %init: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %r = linalg.generic {
      indexing_maps = [affine_map<(b, h, n, d) -> (b, h, n, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%init : tensor<?x?x?x?xf32>) {
  ^bb0(%out: f32):
    %h = linalg.index 1 : index
    %n = linalg.index 2 : index
    %d = linalg.index 3 : index
    %c8 = arith.constant 8 : index
    %h8 = arith.muli %h, %c8 : index
    %nh = arith.addi %n, %h8 : index
    %ni = arith.index_cast %nh : index to i32
    %di = arith.index_cast %d : index to i32
    %nf = arith.sitofp %ni : i32 to f32
    %df = arith.sitofp %di : i32 to f32
    %x0 = arith.mulf %a, %nf : f32
    %x1 = arith.mulf %c, %df : f32
    %x2 = arith.addf %x0, %x1 : f32
    %x3 = arith.addf %x2, %e : f32
    %s = math.sin %x3 : f32
    linalg.yield %s : f32
  } -> tensor<?x?x?x?xf32>
  return %r : tensor<?x?x?x?xf32>
}

// The largest |a - b| (0 where a == b, +inf included).
func.func @maxdiff(%a: tensor<?xf32>, %b: tensor<?xf32>) -> f32 {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                       affine_map<(i) -> ()>],
      iterator_types = ["reduction"]}
      ins(%a, %b : tensor<?xf32>, tensor<?xf32>) outs(%z : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %same = arith.cmpf oeq, %x, %y : f32
    %d0 = arith.subf %x, %y : f32
    %d1 = math.absf %d0 : f32
    %d = arith.select %same, %zero, %d1 : f32
    %m = arith.maximumf %acc, %d : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  %v = tensor.extract %r[] : tensor<f32>
  return %v : f32
}

func.func @check(%o: !q, %l: !l, %o2: !q, %l2: !l) {
  %tol = arith.constant 1.0e-5 : f32
  %fo = tensor.collapse_shape %o [[0, 1, 2, 3]] : !q into tensor<64xf32>
  %fo2 = tensor.collapse_shape %o2 [[0, 1, 2, 3]] : !q into tensor<64xf32>
  %fl = tensor.collapse_shape %l [[0, 1, 2]] : !l into tensor<8xf32>
  %fl2 = tensor.collapse_shape %l2 [[0, 1, 2]] : !l into tensor<8xf32>
  %co = tensor.cast %fo : tensor<64xf32> to tensor<?xf32>
  %co2 = tensor.cast %fo2 : tensor<64xf32> to tensor<?xf32>
  %cl = tensor.cast %fl : tensor<8xf32> to tensor<?xf32>
  %cl2 = tensor.cast %fl2 : tensor<8xf32> to tensor<?xf32>
  %do = func.call @maxdiff(%co, %co2) : (tensor<?xf32>, tensor<?xf32>) -> f32
  %dl = func.call @maxdiff(%cl, %cl2) : (tensor<?xf32>, tensor<?xf32>) -> f32
  %ok0 = arith.cmpf ole, %do, %tol : f32
  %ok1 = arith.cmpf ole, %dl, %tol : f32
  %ok = arith.andi %ok0, %ok1 : i1
  %i = arith.extui %ok : i1 to i64
  func.call @printI64(%i) : (i64) -> ()
  func.call @printNewline() : () -> ()
  return
}

func.func @main() {
  %a = arith.constant 0.7 : f32
  %b = arith.constant 1.3 : f32
  %c = arith.constant 0.2 : f32
  %eq = tensor.empty() : tensor<1x2x4x8xf32>
  %ekv = tensor.empty() : tensor<1x2x8x8xf32>
  %dq = tensor.cast %eq : tensor<1x2x4x8xf32> to tensor<?x?x?x?xf32>
  %dkv = tensor.cast %ekv : tensor<1x2x8x8xf32> to tensor<?x?x?x?xf32>
  %q0 = func.call @wave(%a, %b, %c, %dq) : (f32, f32, f32, tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %k0 = func.call @wave(%b, %c, %a, %dkv) : (f32, f32, f32, tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %v0 = func.call @wave(%c, %a, %b, %dkv) : (f32, f32, f32, tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %q = tensor.cast %q0 : tensor<?x?x?x?xf32> to !q
  %k = tensor.cast %k0 : tensor<?x?x?x?xf32> to !kv
  %v = tensor.cast %v0 : tensor<?x?x?x?xf32> to !kv

  // All keys at once, and in two chunks.
  %o, %l = fa.attention %q, %k, %v : (!q, !kv, !kv) -> (!q, !l)
  %ka = tensor.extract_slice %k[0, 0, 0, 0] [1, 2, 3, 8] [1, 1, 1, 1] : !kv to tensor<1x2x3x8xf32>
  %va = tensor.extract_slice %v[0, 0, 0, 0] [1, 2, 3, 8] [1, 1, 1, 1] : !kv to tensor<1x2x3x8xf32>
  %kb = tensor.extract_slice %k[0, 0, 3, 0] [1, 2, 5, 8] [1, 1, 1, 1] : !kv to tensor<1x2x5x8xf32>
  %vb = tensor.extract_slice %v[0, 0, 3, 0] [1, 2, 5, 8] [1, 1, 1, 1] : !kv to tensor<1x2x5x8xf32>
  %oa, %la = fa.attention %q, %ka, %va : (!q, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> (!q, !l)
  %ob, %lb = fa.attention %q, %kb, %vb : (!q, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> (!q, !l)
  %om, %lm = fa.attention_merge out(%oa, %ob) lse(%la, %lb) : (!q, !q), (!l, !l) -> !q, !l
  func.call @check(%o, %l, %om, %lm) : (!q, !l, !q, !l) -> ()
  // The order of the partials does not matter.
  %om2, %lm2 = fa.attention_merge out(%ob, %oa) lse(%lb, %la) : (!q, !q), (!l, !l) -> !q, !l
  func.call @check(%o, %l, %om2, %lm2) : (!q, !l, !q, !l) -> ()
  // One partial alone is itself.
  %o1, %l1 = fa.attention_merge out(%oa) lse(%la) : (!q), (!l) -> !q, !l
  func.call @check(%oa, %la, %o1, %l1) : (!q, !l, !q, !l) -> ()

  // A partial that saw no key: lse = +inf, out arbitrary (7).
  %pinf = arith.constant 0x7F800000 : f32
  %seven = arith.constant 7.0 : f32
  %zero = arith.constant 0.0 : f32
  %el = tensor.empty() : !l
  %linf = linalg.fill ins(%pinf : f32) outs(%el : !l) -> !l
  %o7 = linalg.fill ins(%seven : f32) outs(%eq : !q) -> !q
  %oe, %le = fa.attention_merge out(%o, %o7) lse(%l, %linf) : (!q, !q), (!l, !l) -> !q, !l
  func.call @check(%o, %l, %oe, %le) : (!q, !l, !q, !l) -> ()
  %oe2, %le2 = fa.attention_merge out(%o7, %oa, %ob) lse(%linf, %la, %lb) : (!q, !q, !q), (!l, !l, !l) -> !q, !l
  func.call @check(%o, %l, %oe2, %le2) : (!q, !l, !q, !l) -> ()
  // Only such partials: out = 0, lse = +inf.
  %o0z = linalg.fill ins(%zero : f32) outs(%eq : !q) -> !q
  %on, %ln = fa.attention_merge out(%o7, %o7) lse(%linf, %linf) : (!q, !q), (!l, !l) -> !q, !l
  func.call @check(%o0z, %linf, %on, %ln) : (!q, !l, !q, !l) -> ()
  return
}
