// RUN: fa-opt %s -split-input-file -verify-diagnostics

// One case per user-facing error of the fa dialect: the verifiers in
// lib/Dialect/FA/IR/FAOps.cpp and the type constraints of FAOps.td. A few
// cases use the generic form to build what the custom form cannot express.

//===----------------------------------------------------------------------===//
// fa.attention: operand and result types (ODS)
//===----------------------------------------------------------------------===//

// The inputs are rank-4 tensors.
func.func @f(%q: tensor<4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{operand #0 must be 4D tensor of f16, bf16 or f32 values, but got 'tensor<4x128x64xf16>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// Unranked tensors are rejected.
func.func @f(%q: tensor<*xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{operand #0 must be 4D tensor of f16, bf16 or f32 values, but got 'tensor<*xf16>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<*xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// Integer element types are rejected.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xi32>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{operand #1 must be 4D tensor of f16, bf16 or f32 values, but got 'tensor<1x4x128x64xi32>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xi32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// f64 is rejected: the kernels compute in f16, bf16 or f32.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf64>) {
  // expected-error @below {{operand #2 must be 4D tensor of f16, bf16 or f32 values, but got 'tensor<1x4x128x64xf64>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf64>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// The output is rank 4.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{result #0 must be 4D tensor of f16, bf16 or f32 values, but got 'tensor<4x128x64xf16>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// The log-sum-exp is always f32...
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{result #1 must be 3D tensor of f32 values, but got 'tensor<1x4x128xf16>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf16>)
  return
}

// -----

// ...and rank 3.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{result #1 must be 3D tensor of f32 values, but got 'tensor<1x4x128x1xf32>'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x1xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention: element types and shapes
//===----------------------------------------------------------------------===//

// q, k and v share one element type.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xbf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query, key and value must have the same element type, got 'f16', 'bf16' and 'f16'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xbf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// The output has the element type of the inputs.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{out must have element type 'f16', got 'f32'}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf32>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<2x4x128x64xf16>, %v: tensor<2x4x128x64xf16>) {
  // expected-error @below {{batch size mismatch: query has 1 but key has 2}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// All static sizes of one dimension must agree, even when the tensor
// between them is dynamic.
func.func @f(%q: tensor<2x4x128x64xf16>, %k: tensor<?x4x128x64xf16>, %v: tensor<3x4x128x64xf16>) {
  // expected-error @below {{batch size mismatch: query has 2 but value has 3}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<2x4x128x64xf16>, tensor<?x4x128x64xf16>, tensor<3x4x128x64xf16>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

// The results carry the batch size too.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{batch size mismatch: query has 1 but lse has 2}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query head count mismatch: query has 4 but out has 8}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x8x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x2x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{key/value head count mismatch: key has 2 but value has 4}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query sequence length mismatch: query has 128 but lse has 64}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x64xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x96x64xf16>) {
  // expected-error @below {{key/value sequence length mismatch: key has 128 but value has 96}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x96x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x128xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{head dim mismatch: query has 64 but key has 128}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x128xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x128xf16>) {
  // expected-error @below {{value head dim mismatch: value has 128 but out has 64}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x128xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention: head dims
//===----------------------------------------------------------------------===//

// The head dims are static: the kernels are specialized for them.
func.func @f(%q: tensor<1x4x128x?xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query head dim must be static}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x?xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x?xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{key head dim must be static}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x?xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x?xf16>) {
  // expected-error @below {{value head dim must be static}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x?xf16>)
      -> (tensor<1x4x128x?xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x60xf16>, %k: tensor<1x4x128x60xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{unsupported query/key head dim 60: expected a multiple of 8 in [8, 256]}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x60xf16>, tensor<1x4x128x60xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x512xf16>, %k: tensor<1x4x128x512xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{unsupported query/key head dim 512: expected a multiple of 8 in [8, 256]}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x512xf16>, tensor<1x4x128x512xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x12xf16>) {
  // expected-error @below {{unsupported value head dim 12: expected a multiple of 8 in [8, 256]}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x12xf16>)
      -> (tensor<1x4x128x12xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x0xf16>, %k: tensor<1x4x128x0xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{unsupported query/key head dim 0: expected a multiple of 8 in [8, 256]}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x0xf16>, tensor<1x4x128x0xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention: head counts (grouped-query attention)
//===----------------------------------------------------------------------===//

// Query head h reads key/value head h / (Hq / Hkv).
func.func @f(%q: tensor<1x8x128x64xf16>, %k: tensor<1x3x128x64xf16>, %v: tensor<1x3x128x64xf16>) {
  // expected-error @below {{query head count (8) must be a multiple of the key/value head count (3)}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x8x128x64xf16>, tensor<1x3x128x64xf16>, tensor<1x3x128x64xf16>)
      -> (tensor<1x8x128x64xf16>, tensor<1x8x128xf32>)
  return
}

// -----

// Fewer query heads than key/value heads.
func.func @f(%q: tensor<1x2x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query head count (2) must be a multiple of the key/value head count (4)}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x2x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x2x128x64xf16>, tensor<1x2x128xf32>)
  return
}

// -----

// No query head: the group size Hq / Hkv would be 0.
func.func @f(%q: tensor<1x0x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query head count must be positive}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x0x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x0x128x64xf16>, tensor<1x0x128xf32>)
  return
}

// -----

// The head counts are checked against the static sizes of every tensor.
func.func @f(%q: tensor<1x?x128x64xf16>, %k: tensor<1x?x128x64xf16>, %v: tensor<1x3x128x64xf16>) {
  // expected-error @below {{query head count (8) must be a multiple of the key/value head count (3)}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x?x128x64xf16>, tensor<1x?x128x64xf16>, tensor<1x3x128x64xf16>)
      -> (tensor<1x8x128x64xf16>, tensor<1x?x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x0x128x64xf16>, %v: tensor<1x0x128x64xf16>) {
  // expected-error @below {{key/value head count must be positive}}
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<1x4x128x64xf16>, tensor<1x0x128x64xf16>, tensor<1x0x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention: attributes
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{scale must be positive and finite, got 0.000000e+00}}
  %out, %lse = fa.attention %q, %k, %v scale 0.0
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{scale must be positive and finite, got -1.250000e-01}}
  %out, %lse = fa.attention %q, %k, %v scale -0.125
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// +inf, as an f32 bit pattern.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{scale must be positive and finite, got INF}}
  %out, %lse = fa.attention %q, %k, %v scale 0x7F800000
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// NaN.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{scale must be positive and finite, got nan}}
  %out, %lse = fa.attention %q, %k, %v scale 0x7FC00000
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{softcap must be positive and finite, got 0.000000e+00}}
  %out, %lse = fa.attention %q, %k, %v softcap 0.0
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>) {
  // expected-error @below {{softcap must be positive and finite, got -3.000000e+01}}
  %out, %lse = fa.attention %q, %k, %v softcap -30.0
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// Mask operands without a mask (generic form).
func.func @f(%q: tensor<1x4x128x64xf16>, %l: i64) {
  // expected-error @below {{has 2 mask operands but no mask to take them}}
  %out:2 = "fa.attention"(%q, %q, %q, %l, %l) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 2, 0, 0>}> ({}, {})
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, i64, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// The mask attribute must implement the mask interface (generic form).
func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{Invalid attribute `mask` in property conversion: array<i64: 16, 0>}}
  %out:2 = "fa.attention"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0>, mask = array<i64: 16, 0>}> ({}, {})
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{expected a mask attribute (implementing MaskAttrInterface), got #fa.kernel_config}}
  %out, %lse = fa.attention %q, %q, %q mask(#fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %l: i64) {
  // expected-error @below {{mask #fa.mask<window ?, ?> takes 2 run-time window sizes (one i64 per '?'), got 1 mask operands}}
  %out, %lse = fa.attention %q, %q, %q mask<window ?, ?>(%l)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %l: i64) {
  // expected-error @below {{mask #fa.mask<window ?, 0> takes 1 run-time window sizes (one i64 per '?'), got 2 mask operands}}
  %out, %lse = fa.attention %q, %q, %q mask<window ?, 0>(%l, %l)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, i64, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %l: i64) {
  // expected-error @below {{mask #fa.mask<causal> takes 0 run-time window sizes (one i64 per '?'), got 1 mask operands}}
  %out, %lse = fa.attention %q, %q, %q mask<causal>(%l)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, i64)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %l: i32) {
  // expected-error @below {{operand #3 must be variadic of 64-bit signless integer, but got 'i32'}}
  %out, %lse = fa.attention %q, %q, %q mask<window ?, ?>(%l, %l)
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, i32, i32)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>, %l: i64) {
  // expected-error @below {{a mask needs the masked(q_start, k_start, q_len, k_len) operands}}
  %a, %mx, %sm = fa.online_attention %t, %t, %t into %acc, %m, %m mask<window ?, ?>(%l, %l) scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{expected 'none', 'causal' or 'window'}}
  %out, %lse = fa.attention %q, %q, %q mask<triangle>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{expected ','}}
  %out, %lse = fa.attention %q, %q, %q mask<window 16>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{expected '>'}}
  %out, %lse = fa.attention %q, %q, %q mask<window 16, 0, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{window bounds must be >= 0, or 'inf' for unbounded, got -2}}
  %out, %lse = fa.attention %q, %q, %q mask<window -2, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// -1 was the old syntax's unbounded side: now `inf`.
