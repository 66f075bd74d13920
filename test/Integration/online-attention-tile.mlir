// REQUIRES: mlir-runner
// RUN: fa-opt %s --fa-decompose-online-attention --fa-cpu-to-llvm \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:     -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils \
// RUN: | FileCheck %s

// Numerics of the online-softmax tile ops after fa-decompose-online-attention.
// One query tile (Br = 4, D = Dv = 8) against 8 keys, computed three ways:
//   one: one fa.online_attention step over all 8 keys, natural exp;
//   two: a loop of two steps over blocks of 4 keys, exp2;
//   ref: a direct softmax written here with linalg, from an explicit
//        visibility matrix that transcribes AttentionMask::isVisible.
// Each line printed is 1 when `one` or `two` matches `ref` (out and lse,
// |a - b| <= tol, +inf == +inf) and 0 otherwise. The inputs are smooth
// functions of the indices, so no number here needs explaining.

// CHECK:      {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NEXT: {{^}}1{{$}}
// CHECK-NOT:  {{.}}

!q = tensor<4x8xf32>
!kv = tensor<8x8xf32>
!blk = tensor<4x8xf32>
!row = tensor<4xf32>
!vis = tensor<4x8xi1>

func.func private @printI64(i64)
func.func private @printNewline()

//===----------------------------------------------------------------------===//
// Inputs and the reference
//===----------------------------------------------------------------------===//

// x[i, j] = sin(a * i + b * j + c).
func.func @wave(%a: f32, %b: f32, %c: f32) -> !kv {
  %e = tensor.empty() : !kv
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} outs(%e : !kv) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %fj = arith.sitofp %jj : i32 to f32
    %x0 = arith.mulf %a, %fi : f32
    %x1 = arith.mulf %b, %fj : f32
    %x2 = arith.addf %x0, %x1 : f32
    %x3 = arith.addf %x2, %c : f32
    %s = math.sin %x3 : f32
    linalg.yield %s : f32
  } -> !kv
  return %r : !kv
}

func.func @round_to_f16(%x: !kv) -> tensor<8x8xf16> {
  %e = tensor.empty() : tensor<8x8xf16>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>,
                       affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%x : !kv) outs(%e : tensor<8x8xf16>) {
  ^bb0(%a: f32, %b: f16):
    %t = arith.truncf %a : f32 to f16
    linalg.yield %t : f16
  } -> tensor<8x8xf16>
  return %r : tensor<8x8xf16>
}

func.func @to_f32(%x: tensor<8x8xf16>) -> !kv {
  %e = tensor.empty() : !kv
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>,
                       affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf16>) outs(%e : !kv) {
  ^bb0(%a: f16, %b: f32):
    %t = arith.extf %a : f16 to f32
    linalg.yield %t : f32
  } -> !kv
  return %r : !kv
}

// vis[r, c]: key ks + c is visible from query qs + r, i.e. j < kl and
// i + off - left <= j <= i + off + right with off = kl - ql (a negative bound
// means unbounded).
func.func @visibility(%qs: index, %ks: index, %ql: index, %kl: index,
                      %left: index, %right: index) -> !vis {
  %c0 = arith.constant 0 : index
  %true = arith.constant true
  %e = tensor.empty() : !vis
  %r = linalg.generic {
      indexing_maps = [affine_map<(r, c) -> (r, c)>],
      iterator_types = ["parallel", "parallel"]} outs(%e : !vis) {
  ^bb0(%out: i1):
    %r0 = linalg.index 0 : index
    %c1 = linalg.index 1 : index
    %i = arith.addi %qs, %r0 : index
    %j = arith.addi %ks, %c1 : index
    %off = arith.subi %kl, %ql : index
    %diag = arith.addi %i, %off : index
    %inSeq = arith.cmpi slt, %j, %kl : index
    %lo = arith.subi %diag, %left : index
    %leftOk0 = arith.cmpi sge, %j, %lo : index
    %noLeft = arith.cmpi slt, %left, %c0 : index
    %leftOk = arith.ori %noLeft, %leftOk0 : i1
    %hi = arith.addi %diag, %right : index
    %rightOk0 = arith.cmpi sle, %j, %hi : index
    %noRight = arith.cmpi slt, %right, %c0 : index
    %rightOk = arith.ori %noRight, %rightOk0 : i1
    %v0 = arith.andi %inSeq, %leftOk : i1
    %v1 = arith.andi %v0, %rightOk : i1
    linalg.yield %v1 : i1
  } -> !vis
  return %r : !vis
}

