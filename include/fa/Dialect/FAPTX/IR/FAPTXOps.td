//===- FAPTXOps.td - PTX-only instructions as ops ----------*- tablegen -*-===//
//
// The `faptx` dialect: the PTX instructions FlashMLIR's kernels need that
// MLIR 22's NVVM and NVGPU dialects do not model, each an op with operands
// and a verifier, and one lowering to `llvm.inline_asm`
// (fa-convert-faptx-to-llvm). Emission sites build these ops instead of asm
// strings, so what a kernel issues stays visible to the passes after them.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAPTX_IR_FAPTXOPS_TD
#define FA_DIALECT_FAPTX_IR_FAPTXOPS_TD

include "mlir/Dialect/LLVMIR/LLVMOpBase.td"
include "mlir/Dialect/NVGPU/IR/NVGPUTypes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FAPTX_Dialect : Dialect {
  let name = "faptx";
  let cppNamespace = "::mlir::faptx";
  let summary = "PTX-only instructions used by FlashMLIR's GPU kernels";
  let description = [{
    Ops for PTX instructions without an NVVM or NVGPU op in MLIR 22: the
    register-A form of `wgmma.mma_async` (FlashAttention keeps P in
    registers for P V), vector reductions to global memory
    (`red.global.add.v2/v4.f32`, dQ accumulation), and the two compiler
    fences the wgmma chains need (operand fences and opaque descriptors).
    `faptx.tensormap_param` states the kernel-parameter ABI of a TMA tensor
    map. Each op has one lowering pattern in `FAPTXToLLVM.cpp`.
  }];
}

class FAPTX_Op<string mnemonic, list<Trait> traits = []>
    : Op<FAPTX_Dialect, mnemonic, traits>;

def FAPTX_WgmmaElementType : AnyTypeOf<[F16, BF16], "f16 or bf16">;