func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{window bounds must be >= 0, or 'inf' for unbounded, got -1}}
  %out, %lse = fa.attention %q, %q, %q mask<window -1, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// Window bounds fit in i32 (the GPU kernels compute the mask in i32). The
// fuzzer's INT64_MAX was also DenseMap's empty key in fa-specialize-masks.
func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{window bounds must be at most 2147483647 (the GPU kernels compute the mask in i32), got 9223372036854775807}}
  %out, %lse = fa.attention %q, %q, %q mask<window 9223372036854775807, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{window bounds must be at most 2147483647 (the GPU kernels compute the mask in i32), got 2147483648}}
  %out, %lse = fa.attention %q, %q, %q mask<window inf, 2147483648>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

// The scale is an f32 attribute (generic form).
func.func @f(%q: tensor<1x4x128x64xf16>) {
  // expected-error @below {{attribute 'scale' failed to satisfy constraint: 32-bit float attribute}}
  %out:2 = "fa.attention"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0>, scale = 1.250000e-01 : f64}> ({}, {})
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention: score_mod, mask_mod and captures
//===----------------------------------------------------------------------===//

// Captures are read by a modifier: without one they are an error.
func.func @f(%q: tensor<1x4x16x64xf32>, %t: tensor<4xf32>) {
  // expected-error @below {{has 1 captures but no score_mod or mask_mod to read them}}
  %o, %l = fa.attention %q, %q, %q captures(%t)
      
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<4xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// Captures are ranked tensors (ODS).
func.func @f(%q: tensor<1x4x16x64xf32>, %t: tensor<*xf32>) {
  // expected-error @below {{operand #3 must be variadic of ranked tensor of any type values, but got 'tensor<*xf32>'}}
  %o, %l = fa.attention %q, %q, %q captures(%t)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<*xf32>) {
        fa.yield %s : f32
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<*xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The score_mod takes the score, the four indices, then the captures.
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{score_mod must take (f32 score, index b, index h, index q_idx, index kv_idx) and then the 0 captures, got 4 arguments}}
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index) {
        fa.yield %s : f32
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The score is f32.
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{score_mod argument #0 (score) must be 'f32', got 'f16'}}
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f16, %b: index, %h: index, %i: index, %j: index) {
        %r = arith.extf %s : f16 to f32
        fa.yield %r : f32
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The indices are index values.
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{score_mod argument #2 (h) must be 'index', got 'i32'}}
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: i32, %i: index, %j: index) {
        fa.yield %s : f32
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// A capture's argument has the capture's type.
func.func @f(%q: tensor<1x4x16x64xf32>, %t: tensor<4xf32>) {
  // expected-error @below {{mask_mod argument #4 must have the type of capture #0, 'tensor<4xf32>', got 'tensor<8xf32>'}}
  %o, %l = fa.attention %q, %q, %q captures(%t)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %c: tensor<8xf32>) {
        %t = arith.constant true
        fa.yield %t : i1
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<4xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The mask_mod takes the four indices, then the captures.
func.func @f(%q: tensor<1x4x16x64xf32>, %t: tensor<4xf32>) {
  // expected-error @below {{mask_mod must take (index b, index h, index q_idx, index kv_idx) and then the 1 captures, got 6 arguments}}
  %o, %l = fa.attention %q, %q, %q captures(%t)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %c: tensor<4xf32>, %x: index) {
        %t = arith.constant true
        fa.yield %t : i1
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<4xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The score_mod yields an f32 score.
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{score_mod must yield 'f32', got 'f16'}}
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %r = arith.truncf %s : f32 to f16
        fa.yield %r : f16
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The mask_mod yields an i1.
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{mask_mod must yield 'i1', got 'index'}}
  %o, %l = fa.attention %q, %q, %q
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        fa.yield %i : index
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// A modifier region ends with fa.yield.
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{score_mod must end with fa.yield}}
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        llvm.unreachable
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// Modifier ops are free of side effects (an allocation is not).
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{mask_mod must be free of side effects (reads allowed), got 'memref.alloc'}}
  %o, %l = fa.attention %q, %q, %q
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %m = memref.alloc() : memref<4xi1>
        %t = arith.constant true
        fa.yield %t : i1
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// A modifier is one block (ODS).
func.func @f(%q: tensor<1x4x16x64xf32>) {
  // expected-error @below {{region #0 ('score_mod') failed to verify constraint: region with at most 1 blocks}}
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        cf.br ^bb1
      ^bb1:
        fa.yield %s : f32
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The op is isolated from above: a value from outside comes in as a capture.
func.func @f(%q: tensor<1x4x16x64xf32>, %x: f32) {
  %o, %l = fa.attention %q, %q, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        // expected-error @below {{use of undeclared SSA value name}}
        %r = arith.addf %s, %x : f32
        fa.yield %r : f32
      }
      : (tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>, tensor<1x4x16x64xf32>)
      -> (tensor<1x4x16x64xf32>, tensor<1x4x16xf32>)
  return
}

// -----

// The backward's score_mod_grad differentiates its score_mod.
func.func @f(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) {
  // expected-error @below {{has a score_mod_grad but no score_mod to differentiate}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod_grad(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        fa.yield %s : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return
}

// -----

// The score_mod_grad has the score_mod's signature.
func.func @f(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) {
  // expected-error @below {{score_mod_grad argument #0 (score) must be 'f32', got 'index'}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        fa.yield %s : f32
      }
      score_mod_grad(%s: index, %b: index, %h: index, %i: index, %j: index) {
        %one = arith.constant 1.0 : f32
        fa.yield %one : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return
}

// -----

// fa.yield terminates the modifiers of the attention ops (and their tile
// step) only.
func.func @f(%x: f32) {
  // expected-error @below {{'fa.yield' op expects parent op to be one of 'fa.attention, fa.attention_backward, fa.online_attention, fa.attention_backward_step'}}
  fa.yield %x : f32
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention_backward
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{dv must have element type 'f16', got 'bf16'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xbf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf32>) {
  // expected-error @below {{dout must have element type 'f16', got 'f32'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf32>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

// The gradients have the element type of the inputs.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{dq must have element type 'f16', got 'f32'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf32>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

// dk and dv have the key/value head count, not the query one.
func.func @f(%q: tensor<1x8x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x8x128x64xf16>, %lse: tensor<1x8x128xf32>, %dout: tensor<1x8x128x64xf16>) {
  // expected-error @below {{key/value head count mismatch: key has 4 but dk has 8}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x8x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x8x128x64xf16>, tensor<1x8x128xf32>, tensor<1x8x128x64xf16>)
      -> (tensor<1x8x128x64xf16>, tensor<1x8x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x64x64xf16>) {
  // expected-error @below {{query sequence length mismatch: query has 128 but dout has 64}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x64x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x64xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{query sequence length mismatch: query has 128 but lse has 64}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x64xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x32xf16>,
             %out: tensor<1x4x128x32xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x32xf16>) {
  // expected-error @below {{value head dim mismatch: value has 32 but dv has 64}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x32xf16>,
         tensor<1x4x128x32xf16>, tensor<1x4x128xf32>, tensor<1x4x128x32xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{head dim mismatch: query has 64 but dq has 32}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x32xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{key/value sequence length mismatch: key has 128 but dk has 96}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x96x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

// dq, dk and dv have exactly the types of q, k and v: agreeing sizes that
// are static in one and dynamic in the other are not enough.
func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{dq must have the type of query, 'tensor<1x4x128x64xf16>', got 'tensor<?x4x128x64xf16>'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<?x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

// More static than the input is rejected too.
func.func @f(%q: tensor<1x4x?x64xf16>, %k: tensor<1x4x?x64xf16>, %v: tensor<1x4x?x64xf16>,
             %out: tensor<1x4x?x64xf16>, %lse: tensor<1x4x?xf32>, %dout: tensor<1x4x?x64xf16>) {
  // expected-error @below {{dk must have the type of key, 'tensor<1x4x?x64xf16>', got 'tensor<1x4x128x64xf16>'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x?x64xf16>, tensor<1x4x?x64xf16>, tensor<1x4x?x64xf16>,
         tensor<1x4x?x64xf16>, tensor<1x4x?xf32>, tensor<1x4x?x64xf16>)
      -> (tensor<1x4x?x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x?x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x32xf16>,
             %out: tensor<?x?x?x32xf16>, %lse: tensor<?x?x?xf32>, %dout: tensor<?x?x?x32xf16>) {
  // expected-error @below {{dv must have the type of value, 'tensor<?x?x?x32xf16>', got 'tensor<2x?x?x32xf16>'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x32xf16>,
         tensor<?x?x?x32xf16>, tensor<?x?x?xf32>, tensor<?x?x?x32xf16>)
      -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<2x?x?x32xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf16>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{operand #4 must be 3D tensor of f32 values, but got 'tensor<1x4x128xf16>'}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{mask #fa.mask<window ?, 0> takes 1 run-time window sizes (one i64 per '?'), got 0 mask operands}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout mask<window ?, 0> deterministic
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{window bounds must be at most 2147483647 (the GPU kernels compute the mask in i32), got 9223372036854775807}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout mask<window 16, 9223372036854775807>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>, %v: tensor<1x4x128x64xf16>,
             %out: tensor<1x4x128x64xf16>, %lse: tensor<1x4x128xf32>, %dout: tensor<1x4x128x64xf16>) {
  // expected-error @below {{scale must be positive and finite, got -1.000000e+00}}
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout scale -1.0
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.online_attention
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xbf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{query, key and value must have the same element type, got 'f16', 'f16' and 'bf16'}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xbf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

// A modifier reads the tile's global positions, batch and head.
func.func @f(%q: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %max: tensor<64xf32>,
             %i: index) {
  // expected-error @below {{with a score_mod or mask_mod needs the tile's positions (masked(...)) and its batch and head (at(...))}}
  %a, %m, %s = fa.online_attention %q, %q, %q into %acc, %max, %max masked(%i, %i, %i, %i) scale 0.125
      mask_mod(%b: index, %h: index, %r: index, %c: index) {
        %v = arith.cmpi ule, %c, %r : index
        fa.yield %v : i1
      }
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %max: tensor<64xf32>,
             %i: index, %t: tensor<4xf32>) {
  // expected-error @below {{score_mod must take (f32 score, index b, index h, index q_idx, index kv_idx) and then the 1 captures, got 5 arguments}}
  %a, %m, %s = fa.online_attention %q, %q, %q into %acc, %max, %max masked(%i, %i, %i, %i) at(%i, %i) scale 0.125
      captures(%t : tensor<4xf32>)
      score_mod(%x: f32, %b: index, %h: index, %r: index, %c: index) {
        fa.yield %x : f32
      }
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

// The state is f32 whatever the input element type.
func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf16>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{operand #3 must be 2D tensor of f32 values, but got 'tensor<64x64xf16>'}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf16>, %sum: tensor<64xf16>, %i: index) {
  // expected-error @below {{operand #4 must be 1D tensor of f32 values, but got 'tensor<64xf16>'}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf16>
  return
}

// -----

func.func @f(%q: tensor<64x64x1xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{operand #0 must be 2D tensor of f16, bf16 or f32 values, but got 'tensor<64x64x1xf16>'}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64x1xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xi32>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{operand #0 must be 2D tensor of f16, bf16 or f32 values, but got 'tensor<64x64xi32>'}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xi32>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x32xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{head dim mismatch: query has 64 but key has 32}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xf16>, tensor<64x32xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{key block size mismatch: key has 32 but value has 64}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x32xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{value head dim mismatch: value has 32 but acc has 64}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x32xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<32x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{query block size mismatch: query has 32 but acc has 64}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<32x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

// All static sizes of one dimension must agree, even when the query
// block is dynamic.
func.func @f(%q: tensor<?x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<32xf32>, %sum: tensor<32xf32>, %i: index) {
  // expected-error @below {{query block size mismatch: acc has 64 but max has 32}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum scale 0.125
      : tensor<?x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{a mask needs the masked(q_start, k_start, q_len, k_len) operands}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum mask<causal> scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{a mask needs the masked(q_start, k_start, q_len, k_len) operands}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum mask<window 8, 8> scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

// The tile-level ops carry the op's window: the same limit.
func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{window bounds must be at most 2147483647 (the GPU kernels compute the mask in i32), got 9223372036854775807}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum masked(%i, %i, %i, %i) mask<window 9223372036854775807, 9223372036854775807> scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{scale must be positive and finite, got 0.000000e+00}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum masked(%i, %i, %i, %i) scale 0.0
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>, %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
             %max: tensor<64xf32>, %sum: tensor<64xf32>, %i: index) {
  // expected-error @below {{softcap must be positive and finite, got -1.000000e+00}}
  %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum softcap -1.0 scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

// The mask takes all four index operands (generic form).
func.func @f(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>,
             %i: index) {
  // expected-error @below {{masked needs all four of q_start, k_start, q_len and k_len}}
  %r:3 = "fa.online_attention"(%t, %t, %t, %acc, %m, %m, %i, %i)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        scale = 1.250000e-01 : f32}> ({}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>, index, index)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// The updated state has the type of the running state (generic form).
func.func @f(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>) {
  // expected-error @below {{failed to verify that all of {acc, new_acc} have same type}}
  %r:3 = "fa.online_attention"(%t, %t, %t, %acc, %m, %m)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        scale = 1.250000e-01 : f32}> ({}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
      -> (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @f(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>,
             %s: tensor<?xf32>) {
  // expected-error @below {{failed to verify that all of {max, sum, new_max, new_sum} have same type}}
  %r:3 = "fa.online_attention"(%t, %t, %t, %acc, %m, %s)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        scale = 1.250000e-01 : f32}> ({}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64x64xf32>, tensor<64xf32>, tensor<?xf32>)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// The scale is required (generic form).
func.func @f(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>) {
  // expected-error @below {{needs a scale: a constant or an f32 operand (scale %s)}}
  %r:3 = "fa.online_attention"(%t, %t, %t, %acc, %m, %m)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>}> ({}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.online_attention_finalize
//===----------------------------------------------------------------------===//

func.func @f(%acc: tensor<64x64xf32>, %max: tensor<32xf32>, %sum: tensor<32xf32>) {
  // expected-error @below {{query block size mismatch: acc has 64 but max has 32}}
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<64x64xf32>, tensor<32xf32> -> tensor<64x64xf16>
  return
}

// -----

func.func @f(%acc: tensor<64x64xf32>, %max: tensor<64xf32>, %sum: tensor<64xf32>) {
  // expected-error @below {{query block size mismatch: acc has 64 but out has 32}}
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<32x64xf16>
  return
}

// -----

func.func @f(%acc: tensor<64x64xf32>, %max: tensor<64xf32>, %sum: tensor<64xf32>) {
  // expected-error @below {{value head dim mismatch: acc has 64 but out has 32}}
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x32xf16>
  return
}

// -----

// All static sizes of one dimension must agree, even when acc is dynamic.
func.func @f(%acc: tensor<?x64xf32>, %max: tensor<16xf32>, %sum: tensor<16xf32>) {
  // expected-error @below {{query block size mismatch: max has 16 but out has 32}}
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<?x64xf32>, tensor<16xf32> -> tensor<32x64xf16>
  return
}

// -----

func.func @f(%acc: tensor<64x64xf32>, %max: tensor<64xf32>, %sum: tensor<64xf32>) {
  // expected-error @below {{result #0 must be 2D tensor of f16, bf16 or f32 values, but got 'tensor<64x64xi8>'}}
  %out, %lse = fa.online_attention_finalize %acc, %max, %sum
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xi8>
  return
}

// -----

func.func @f(%acc: tensor<64x64xf32>, %m: tensor<64xf32>) {
  // expected-error @below {{failed to verify that all of {max, sum, lse} have same type}}
  %r:2 = "fa.online_attention_finalize"(%acc, %m, %m)
      : (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
      -> (tensor<64x64xf16>, tensor<?xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention_backward_step
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<64x64x1xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{operand #0 must be 2D tensor of f16, bf16 or f32 values, but got 'tensor<64x64x1xf16>'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64x1xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xi32>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{operand #1 must be 2D tensor of f16, bf16 or f32 values, but got 'tensor<32x64xi32>'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xi32>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xbf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{query, key, value and dout must have the same element type, got 'f16', 'f16', 'f16' and 'bf16'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xbf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

// lse and delta are f32 whatever the input element type.
func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf16>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{operand #4 must be 1D tensor of f32 values, but got 'tensor<64xf16>'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf16>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

// The accumulators are f32 whatever the input element type.
func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf16>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{operand #6 must be 2D tensor of f32 values, but got 'tensor<32x64xf16>'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf16>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xbf16>, %i: index) {
  // expected-error @below {{operand #8 must be 2D tensor of f32 values, but got 'tensor<64x64xbf16>'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xbf16>
  return
}

// -----

// A step must update some gradient.
func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{needs an accumulator: dkv(dk_acc, dv_acc), dq(dq_acc) or both}}
  fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
       scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<32x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{query block size mismatch: query has 64 but dout has 32}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<32xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{query block size mismatch: query has 64 but lse has 32}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<32xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<32x64xf32>, %i: index) {
  // expected-error @below {{query block size mismatch: query has 64 but dq_acc has 32}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>
  return
}

// -----

// All static sizes of one dimension must agree, even when the query block is dynamic.
func.func @f(%q: tensor<?x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<16xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{query block size mismatch: dout has 64 but lse has 16}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<?x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<16xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<64x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{key block size mismatch: key has 32 but value has 64}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<64x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{key block size mismatch: key has 32 but dk_acc has 64}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<64x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<16x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{key block size mismatch: key has 32 but dv_acc has 16}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<16x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x32xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{head dim mismatch: query has 64 but key has 32}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x32xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x128xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{head dim mismatch: query has 64 but dk_acc has 128}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x128xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x32xf32>, %i: index) {
  // expected-error @below {{head dim mismatch: query has 64 but dq_acc has 32}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x32xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x32xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{value head dim mismatch: value has 64 but dout has 32}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x32xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x128xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{value head dim mismatch: value has 64 but dv_acc has 128}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x128xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{a mask needs the masked(q_start, k_start, q_len, k_len) operands}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) mask<causal> scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{a mask needs the masked(q_start, k_start, q_len, k_len) operands}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) mask<window 8, 8> scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @+2 {{expected '>'}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) masked(%i, %i, %i, %i) mask<window 8, 8, 8> scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @+2 {{window bounds must be >= 0, or 'inf' for unbounded, got -2}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) masked(%i, %i, %i, %i) mask<window -2, 8> scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @+2 {{window bounds must be at most 2147483647 (the GPU kernels compute the mask in i32), got 4294967296}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) masked(%i, %i, %i, %i) mask<window 8, 4294967296> scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{scale must be positive and finite, got -1.250000e-01}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) scale -0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{softcap must be positive and finite, got 0.000000e+00}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) softcap 0.0 scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

func.func @f(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>, %v: tensor<32x64xf16>, %do: tensor<64x64xf16>,
             %lse: tensor<64xf32>, %dk: tensor<32x64xf32>, %dv: tensor<32x64xf32>,
             %dq: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{softcap must be positive and finite, got INF}}
  %a, %b, %c = fa.attention_backward_step %q, %k, %v, %do, %lse, %lse
      dkv(%dk, %dv) dq(%dq) softcap 0x7F800000 scale 0.125
      : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>, tensor<64x64xf16>, tensor<64xf32>
      -> tensor<32x64xf32>, tensor<32x64xf32>, tensor<64x64xf32>
  return
}

// -----

// dk_acc and dv_acc come together (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{dk_acc and dv_acc must be given together, as dkv(dk_acc, dv_acc)}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>)
      -> (tensor<64x64xf32>)
  return
}

// -----

// dv_acc alone (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{dk_acc and dv_acc must be given together, as dkv(dk_acc, dv_acc)}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 0, 1, 0>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>)
      -> (tensor<64x64xf32>)
  return
}

// -----

// Each result is present exactly when its accumulator is (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{result new_dq must be present exactly when dq_acc is}}
  %x:3 = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 1, 1, 1>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>, tensor<64x64xf32>)
      -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
  return
}

// -----

// A missing result (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{result new_dk must be present exactly when dk_acc is}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 0, 1, 0>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>, tensor<64x64xf32>)
      -> (tensor<64x64xf32>)
  return
}

// -----

// A result has the type of its accumulator (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{result new_dq must have the type of dq_acc, 'tensor<64x64xf32>', got 'tensor<?x64xf32>'}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 0, 0, 1>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>)
      -> (tensor<?x64xf32>)
  return
}

// -----

// The mask takes all four index operands (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{masked needs all four of q_start, k_start, q_len and k_len}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc, %i, %i)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 0, 0, 1>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>, index, index)
      -> (tensor<64x64xf32>)
  return
}

// -----

// The scale is required (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %acc: tensor<64x64xf32>, %i: index) {
  // expected-error @below {{needs a scale: a constant or an f32 operand (scale %s)}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %r, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 0, 0, 1>, mask = #fa.mask<causal>}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<64xf32>,
         tensor<64x64xf32>)
      -> (tensor<64x64xf32>)
  return
}

// -----

// delta has the type of lse (generic form).
func.func @f(%t: tensor<64x64xf16>, %r: tensor<64xf32>, %d: tensor<?xf32>, %acc: tensor<64x64xf32>) {
  // expected-error @below {{failed to verify that all of {lse, delta} have same type}}
  %x = "fa.attention_backward_step"(%t, %t, %t, %t, %r, %d, %acc)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>,
        resultSegmentSizes = array<i32: 0, 0, 1>, scale = 1.250000e-01 : f32}> ({}, {}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64xf32>, tensor<?xf32>, tensor<64x64xf32>)
      -> (tensor<64x64xf32>)
  return
}

// -----

// A score scalar is a constant or an operand, not both (generic form).
func.func @f(%q: tensor<1x4x128x64xf16>, %s: f32) {
  // expected-error @below {{scale must be an attribute or an operand, not both}}
  %out:2 = "fa.attention"(%q, %q, %q, %s)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 0, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {})
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, f32)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

// -----

func.func @f(%t: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %m: tensor<64xf32>,
             %c: f32) {
  // expected-error @below {{softcap must be an attribute or an operand, not both}}
  %r:3 = "fa.online_attention"(%t, %t, %t, %acc, %m, %m, %c)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0>,
        scale = 1.250000e-01 : f32, softcap = 2.000000e+00 : f32}> ({}, {})
      : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
         tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>, f32)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

// The scale operand is an f32 value.
func.func @f(%q: tensor<1x4x128x64xf16>, %s: f16) {
  // expected-error @below {{operand #3 must be 32-bit float, but got 'f16'}}
  %out:2 = "fa.attention"(%q, %q, %q, %s)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 0, 0, 0>}> ({}, {})
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, f16)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return
}

//===----------------------------------------------------------------------===//
// fa.attention_merge
//===----------------------------------------------------------------------===//

// -----

func.func @merge_none() -> (tensor<1x8x1x128xf32>, tensor<1x8x1xf32>) {
  // expected-error @+1 {{merges at least one partial result}}
  %o, %l = "fa.attention_merge"() : () -> (tensor<1x8x1x128xf32>, tensor<1x8x1xf32>)
  return %o, %l : tensor<1x8x1x128xf32>, tensor<1x8x1xf32>
}

// -----

func.func @merge_rows(%o0: tensor<1x8x1x128xf32>, %o1: tensor<1x8x2x128xf32>,
                      %l: tensor<1x8x1xf32>) {
  // expected-error @+1 {{query count mismatch: out has 1 but outs[1] has 2}}
  %o, %m = fa.attention_merge out(%o0, %o1) lse(%l, %l) : (tensor<1x8x1x128xf32>, tensor<1x8x2x128xf32>), (tensor<1x8x1xf32>, tensor<1x8x1xf32>) -> tensor<1x8x1x128xf32>, tensor<1x8x1xf32>
  return
}

// -----

func.func @merge_dv(%o0: tensor<1x8x1x128xf32>, %l: tensor<1x8x1xf32>) {
  // expected-error @+1 {{value head dim mismatch: out has 64 but outs[0] has 128}}
  %o, %m = fa.attention_merge out(%o0) lse(%l) : (tensor<1x8x1x128xf32>), (tensor<1x8x1xf32>) -> tensor<1x8x1x64xf32>, tensor<1x8x1xf32>
  return
}

// -----

func.func @merge_heads(%o0: tensor<1x8x1x128xf32>, %l: tensor<1x4x1xf32>) {
  // expected-error @+1 {{head count mismatch: out has 8 but lses[0] has 4}}
  %o, %m = fa.attention_merge out(%o0) lse(%l) : (tensor<1x8x1x128xf32>), (tensor<1x4x1xf32>) -> tensor<1x8x1x128xf32>, tensor<1x8x1xf32>
  return
}

// -----

func.func @merge_counts(%o0: tensor<1x8x1x128xf32>, %l: tensor<1x8x1xf32>) {
  // expected-error @+1 {{custom op 'fa.attention_merge' number of operands and types do not match: got 2 operands and 1 types}}
  %o, %m = fa.attention_merge out(%o0) lse(%l, %l) : (tensor<1x8x1x128xf32>), (tensor<1x8x1xf32>) -> tensor<1x8x1x128xf32>, tensor<1x8x1xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fa.attention_merge_splits
//===----------------------------------------------------------------------===//

func.func @merge_splits_count(%o: tensor<1x8x3x1x128xf32>, %l: tensor<1x8x2x1xf32>) {
  // expected-error @+1 {{split count mismatch: outs has 3 but lses has 2}}
  %out, %lse = fa.attention_merge_splits %o, %l : tensor<1x8x3x1x128xf32>, tensor<1x8x2x1xf32> -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return
}

// -----

func.func @merge_splits_rows(%o: tensor<1x8x3x2x128xf32>, %l: tensor<1x8x3x2xf32>) {
  // expected-error @+1 {{query count mismatch: outs has 2 but out has 1}}
  %out, %lse = fa.attention_merge_splits %o, %l : tensor<1x8x3x2x128xf32>, tensor<1x8x3x2xf32> -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return
}

// -----

func.func @merge_splits_heads(%o: tensor<1x8x3x1x128xf32>, %l: tensor<1x8x3x1xf32>) {
  // expected-error @+1 {{head count mismatch: outs has 8 but lse has 4}}
  %out, %lse = fa.attention_merge_splits %o, %l : tensor<1x8x3x1x128xf32>, tensor<1x8x3x1xf32> -> tensor<1x8x1x128xbf16>, tensor<1x4x1xf32>
  return
}

// -----

func.func @merge_splits_dv(%o: tensor<1x8x3x1x128xf32>, %l: tensor<1x8x3x1xf32>) {
  // expected-error @+1 {{value head dim mismatch: outs has 128 but out has 64}}
  %out, %lse = fa.attention_merge_splits %o, %l : tensor<1x8x3x1x128xf32>, tensor<1x8x3x1xf32> -> tensor<1x8x1x64xbf16>, tensor<1x8x1xf32>
  return
}

// -----

func.func @merge_splits_type(%o: tensor<1x8x3x1x128xbf16>, %l: tensor<1x8x3x1xf32>) {
  // expected-error @+1 {{operand #0 must be 5D tensor of f32 values}}
  %out, %lse = fa.attention_merge_splits %o, %l : tensor<1x8x3x1x128xbf16>, tensor<1x8x3x1xf32> -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return
}

//===----------------------------------------------------------------------===//
// fa.attention_varlen
//===----------------------------------------------------------------------===//

// -----

// The sequence offsets are i32.
func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<?xi64>, %ck: tensor<?xi32>, %m: index) {
  // expected-error @below {{operand #3 must be 1D tensor of i32 values, but got 'tensor<?xi64>'}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<?xi64>, tensor<?xi32>, index)
      -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  return
}

// -----

// Both offset tensors describe the same B sequences.
func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<3xi32>, %ck: tensor<4xi32>, %m: index) {
  // expected-error @below {{sequence offset count mismatch: cu_seqlens_q has 3 but cu_seqlens_k has 4}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<3xi32>, tensor<4xi32>, index)
      -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  return
}

// -----

func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<0xi32>, %ck: tensor<0xi32>, %m: index) {
  // expected-error @below {{cu_seqlens_q must have at least 1 element (B + 1 offsets for B sequences), got 0}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<0xi32>, tensor<0xi32>, index)
      -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  return
}

// -----

// lse is [Hq, Tq].
func.func @f(%q: tensor<4x10x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) {
  // expected-error @below {{query token count mismatch: query has 10 but lse has 12}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<4x10x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index)
      -> (tensor<4x10x64xf16>, tensor<4x12xf32>)
  return
}

// -----

func.func @f(%q: tensor<6x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) {
  // expected-error @below {{query head count (6) must be a multiple of the key/value head count (4)}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<6x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index)
      -> (tensor<6x?x64xf16>, tensor<6x?xf32>)
  return
}

// -----

func.func @f(%q: tensor<4x?x60xf16>, %k: tensor<4x?x60xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) {
  // expected-error @below {{unsupported query/key head dim 60: expected a multiple of 8 in [8, 256]}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<4x?x60xf16>, tensor<4x?x60xf16>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index)
      -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  return
}

// -----

func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) {
  // expected-error @below {{out must have element type 'f16', got 'bf16'}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m)
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index)
      -> (tensor<4x?x64xbf16>, tensor<4x?xf32>)
  return
}