// Softmax attention of one tile, directly: s = scale * q k^T, softcapped when
// cap > 0; m = max over visible keys; p = exp(s - m) on visible keys, else 0;
// out = (p v) / sum(p) and lse = m + log(sum(p)); a row with no visible key
// gives out = 0, lse = +inf.
func.func @reference(%q: !q, %k: !kv, %v: !kv, %vis: !vis, %scale: f32,
                     %cap: f32) -> (!q, !row) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %pinf = arith.constant 0x7F800000 : f32
  %e2 = tensor.empty() : !blk
  %e1 = tensor.empty() : !row
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : !blk) -> !blk
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : !row) -> !row
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : !row) -> !row
  %qk = linalg.generic {
      indexing_maps = [affine_map<(r, c, d) -> (r, d)>,
                       affine_map<(r, c, d) -> (c, d)>,
                       affine_map<(r, c, d) -> (r, c)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q, %k : !q, !kv) outs(%z2 : !blk) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> !blk
  %s = linalg.generic {
      indexing_maps = [affine_map<(r, c) -> (r, c)>],
      iterator_types = ["parallel", "parallel"]} outs(%qk : !blk) {
  ^bb0(%x: f32):
    %y = arith.mulf %x, %scale : f32
    %t0 = arith.divf %y, %cap : f32
    %t1 = math.tanh %t0 : f32
    %t2 = arith.mulf %cap, %t1 : f32
    %capped = arith.cmpf ogt, %cap, %zero : f32
    %r = arith.select %capped, %t2, %y : f32
    linalg.yield %r : f32
  } -> !blk
  %m = linalg.generic {
      indexing_maps = [affine_map<(r, c) -> (r, c)>,
                       affine_map<(r, c) -> (r, c)>,
                       affine_map<(r, c) -> (r)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%s, %vis : !blk, !vis) outs(%m0 : !row) {
  ^bb0(%x: f32, %vv: i1, %acc: f32):
    %mx = arith.maximumf %acc, %x : f32
    %r = arith.select %vv, %mx, %acc : f32
    linalg.yield %r : f32
  } -> !row
  %p = linalg.generic {
      indexing_maps = [affine_map<(r, c) -> (r, c)>,
                       affine_map<(r, c) -> (r, c)>,
                       affine_map<(r, c) -> (r)>,
                       affine_map<(r, c) -> (r, c)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%s, %vis, %m : !blk, !vis, !row) outs(%e2 : !blk) {
  ^bb0(%x: f32, %vv: i1, %mm: f32, %out: f32):
    %d = arith.subf %x, %mm : f32
    %ex = math.exp %d : f32
    %r = arith.select %vv, %ex, %zero : f32
    linalg.yield %r : f32
  } -> !blk
  %l = linalg.generic {
      indexing_maps = [affine_map<(r, c) -> (r, c)>,
                       affine_map<(r, c) -> (r)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%p : !blk) outs(%z1 : !row) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  } -> !row
  %pv = linalg.generic {
      indexing_maps = [affine_map<(r, e, c) -> (r, c)>,
                       affine_map<(r, e, c) -> (c, e)>,
                       affine_map<(r, e, c) -> (r, e)>],
      iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p, %v : !blk, !kv) outs(%z2 : !q) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %x = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %x : f32
    linalg.yield %r : f32
  } -> !q
  %out = linalg.generic {
      indexing_maps = [affine_map<(r, e) -> (r, e)>,
                       affine_map<(r, e) -> (r)>,
                       affine_map<(r, e) -> (r, e)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%pv, %l : !q, !row) outs(%e2 : !q) {
  ^bb0(%x: f32, %ll: f32, %o: f32):
    %d = arith.divf %x, %ll : f32
    %empty = arith.cmpf oeq, %ll, %zero : f32
    %r = arith.select %empty, %zero, %d : f32
    linalg.yield %r : f32
  } -> !q
  %lse = linalg.generic {
      indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>,
                       affine_map<(r) -> (r)>],
      iterator_types = ["parallel"]}
      ins(%m, %l : !row, !row) outs(%e1 : !row) {
  ^bb0(%mm: f32, %ll: f32, %o: f32):
    %lg = math.log %ll : f32
    %x = arith.addf %mm, %lg : f32
    %empty = arith.cmpf oeq, %ll, %zero : f32
    %r = arith.select %empty, %pinf, %x : f32
    linalg.yield %r : f32
  } -> !row
  return %out, %lse : !q, !row
}

// Prints 1 when max |a - b| <= tol over out and lse (equal values, +inf
// included, count as 0; a NaN anywhere prints 0).
func.func @check(%a: !q, %alse: !row, %b: !q, %blse: !row, %tol: f32) {
  %zero = arith.constant 0.0 : f32
  %z = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%z : tensor<f32>) -> tensor<f32>
  %e0 = linalg.generic {
      indexing_maps = [affine_map<(r, e) -> (r, e)>,
                       affine_map<(r, e) -> (r, e)>,
                       affine_map<(r, e) -> ()>],
      iterator_types = ["reduction", "reduction"]}
      ins(%a, %b : !q, !q) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %d = arith.subf %x, %y : f32
    %ad = math.absf %d : f32
    %eq = arith.cmpf oeq, %x, %y : f32
    %err = arith.select %eq, %zero, %ad : f32
    %r = arith.maximumf %acc, %err : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %e1 = linalg.generic {
      indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>,
                       affine_map<(r) -> ()>],
      iterator_types = ["reduction"]}
      ins(%alse, %blse : !row, !row) outs(%e0 : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %d = arith.subf %x, %y : f32
    %ad = math.absf %d : f32
    %eq = arith.cmpf oeq, %x, %y : f32
    %err = arith.select %eq, %zero, %ad : f32
    %r = arith.maximumf %acc, %err : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %err = tensor.extract %e1[] : tensor<f32>
  %ok = arith.cmpf ole, %err, %tol : f32
  %oki = arith.extui %ok : i1 to i64
  call @printI64(%oki) : (i64) -> ()
  call @printNewline() : () -> ()
  return
}

