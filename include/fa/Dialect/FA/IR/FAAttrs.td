//===- FAAttrs.td - FlashMLIR attributes -------------------*- tablegen -*-===//
//
// The attention mask (`#fa.mask`), and the attributes that carry decisions
// from one pass to the next: the kernel configuration chosen by
// `fa-select-kernel-config` and read by the tiling passes and the GPU
// conversions.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FAATTRS_TD
#define FA_DIALECT_FA_IR_FAATTRS_TD

include "fa/Dialect/FA/IR/FADialect.td"
include "fa/Dialect/FA/IR/FAInterfaces.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def FA_MaskAttr : AttrDef<FA_Dialect, "Mask",
    [DeclareAttrInterfaceMethods<FA_MaskAttrInterface>]> {
  let mnemonic = "mask";
  let summary = "Causal and sliding-window masks, bottom-right aligned";
  let description = [{
    Key `j` is visible from query `i` iff
    `i + off - left <= j <= i + off + right` with `off = Nk - Nq` (aligned
    to the bottom-right corner of the score matrix, as FlashAttention 2.1+),
    for each bounded side. Each side is a constant in [0, 2147483647] (the
    GPU kernels compute the mask in i32), unbounded (`inf`), or a value
    known at run time (`?`): an i64 mask operand of the op, one per `?` in
    order left, right, where a negative value is unbounded (FlashAttention's
    -1). What changes the code is only which sides are bounded, and by a
    constant or not.

    Forms: `none` (both unbounded: every key visible), `causal` (`window
    inf, 0`), `window left, right`.

    Example:
    ```mlir
    #fa.mask<causal>
    #fa.mask<window 128, 0>   // causal, 128 keys to the left
    #fa.mask<window ?, ?>     // both sizes are operands of the op
    #fa.mask<window inf, 16>
    ```
  }];
  let parameters = (ins "int64_t":$left, "int64_t":$right);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Parameter values of a side that is not a constant bound.
    static constexpr int64_t kUnbounded = -1;
    static constexpr int64_t kDynamic = ::mlir::ShapedType::kDynamic;

    static MaskAttr getCausal(::mlir::MLIRContext *context) {
      return get(context, kUnbounded, 0);
    }
    bool isCausal() const { return getLeft() == kUnbounded && getRight() == 0; }
    /// The number of `?` sides: the operands the mask takes.
    unsigned getNumDynamicSides() const {
      return (getLeft() == kDynamic) + (getRight() == kDynamic);
    }
  }];
}

def FA_MmaKind : I32EnumAttr<"MmaKind", "tensor-core MMA instructions", [
    I32EnumAttrCase<"MmaSync", 0, "mma_sync">,
    I32EnumAttrCase<"Wgmma", 1, "wgmma">
  ]> {
  let cppNamespace = "::mlir::fa";
  let genSpecializedAttr = 0;
}

def FA_KernelSchedule : I32EnumAttr<"KernelSchedule",
    "how the warps of a forward kernel share the work", [
    I32EnumAttrCase<"Cooperative", 0, "cooperative">,
    I32EnumAttrCase<"WarpSpecialized", 1, "warp_specialized">
  ]> {
  let cppNamespace = "::mlir::fa";
  let genSpecializedAttr = 0;
}

def FA_KernelScheduleParameter : EnumParameter<FA_KernelSchedule> {
  let defaultValue = "::mlir::fa::KernelSchedule::Cooperative";
}

def FA_TileScheduler : I32EnumAttr<"TileScheduler",
    "how a forward kernel's thread blocks are given their tiles", [
    I32EnumAttrCase<"Grid", 0, "grid">,
    I32EnumAttrCase<"Persistent", 1, "persistent">,
    I32EnumAttrCase<"Dynamic", 2, "dynamic">
  ]> {
  let cppNamespace = "::mlir::fa";
  let genSpecializedAttr = 0;
}

def FA_TileSchedulerParameter : EnumParameter<FA_TileScheduler> {
  let defaultValue = "::mlir::fa::TileScheduler::Grid";
}

def FA_KernelConfigAttr : AttrDef<FA_Dialect, "KernelConfig"> {
  let mnemonic = "kernel_config";
  let summary = "How one attention op becomes GPU kernels";
  let description = [{
    The decisions `fa-select-kernel-config` takes for an `fa.attention` or
    `fa.attention_backward` and every later pass reads:

    - `chip`: the target (`"sm_80"`, `"sm_90"`, `"sm_90a"`); it fixes the
      shared memory and registers a thread block may use;
    - `mma`: `mma_sync` (warp-level `mma.sync`, every chip) or `wgmma`
      (warpgroup `wgmma.mma_async`, sm_90a);
    - `block_q` x `block_kv`: the tile of queries and keys one thread block
      works on (the forward's query block and key step; the backward's
      query step and key block);
    - `warps`: warps per thread block (whole warpgroups of 4 for wgmma);
    - `stages`: shared-memory buffers per streamed tile (the forward's K/V;
      the backward double-buffers Q and dO: 2);
    - `dkv_split` (backward, default 1): thread blocks per key block, each
      keeping dK and dV (and adding dQ) for 1 / dkv_split of the head-dim
      columns, all recomputing S and dP: large head dims fit the registers.
    - `schedule` (forward, default `cooperative`): `cooperative`, every warp
      copies K/V (cp.async) and computes; `warp_specialized` (wgmma, head
      dims multiples of 64), one more warpgroup streams K and V with TMA
      through mbarrier rings while the `warps / 4` consumer warpgroups
      compute, the softmax of one key block under the P V GEMM of the one
      before, taking turns at the tensor cores (docs/HOPPER.md).
    - `tile_scheduler` (forward, default `grid`): `grid`, one thread block
      per tile (query block of one head); `persistent` (warp_specialized),
      one thread block per multiprocessor looping over the tiles, longest
      first, so that the producer loads the next tile's keys while the
      consumers finish the last one (the launcher supplies the
      multiprocessor count); `dynamic` (warp_specialized), the same
      persistent kernel whose blocks take their next tile from a global
      counter (an atomic add by the producer, passed to the consumers with
      the tile's Q), so that uneven (causal) tiles balance: the kernel takes
      a one-word workspace that the launcher zeroes before each launch.

    The op verifier checks the configuration against the op (head dims,
    element type) and the chip (shared memory, registers): a configuration
    that verifies compiles to a kernel that can launch.

    Example:
    ```mlir
    #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128,
                      warps = 8, stages = 2>
    ```
  }];
  let parameters = (ins StringRefParameter<"target chip">:$chip,
                        EnumParameter<FA_MmaKind>:$mma,
                        "int64_t":$blockQ, "int64_t":$blockKV,
                        "int64_t":$warps, "int64_t":$stages,
                        DefaultValuedParameter<"int64_t", "1">:$dkvSplit,
                        FA_KernelScheduleParameter:$schedule,
                        FA_TileSchedulerParameter:$tileScheduler);
  let assemblyFormat = [{
    `<` $chip `,` $mma `,` `block_q` `=` $blockQ `,` `block_kv` `=` $blockKV
    `,` `warps` `=` $warps `,` `stages` `=` $stages
    ``custom<KernelConfigTail>($dkvSplit, $schedule, $tileScheduler) `>`
  }];
  let genVerifyDecl = 1;
}

#endif // FA_DIALECT_FA_IR_FAATTRS_TD