// -----

func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %v: tensor<4x?x64xf16>, %cq: tensor<?xi32>, %ck: tensor<?xi32>, %m: index) {
  // expected-error @below {{scale must be positive and finite, got -1.000000e+00}}
  %o, %l = fa.attention_varlen %q, %k, %v seqlens(%cq, %ck) max_seqlen_q(%m) scale -1.0
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index)
      -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  return
}

// -----

// The gradients have exactly the inputs' types.
func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %l: tensor<4x?xf32>, %cq: tensor<?xi32>, %m: index) {
  // expected-error @below {{dk must have the type of key, 'tensor<4x?x64xf16>', got 'tensor<4x7x64xf16>'}}
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %k, %q, %l, %q seqlens(%cq, %cq) max_seqlen_q(%m) max_seqlen_k(%m)
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?xf32>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index, index)
      -> (tensor<4x?x64xf16>, tensor<4x7x64xf16>, tensor<4x?x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<4x?x64xf16>, %k: tensor<4x?x64xf16>, %l: tensor<4x9xf32>, %d: tensor<4x8x64xf16>, %cq: tensor<?xi32>, %m: index) {
  // expected-error @below {{query token count mismatch: dout has 8 but lse has 9}}
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %k, %q, %l, %d seqlens(%cq, %cq) max_seqlen_q(%m) max_seqlen_k(%m)
      : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x9xf32>, tensor<4x8x64xf16>, tensor<?xi32>, tensor<?xi32>, index, index)
      -> (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>)
  return
}