def FAPTX_WgmmaMmaRSOp : FAPTX_Op<"wgmma_mma_rs", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "wgmma.mma_async with A from registers: D = A * B + D";
  let description = [{
    One `wgmma.mma_async.sync.aligned.m64n<n>k16.f32.<t>.<t>` of a
    warpgroup, with the 64 x 16 A tile in registers (`a`: the thread's four
    32-bit registers of packed pairs, in the mma.sync A-fragment order) and
    the 16 x n B tile in shared memory, read through the wgmma matrix
    descriptor `desc_b` as MN-major (transposed, `tnspB = 1`). It
    accumulates into `acc` (the thread's n / 2 f32 accumulator registers)
    and returns the new values. MLIR's `nvvm.wgmma.mma_async` takes A only
    from shared memory.

    Like every wgmma, it must sit between `nvvm.wgmma.fence.aligned` and
    `nvvm.wgmma.commit.group.sync.aligned`, and its results are read only
    after the matching `nvvm.wgmma.wait.group.sync.aligned`.

    ```mlir
    %d:32 = faptx.wgmma_mma_rs n = 64, bf16, a[%a0, %a1, %a2, %a3],
        b %desc, acc[%c0, ..., %c31]
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntPositive]>:$n,
                       TypeAttrOf<FAPTX_WgmmaElementType>:$element_type,
                       Variadic<I32>:$a, I64:$desc_b, Variadic<F32>:$acc);
  let results = (outs Variadic<F32>:$d);
  let assemblyFormat = [{
    `n` `=` $n `,` $element_type `,` `a` `[` $a `]` `,` `b` $desc_b `,`
    `acc` `[` $acc `]` attr-dict
  }];
  let hasVerifier = 1;
}

def FAPTX_RedGlobalAddOp : FAPTX_Op<"red_global_add"> {
  let summary = "red.global.add.v2/v4.f32: vector reduction to global memory";
  let description = [{
    Adds `values` (2 or 4 f32) to the consecutive f32 words at `address`, a
    global-memory address aligned to the vector (8 or 16 bytes), in one
    relaxed GPU-scope reduction (`red.global.add.v<n>.f32`, sm_90+): one
    memory transaction where `memref.atomic_rmw` issues one per element.

    ```mlir
    faptx.red_global_add %addr, [%x, %y]
    ```
  }];
  let arguments = (ins I64:$address, Variadic<F32>:$values);
  let assemblyFormat = "$address `,` `[` $values `]` attr-dict";
  let hasVerifier = 1;
}

def FAPTX_OperandFenceOp : FAPTX_Op<"operand_fence",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "pins a register value in place for the wgmma schedule";
  let description = [{
    Returns `input` unchanged, through an empty side-effecting inline asm
    that LLVM cannot move or look through (CUTLASS's
    `warpgroup_fence_operand`). Wrapping the register operands of a wgmma
    chain before its `wgmma.fence` keeps their computation before the fence
    (else ptxas inserts a warpgroup.arrive before each wgmma), and wrapping
    the results after the wait keeps their reads after it.

    ```mlir
    %y = faptx.operand_fence %x : f32
    ```
  }];
  let arguments = (ins AnyTypeOf<[F32, I32]>:$input);
  let results = (outs AnyTypeOf<[F32, I32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def FAPTX_Ex2Op : FAPTX_Op<"ex2", [Pure]> {
  let summary = "2^x, approximate, denormals flushed (ex2.approx.ftz.f32)";
  let description = [{
    The softmax's exponential: one MUFU.EX2. `math.exp2` reaches libdevice's
    non-flushing `ex2.approx.f32`, which ptxas wraps in a compare and two
    predicated multiplies per element to keep denormal results; a
    probability below 2^-126 of the row's maximum does not change the
    softmax, so the kernels flush it (as FlashAttention's `--use_fast_math`
    builds do).

    ```mlir
    %y = faptx.ex2 %x : f32
    ```
  }];
  let arguments = (ins F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def FAPTX_TanhOp : FAPTX_Op<"tanh", [Pure]> {
  let summary = "tanh(x), approximate (tanh.approx.f32)";
  let description = [{
    One MUFU.TANH (sm_75 and later), maximum relative error 2^-10.99: the
    tanh FlashAttention's softcap uses. `math.tanh` reaches libdevice's
    `__nv_tanhf`, two exponentials and a division per score; with that, a
    softcapped forward took 1.6-2.6x the plain one's time (H100,
    2026-12-07). The softcap's input is a score of bf16 / f16 operands.

    ```mlir
    %y = faptx.tanh %x : f32
    ```
  }];
  let arguments = (ins F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def FAPTX_OpaqueOp : FAPTX_Op<"opaque"> {
  let summary = "a 64-bit value LLVM cannot see through (mov.b64)";
  let description = [{
    Returns `input` through a side-effecting `mov.b64`. Offsets derived from
    the result inside a loop are computed where they are used, instead of
    being hoisted by LLVM into 64-bit registers that live across the loop:
    the backward kernels' wgmma descriptor bases go through it.

    ```mlir
    %d = faptx.opaque %desc
    ```
  }];
  let arguments = (ins I64:$input);
  let results = (outs I64:$result);
  let assemblyFormat = "$input attr-dict";
}

def FAPTX_TensorMapParamOp : FAPTX_Op<"tensormap_param", [Pure]> {
  let summary = "a kernel argument that is a TMA tensor map passed by value";
  let description = [{
    Declares kernel argument `param` a CUtensorMap passed by value (CUDA's
    `const __grid_constant__ CUtensorMap`): 128 bytes in the parameter space,
    64-byte aligned, whose address the TMA instructions read, with no copy
    in global memory. The result is the descriptor the `nvgpu.tma.*` ops
    take. The lowering, on the kernel's `llvm.func` (after
    convert-gpu-to-nvvm, which drops argument attributes of a `gpu.func`),
    marks the argument `llvm.byval = !llvm.array<128 x i8>`, `llvm.align =
    64` and `nvvm.grid_constant`: PTX `.param .align 64 .b8 <name>[128]`.
    The runtime encodes the map (cuTensorMapEncodeTiled) per call.

    ```mlir
    %map = faptx.tensormap_param %arg0 : !llvm.ptr -> !nvgpu.tensormap.descriptor<...>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$param);
  let results = (outs NVGPU_TensorMapDescriptor:$result);
  let assemblyFormat =
      "$param attr-dict `:` type($param) `->` qualified(type($result))";
  let hasVerifier = 1;
}

#endif // FA_DIALECT_FAPTX_IR_FAPTXOPS_TD