// The initial online-softmax state: acc = 0, max = -inf, sum = 0.
func.func @init() -> (!blk, !row, !row) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e2 = tensor.empty() : !blk
  %e1 = tensor.empty() : !row
  %acc = linalg.fill ins(%zero : f32) outs(%e2 : !blk) -> !blk
  %max = linalg.fill ins(%ninf : f32) outs(%e1 : !row) -> !row
  %sum = linalg.fill ins(%zero : f32) outs(%e1 : !row) -> !row
  return %acc, %max, %sum : !blk, !row, !row
}

//===----------------------------------------------------------------------===//
// The tile ops: one step of 8 keys (exp) or two steps of 4 keys (exp2)
//===----------------------------------------------------------------------===//

func.func @plain_one(%q: !q, %k: !kv, %v: !kv) -> (!q, !row) {
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = fa.online_attention %q, %k, %v into %a0, %m0, %s0 scale 0.5
      : !q, !kv, !kv -> !blk, !row
  %o, %l = fa.online_attention_finalize %a, %m, %s : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @plain_two(%q: !q, %k: !kv, %v: !kv) -> (!q, !row) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = scf.for %kb = %c0 to %c8 step %c4
      iter_args(%acc = %a0, %max = %m0, %sum = %s0) -> (!blk, !row, !row) {
    %kt = tensor.extract_slice %k[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %vt = tensor.extract_slice %v[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %r:3 = fa.online_attention %q, %kt, %vt into %acc, %max, %sum scale 0.5
        exp2 : !q, tensor<4x8xf32>, tensor<4x8xf32> -> !blk, !row
    scf.yield %r#0, %r#1, %r#2 : !blk, !row, !row
  }
  %o, %l = fa.online_attention_finalize %a, %m, %s exp2 : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @causal_one(%q: !q, %k: !kv, %v: !kv, %qs: index, %ks: index,
                      %ql: index, %kl: index) -> (!q, !row) {
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = fa.online_attention %q, %k, %v into %a0, %m0, %s0
      masked(%qs, %ks, %ql, %kl) mask<causal> scale 0.5 : !q, !kv, !kv -> !blk, !row
  %o, %l = fa.online_attention_finalize %a, %m, %s : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @causal_two(%q: !q, %k: !kv, %v: !kv, %qs: index, %ks: index,
                      %ql: index, %kl: index) -> (!q, !row) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = scf.for %kb = %c0 to %c8 step %c4
      iter_args(%acc = %a0, %max = %m0, %sum = %s0) -> (!blk, !row, !row) {
    %kt = tensor.extract_slice %k[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %vt = tensor.extract_slice %v[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %kstart = arith.addi %ks, %kb : index
    %r:3 = fa.online_attention %q, %kt, %vt into %acc, %max, %sum
        masked(%qs, %kstart, %ql, %kl) mask<causal> scale 0.5 exp2
        : !q, tensor<4x8xf32>, tensor<4x8xf32> -> !blk, !row
    scf.yield %r#0, %r#1, %r#2 : !blk, !row, !row
  }
  %o, %l = fa.online_attention_finalize %a, %m, %s exp2 : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @window_one(%q: !q, %k: !kv, %v: !kv, %qs: index, %ks: index,
                      %ql: index, %kl: index) -> (!q, !row) {
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = fa.online_attention %q, %k, %v into %a0, %m0, %s0
      masked(%qs, %ks, %ql, %kl) mask<window 1, 0> scale 0.5
      : !q, !kv, !kv -> !blk, !row
  %o, %l = fa.online_attention_finalize %a, %m, %s : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @window_two(%q: !q, %k: !kv, %v: !kv, %qs: index, %ks: index,
                      %ql: index, %kl: index) -> (!q, !row) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = scf.for %kb = %c0 to %c8 step %c4
      iter_args(%acc = %a0, %max = %m0, %sum = %s0) -> (!blk, !row, !row) {
    %kt = tensor.extract_slice %k[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %vt = tensor.extract_slice %v[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %kstart = arith.addi %ks, %kb : index
    %r:3 = fa.online_attention %q, %kt, %vt into %acc, %max, %sum
        masked(%qs, %kstart, %ql, %kl) mask<window 1, 0> scale 0.5 exp2
        : !q, tensor<4x8xf32>, tensor<4x8xf32> -> !blk, !row
    scf.yield %r#0, %r#1, %r#2 : !blk, !row, !row
  }
  %o, %l = fa.online_attention_finalize %a, %m, %s exp2 : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @softcap_one(%q: !q, %k: !kv, %v: !kv) -> (!q, !row) {
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = fa.online_attention %q, %k, %v into %a0, %m0, %s0
      softcap 1.5 scale 1.0 : !q, !kv, !kv -> !blk, !row
  %o, %l = fa.online_attention_finalize %a, %m, %s : !blk, !row -> !q
  return %o, %l : !q, !row
}

func.func @softcap_two(%q: !q, %k: !kv, %v: !kv) -> (!q, !row) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = scf.for %kb = %c0 to %c8 step %c4
      iter_args(%acc = %a0, %max = %m0, %sum = %s0) -> (!blk, !row, !row) {
    %kt = tensor.extract_slice %k[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %vt = tensor.extract_slice %v[%kb, 0] [4, 8] [1, 1] : !kv to tensor<4x8xf32>
    %r:3 = fa.online_attention %q, %kt, %vt into %acc, %max, %sum
        softcap 1.5 scale 1.0 exp2
        : !q, tensor<4x8xf32>, tensor<4x8xf32> -> !blk, !row
    scf.yield %r#0, %r#1, %r#2 : !blk, !row, !row
  }
  %o, %l = fa.online_attention_finalize %a, %m, %s exp2 : !blk, !row -> !q
  return %o, %l : !q, !row
}

// f16 tiles, two causal steps with exp2: P is rounded to f16 for P V and the
// output to f16, so the tolerance is looser.
func.func @f16_two(%q: tensor<4x8xf16>, %k: tensor<8x8xf16>,
                   %v: tensor<8x8xf16>, %qs: index, %ks: index, %ql: index,
                   %kl: index) -> (!q, !row) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %a0, %m0, %s0 = call @init() : () -> (!blk, !row, !row)
  %a, %m, %s = scf.for %kb = %c0 to %c8 step %c4
      iter_args(%acc = %a0, %max = %m0, %sum = %s0) -> (!blk, !row, !row) {
    %kt = tensor.extract_slice %k[%kb, 0] [4, 8] [1, 1]
        : tensor<8x8xf16> to tensor<4x8xf16>
    %vt = tensor.extract_slice %v[%kb, 0] [4, 8] [1, 1]
        : tensor<8x8xf16> to tensor<4x8xf16>
    %kstart = arith.addi %ks, %kb : index
    %r:3 = fa.online_attention %q, %kt, %vt into %acc, %max, %sum
        masked(%qs, %kstart, %ql, %kl) mask<causal> scale 0.5 exp2
        : tensor<4x8xf16>, tensor<4x8xf16>, tensor<4x8xf16> -> !blk, !row
    scf.yield %r#0, %r#1, %r#2 : !blk, !row, !row
  }
  %o, %l = fa.online_attention_finalize %a, %m, %s exp2
      : !blk, !row -> tensor<4x8xf16>
  %e = tensor.empty() : !q
  %o32 = linalg.generic {
      indexing_maps = [affine_map<(r, e) -> (r, e)>,
                       affine_map<(r, e) -> (r, e)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%o : tensor<4x8xf16>) outs(%e : !q) {
  ^bb0(%x: f16, %y: f32):
    %r = arith.extf %x : f16 to f32
    linalg.yield %r : f32
  } -> !q
  return %o32, %l : !q, !row
}

//===----------------------------------------------------------------------===//
// main
//===----------------------------------------------------------------------===//

func.func @main() {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %cm1 = arith.constant -1 : index
  %c1 = arith.constant 1 : index
  %f0 = arith.constant 0.0 : f32
  %scale = arith.constant 0.5 : f32
  // Values are O(1): f32 results agree to a few ulps; f16 rounds P and out.
  %tol = arith.constant 1.0e-5 : f32
  %tol16 = arith.constant 2.0e-3 : f32

  %qa = arith.constant 0.7 : f32
  %qb = arith.constant 1.3 : f32
  %qc = arith.constant 0.5 : f32
  %ka = arith.constant 0.9 : f32
  %kb = arith.constant -0.4 : f32
  %kc = arith.constant 0.0 : f32
  %va = arith.constant 1.1 : f32
  %vb = arith.constant 0.6 : f32
  %vc = arith.constant 0.2 : f32
  %q8 = call @wave(%qa, %qb, %qc) : (f32, f32, f32) -> !kv
  %q = tensor.extract_slice %q8[0, 0] [4, 8] [1, 1] : !kv to !q
  %k = call @wave(%ka, %kb, %kc) : (f32, f32, f32) -> !kv
  %v = call @wave(%va, %vb, %vc) : (f32, f32, f32) -> !kv

  // No mask: every key visible.
  %all = call @visibility(%c0, %c0, %c4, %c8, %cm1, %cm1)
      : (index, index, index, index, index, index) -> !vis
  %pr, %pl = call @reference(%q, %k, %v, %all, %scale, %f0)
      : (!q, !kv, !kv, !vis, f32, f32) -> (!q, !row)
  %p1, %p1l = call @plain_one(%q, %k, %v) : (!q, !kv, !kv) -> (!q, !row)
  %p2, %p2l = call @plain_two(%q, %k, %v) : (!q, !kv, !kv) -> (!q, !row)
  call @check(%p1, %p1l, %pr, %pl, %tol) : (!q, !row, !q, !row, f32) -> ()
  call @check(%p2, %p2l, %pr, %pl, %tol) : (!q, !row, !q, !row, f32) -> ()

  // Causal, first query block of Nq = 8 against Nk = 6 keys (keys 6, 7 are
  // padding): query i sees keys j <= i - 2, so rows 0 and 1 see no key at all
  // (out = 0, lse = +inf) and the second key block is fully hidden.
  %cv = call @visibility(%c0, %c0, %c8, %c6, %cm1, %c0)
      : (index, index, index, index, index, index) -> !vis
  %cr, %cl = call @reference(%q, %k, %v, %cv, %scale, %f0)
      : (!q, !kv, !kv, !vis, f32, f32) -> (!q, !row)
  %c1o, %c1l = call @causal_one(%q, %k, %v, %c0, %c0, %c8, %c6)
      : (!q, !kv, !kv, index, index, index, index) -> (!q, !row)
  %c2o, %c2l = call @causal_two(%q, %k, %v, %c0, %c0, %c8, %c6)
      : (!q, !kv, !kv, index, index, index, index) -> (!q, !row)
  call @check(%c1o, %c1l, %cr, %cl, %tol) : (!q, !row, !q, !row, f32) -> ()
  call @check(%c2o, %c2l, %cr, %cl, %tol) : (!q, !row, !q, !row, f32) -> ()

  // Window [1, 0], second query block (queries 4..7), Nq = Nk = 8: query i
  // sees keys i - 1 and i. Row 0 spans both key blocks; rows 1-3 see nothing
  // in the first block, so their state stays (-inf, 0, 0) through a step.
  %wv = call @visibility(%c4, %c0, %c8, %c8, %c1, %c0)
      : (index, index, index, index, index, index) -> !vis
  %wr, %wl = call @reference(%q, %k, %v, %wv, %scale, %f0)
      : (!q, !kv, !kv, !vis, f32, f32) -> (!q, !row)
  %w1o, %w1l = call @window_one(%q, %k, %v, %c4, %c0, %c8, %c8)
      : (!q, !kv, !kv, index, index, index, index) -> (!q, !row)
  %w2o, %w2l = call @window_two(%q, %k, %v, %c4, %c0, %c8, %c8)
      : (!q, !kv, !kv, index, index, index, index) -> (!q, !row)
  call @check(%w1o, %w1l, %wr, %wl, %tol) : (!q, !row, !q, !row, f32) -> ()
  call @check(%w2o, %w2l, %wr, %wl, %tol) : (!q, !row, !q, !row, f32) -> ()

  // Softcap 1.5 with scale 1: the tanh is far from linear here, so applying
  // log2(e) before it (instead of after) would not match.
  %one = arith.constant 1.0 : f32
  %cap = arith.constant 1.5 : f32
  %sr, %sl = call @reference(%q, %k, %v, %all, %one, %cap)
      : (!q, !kv, !kv, !vis, f32, f32) -> (!q, !row)
  %s1o, %s1l = call @softcap_one(%q, %k, %v) : (!q, !kv, !kv) -> (!q, !row)
  %s2o, %s2l = call @softcap_two(%q, %k, %v) : (!q, !kv, !kv) -> (!q, !row)
  call @check(%s1o, %s1l, %sr, %sl, %tol) : (!q, !row, !q, !row, f32) -> ()
  call @check(%s2o, %s2l, %sr, %sl, %tol) : (!q, !row, !q, !row, f32) -> ()

  // f16, causal, Nq = 4, Nk = 8 (query i sees keys j <= i + 4), against the
  // reference on the same f16 values.
  %q8h = call @round_to_f16(%q8) : (!kv) -> tensor<8x8xf16>
  %kh = call @round_to_f16(%k) : (!kv) -> tensor<8x8xf16>
  %vh = call @round_to_f16(%v) : (!kv) -> tensor<8x8xf16>
  %q8x = call @to_f32(%q8h) : (tensor<8x8xf16>) -> !kv
  %kx = call @to_f32(%kh) : (tensor<8x8xf16>) -> !kv
  %vx = call @to_f32(%vh) : (tensor<8x8xf16>) -> !kv
  %qh = tensor.extract_slice %q8h[0, 0] [4, 8] [1, 1]
      : tensor<8x8xf16> to tensor<4x8xf16>
  %qx = tensor.extract_slice %q8x[0, 0] [4, 8] [1, 1] : !kv to !q
  %hv = call @visibility(%c0, %c0, %c4, %c8, %cm1, %c0)
      : (index, index, index, index, index, index) -> !vis
  %hr, %hl = call @reference(%qx, %kx, %vx, %hv, %scale, %f0)
      : (!q, !kv, !kv, !vis, f32, f32) -> (!q, !row)
  %h2o, %h2l = call @f16_two(%qh, %kh, %vh, %c0, %c0, %c4, %c8)
      : (tensor<4x8xf16>, tensor<8x8xf16>, tensor<8x8xf16>, index, index,
         index, index) -> (!q, !row)
  call @check(%h2o, %h2l, %hr, %hl, %tol16) : (!q, !row, !q, !row, f32) -> ()
  return
}