//===----------------------------------------------------------------------===//
// fa.attention_paged
//===----------------------------------------------------------------------===//

// -----

func.func @f(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x?x64xf16>, %vp: tensor<?x4x16x64xf16>, %t: tensor<2x?xi32>, %n: tensor<2xi32>) {
  // expected-error @below {{page size (dimension 2 of key_pages) must be static}}
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n)
      : (tensor<2x4x1x64xf16>, tensor<?x4x?x64xf16>, tensor<?x4x16x64xf16>, tensor<2x?xi32>, tensor<2xi32>)
      -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x16x64xf16>, %vp: tensor<?x4x32x64xf16>, %t: tensor<2x?xi32>, %n: tensor<2xi32>) {
  // expected-error @below {{page size mismatch: key_pages has 16 but value_pages has 32}}
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n)
      : (tensor<2x4x1x64xf16>, tensor<?x4x16x64xf16>, tensor<?x4x32x64xf16>, tensor<2x?xi32>, tensor<2xi32>)
      -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x0x64xf16>, %vp: tensor<?x4x0x64xf16>, %t: tensor<2x?xi32>, %n: tensor<2xi32>) {
  // expected-error @below {{page size must be positive, got 0}}
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n)
      : (tensor<2x4x1x64xf16>, tensor<?x4x0x64xf16>, tensor<?x4x0x64xf16>, tensor<2x?xi32>, tensor<2xi32>)
      -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>)
  return
}

// -----

// One page-table row and one key count per batch.
func.func @f(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x16x64xf16>, %vp: tensor<?x4x16x64xf16>, %t: tensor<3x?xi32>, %n: tensor<2xi32>) {
  // expected-error @below {{batch size mismatch: query has 2 but page_table has 3}}
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n)
      : (tensor<2x4x1x64xf16>, tensor<?x4x16x64xf16>, tensor<?x4x16x64xf16>, tensor<3x?xi32>, tensor<2xi32>)
      -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x16x64xf16>, %vp: tensor<?x4x16x64xf16>, %t: tensor<2x?xi32>, %n: tensor<5xi32>) {
  // expected-error @below {{batch size mismatch: query has 2 but cache_seqlens has 5}}
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n)
      : (tensor<2x4x1x64xf16>, tensor<?x4x16x64xf16>, tensor<?x4x16x64xf16>, tensor<2x?xi32>, tensor<5xi32>)
      -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x8x1x64xf16>, %kp: tensor<?x3x16x64xf16>, %vp: tensor<?x3x16x64xf16>, %t: tensor<2x?xi32>, %n: tensor<2xi32>) {
  // expected-error @below {{query head count (8) must be a multiple of the key/value head count (3)}}
  %o, %l = fa.attention_paged %q, %kp, %vp pages(%t) seqlens(%n)
      : (tensor<2x8x1x64xf16>, tensor<?x3x16x64xf16>, tensor<?x3x16x64xf16>, tensor<2x?xi32>, tensor<2xi32>)
      -> (tensor<2x8x1x64xf16>, tensor<2x8x1xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x1x64xf16>, %kp: tensor<?x4x16x64xf16>, %vp: tensor<?x4x16x64xf16>, %t: tensor<2x?xi32>, %n: tensor<2xi32>, %l0: i64) {
  // expected-error @below {{has 1 mask operands but no mask to take them}}
  %o, %l = "fa.attention_paged"(%q, %kp, %vp, %t, %n, %l0) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 1>}>
      : (tensor<2x4x1x64xf16>, tensor<?x4x16x64xf16>, tensor<?x4x16x64xf16>, tensor<2x?xi32>, tensor<2xi32>, i64)
      -> (tensor<2x4x1x64xf16>, tensor<2x4x1xf32>)
  return
}

// -----

func.func @paged_key_block_dynamic_page(%p: tensor<?x8x?x128xbf16>, %t: tensor<?x?xi32>, %i: index) -> tensor<64x128xbf16> {
  // expected-error @below {{'fa.paged_key_block' op needs a static, positive page size (dim 2 of the pages), got 'tensor<?x8x?x128xbf16>'}}
  %k = fa.paged_key_block %p[%i, %i, %i] table(%t) limit(%i) : tensor<?x8x?x128xbf16>, tensor<?x?xi32> -> tensor<64x128xbf16>
  return %k : tensor<64x128xbf16>
}

// -----

func.func @paged_key_block_dynamic_rows(%p: tensor<?x8x16x128xbf16>, %t: tensor<?x?xi32>, %i: index) -> tensor<?x128xbf16> {
  // expected-error @below {{'fa.paged_key_block' op needs a static block shape, got 'tensor<?x128xbf16>'}}
  %k = fa.paged_key_block %p[%i, %i, %i] table(%t) limit(%i) : tensor<?x8x16x128xbf16>, tensor<?x?xi32> -> tensor<?x128xbf16>
  return %k : tensor<?x128xbf16>
}

// -----

func.func @paged_key_block_head_dim(%p: tensor<?x8x16x128xbf16>, %t: tensor<?x?xi32>, %i: index) -> tensor<64x64xbf16> {
  // expected-error @below {{'fa.paged_key_block' op block row length (64) must be the pages' head dim (128)}}
  %k = fa.paged_key_block %p[%i, %i, %i] table(%t) limit(%i) : tensor<?x8x16x128xbf16>, tensor<?x?xi32> -> tensor<64x64xbf16>
  return %k : tensor<64x64xbf16>
}

// -----

func.func @paged_key_block_element_type(%p: tensor<?x8x16x128xbf16>, %t: tensor<?x?xi32>, %i: index) -> tensor<64x128xf16> {
  // expected-error @below {{'fa.paged_key_block' op block element type 'f16' must be the pages' 'bf16'}}
  %k = fa.paged_key_block %p[%i, %i, %i] table(%t) limit(%i) : tensor<?x8x16x128xbf16>, tensor<?x?xi32> -> tensor<64x128xf16>
  return %k : tensor<64x128xf16>
}

// -----

// key_ranges: one [begin, end) per batch, query head and group of rows.
func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x3x2xi32>) {
  // expected-error @below {{key_ranges dimension 2 must be ceil(Nq / rows) = 2, got 3}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 64)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x3x2xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x2x2x2xi32>) {
  // expected-error @below {{key_ranges dimension 1 must be Hq = 4, got 2}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 64)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x2x2x2xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x2xi32>) {
  // expected-error @below {{key_ranges must be [B, Hq, ceil(Nq / rows), 2 or 4], got rank 3}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 64)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x2xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x?x2xi32>) {
  // expected-error @below {{key_ranges rows must be > 0, got 0}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 0)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x?x2xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x2x2xf32>) {
  // expected-error @below {{operand #3 must be ranked tensor of 32-bit signless integer values}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 64)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x2x2xf32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

// (Generic form) the ranges without their row count.
func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x2x2xi32>) {
  // expected-error @below {{key_ranges and key_range_rows go together}}
  %out:2 = "fa.attention"(%q, %q, %q, %r)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 1, 0>}> ({}, {})
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x2x2xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

// key_ranges: 2 columns (the key range) or 4 (and the fully visible one).
func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x2x3xi32>) {
  // expected-error @below {{key_ranges dimension 3 must be 2 (the key range) or 4 (and the fully visible range), got 3}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 64)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x2x3xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

func.func @f(%q: tensor<2x4x128x64xf16>, %r: tensor<2x4x2x?xi32>) {
  // expected-error @below {{key_ranges dimension 3 must be 2 (the key range) or 4 (and the fully visible range), got ?}}
  %out:2 = fa.attention %q, %q, %q key_ranges(%r rows 64)
      : (tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x128x64xf16>, tensor<2x4x2x?xi32>)
      -> (tensor<2x4x128x64xf16>, tensor<2x4x128xf32>)
  return
}

// -----

// query_ranges: per batch, kv head and group of keys (GQA 4:2: Hkv = 2).
func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x4x2x2xi32>) {
  // expected-error @below {{query_ranges dimension 1 must be Hkv = 2, got 4}}
  %g:3 = fa.attention_backward %q, %k, %k, %q, %l, %q query_ranges(%r rows 64)
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x4x2x2xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x2x4x2xi32>) {
  // expected-error @below {{query_ranges dimension 2 must be ceil(Nk / rows) = 2, got 4}}
  %g:3 = fa.attention_backward %q, %k, %k, %q, %l, %q query_ranges(%r rows 64)
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x2x4x2xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x2x2xi32>) {
  // expected-error @below {{query_ranges must be [B, Hkv, ceil(Nk / rows), 2], got rank 3}}
  %g:3 = fa.attention_backward %q, %k, %k, %q, %l, %q query_ranges(%r rows 64)
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x2x2xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x2x?x2xi32>) {
  // expected-error @below {{query_ranges rows must be > 0, got -1}}
  %g:3 = fa.attention_backward %q, %k, %k, %q, %l, %q query_ranges(%r rows -1)
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x2x?x2xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

// query_ranges have no fully visible columns (the backward kernels mask every block they visit).
func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x2x2x4xi32>) {
  // expected-error @below {{query_ranges dimension 3 must be 2 (the query range), got 4}}
  %g:3 = fa.attention_backward %q, %k, %k, %q, %l, %q query_ranges(%r rows 64)
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x2x2x4xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

// The backward's key_ranges are the forward's: per query head and group of query rows.
func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x4x4x4xi32>) {
  // expected-error @below {{key_ranges dimension 2 must be ceil(Nq / rows) = 2, got 4}}
  %g:3 = fa.attention_backward %q, %k, %k, %q, %l, %q key_ranges(%r rows 128)
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x4x4x4xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

// (Generic form) the query ranges without their row count.
func.func @f(%q: tensor<2x4x256x64xf16>, %k: tensor<2x2x128x64xf16>, %l: tensor<2x4x256xf32>, %r: tensor<2x2x2x2xi32>) {
  // expected-error @below {{query_ranges and query_range_rows go together}}
  %g:3 = "fa.attention_backward"(%q, %k, %k, %q, %l, %q, %r)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0>}> ({}, {}, {})
      : (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>, tensor<2x4x256x64xf16>, tensor<2x4x256xf32>, tensor<2x4x256x64xf16>, tensor<2x2x2x2xi32>)
      -> (tensor<2x4x256x64xf16>, tensor<2x2x128x64xf16>, tensor<2x2x128x64xf16>)
  return
}

// -----

// full_keys: where a mask_mod hides nothing, so only with one.
func.func @f(%q: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %max: tensor<64xf32>,
             %i: index) {
  // expected-error @below {{full_keys says where a mask_mod hides nothing; the step has no mask_mod}}
  %a:3 = fa.online_attention %q, %q, %q into %acc, %max, %max masked(%i, %i, %i, %i)
      at(%i, %i) full_keys(%i, %i) scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>, tensor<64xf32>
  return
}

// -----

// (Generic form) a begin without an end.
func.func @f(%q: tensor<64x64xf16>, %acc: tensor<64x64xf32>, %max: tensor<64xf32>,
             %i: index) {
  // expected-error @below {{full_keys takes a begin and an end}}
  %a:3 = "fa.online_attention"(%q, %q, %q, %acc, %max, %max, %i, %i, %i, %i, %i, %i, %i)
      <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0>,
        scale = 1.250000e-01 : f32}> ({}, {
      ^bb0(%b: index, %h: index, %x: index, %y: index):
        %t = arith.constant true
        fa.yield %t : i1
      }) : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf32>,
            tensor<64xf32>, tensor<64xf32>, index, index, index, index, index, index, index)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}
