//===- FAGPUOps.td - GPU-level schedule ops ----------------*- tablegen -*-===//
//
// The `fagpu` dialect: the GPU-level form of FlashMLIR's Hopper kernels, in
// which the schedule's decisions are ops, types and attributes: producer /
// consumer warp roles (`fagpu.warp_specialize`) and the multi-stage
// shared-memory channels between them (`!fagpu.channel`). Each concern has
// its own lowering pass (fa-lower-channels, fa-lower-warp-specialize) to
// the nvgpu / nvvm ops; see docs/HOPPER.md.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUOPS_TD
#define FA_DIALECT_FAGPU_IR_FAGPUOPS_TD

include "mlir/Dialect/LLVMIR/LLVMOpBase.td"
include "mlir/Dialect/NVGPU/IR/NVGPUTypes.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def FAGPU_Dialect : Dialect {
  let name = "fagpu";
  let cppNamespace = "::mlir::fagpu";
  let summary = "GPU-level schedule of FlashMLIR's Hopper kernels";
  let description = [{
    Warp roles and the pipelined shared-memory channels between them, as
    ops that later passes read and lower: a kernel states *that* a producer
    warpgroup streams tiles to consumer warpgroups through a ring of
    `stages` buffers, and fa-lower-channels / fa-lower-warp-specialize
    write the mbarrier protocol (phases, transaction counts, elected
    threads) and the role split (setmaxnreg) that implement it.
  }];
  let useDefaultTypePrinterParser = 1;
}

class FAGPU_Op<string mnemonic, list<Trait> traits = []>
    : Op<FAGPU_Dialect, mnemonic, traits>;

def FAGPU_ChannelType : TypeDef<FAGPU_Dialect, "Channel"> {
  let mnemonic = "channel";
  let summary = "a ring of shared-memory buffers passed producer to consumer";
  let description = [{
    `stages` buffers of type `buffer` (a shared-memory memref) with a
    "full" and an "empty" mbarrier each. Item `i` of the stream lives in
    buffer `i % stages`; its producer waits until the consumers released
    item `i - stages`, its consumers wait until it is complete.

    ```mlir
    !fagpu.channel<3 x memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>>
    ```
  }];
  let parameters = (ins "int64_t":$stages, "MemRefType":$buffer);
  let assemblyFormat = "`<` $stages `x` $buffer `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The type of one buffer as a slice of the ring (`channel_get`'s
    /// result): the buffer's shape and strides at a dynamic offset.
    ::mlir::MemRefType getStageType() const;
  }];
}

def FAGPU_ChannelCreateOp : FAGPU_Op<"channel_create"> {
  let summary = "a channel over a ring of shared memory";
  let description = [{
    Makes a channel whose buffers are the leading-dimension slices of
    `ring` (`stages` x the buffer's shape). `arrivals` is the number of
    consumer threads that release each item (every thread of the consumer
    warpgroups). It must be in the kernel's entry block, before the warp
    roles split: its lowering initializes the mbarriers (one thread) and
    synchronizes the whole thread block.

    ```mlir
    %kv = fagpu.channel_create %ring arrivals 256
        : memref<3x1x64x64xbf16, #gpu.address_space<workgroup>>
        -> !fagpu.channel<3 x memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>>
    ```
  }];
  let arguments = (ins AnyMemRef:$ring,
                       ConfinedAttr<I64Attr, [IntPositive]>:$arrivals);
  let results = (outs FAGPU_ChannelType:$channel);
  let assemblyFormat = [{
    $ring `arrivals` $arrivals attr-dict `:` type($ring) `->` qualified(type($channel))
  }];
  let hasVerifier = 1;
}

def FAGPU_ChannelPutTmaOp : FAGPU_Op<"channel_put_tma"> {
  let summary = "producer: TMA-load item `index` of the channel";
  let description = [{
    Waits until the buffer of item `index` is free (the consumers released
    item `index - stages`; not for the first `stages` items), then loads
    it with TMA from `map` at `coordinates` (innermost first, as the tensor
    map orders them), completing the item's "full" barrier with the
    buffer's byte count. The buffer is one box of the map, or `P` boxes
    along its leading dimension (`P x box`: e.g. a 128-column tile as two
    64-column panels of 128-byte swizzle), box `p` taken `p` box widths
    further along the innermost coordinate. One thread of the executing
    warpgroup issues it.

    ```mlir
    fagpu.channel_put_tma %kv[%i], %map[%c0, %row, %h, %b]
        : !fagpu.channel<...>, !nvgpu.tensormap.descriptor<...>
    ```
  }];
  let arguments = (ins FAGPU_ChannelType:$channel, Index:$index,
                       NVGPU_TensorMapDescriptor:$map,
                       Variadic<Index>:$coordinates);
  let assemblyFormat = [{
    $channel `[` $index `]` `,` $map `[` $coordinates `]` attr-dict `:`
    qualified(type($channel)) `,` qualified(type($map))
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// How many boxes of the map fill one buffer (1, or its leading size).
    int64_t getNumBoxes();
  }];
}

def FAGPU_ChannelAcquireOp : FAGPU_Op<"channel_acquire"> {
  let summary = "producer: wait until item `index`'s buffer is free";
  let description = [{
    The wait `channel_put_tma` starts with (the consumers released item
    `index - stages`; nothing for the first `stages` items), on its own: the
    producer may then write values of its own for the item (e.g. a tile
    index in shared memory), which the item's put or signal publishes to
    the consumers with the item. The put's own wait then passes at once.
    One thread of the executing warpgroup waits, as for a put.
  }];
  let arguments = (ins FAGPU_ChannelType:$channel, Index:$index);
  let assemblyFormat = [{
    $channel `[` $index `]` attr-dict `:` qualified(type($channel))
  }];
}

def FAGPU_ChannelSignalOp : FAGPU_Op<"channel_signal"> {
  let summary = "producer: complete item `index` without loading it";
  let description = [{
    Completes the item's "full" barrier with no data (the buffer keeps what
    it held): the consumers' `channel_get` returns, and what the producer
    wrote after `channel_acquire` of the item is visible to them (e.g. a
    persistent kernel's end-of-tiles marker). Must follow the item's
    `channel_acquire`. One thread of the executing warpgroup arrives.
  }];
  let arguments = (ins FAGPU_ChannelType:$channel, Index:$index);
  let assemblyFormat = [{
    $channel `[` $index `]` attr-dict `:` qualified(type($channel))
  }];
}

def FAGPU_ChannelGetOp : FAGPU_Op<"channel_get"> {
  let summary = "consumer: wait for item `index`, return its buffer";
  let arguments = (ins FAGPU_ChannelType:$channel, Index:$index);
  let results = (outs AnyMemRef:$buffer);
  let assemblyFormat = [{
    $channel `[` $index `]` attr-dict `:` qualified(type($channel)) `->` type($buffer)
  }];
  let hasVerifier = 1;
}

def FAGPU_ChannelReleaseOp : FAGPU_Op<"channel_release"> {
  let summary = "consumer: done with item `index`'s buffer";
  let description = [{
    Every consumer thread arrives at the item's "empty" barrier: after the
    channel's `arrivals` arrivals the producer may overwrite the buffer.
  }];
  let arguments = (ins FAGPU_ChannelType:$channel, Index:$index);
  let assemblyFormat = [{
    $channel `[` $index `]` attr-dict `:` qualified(type($channel))
  }];
}

def FAGPU_WarpSpecializeOp : FAGPU_Op<"warp_specialize", [
    RecursiveMemoryEffects, NoRegionArguments,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "producer / consumer warp roles of a thread block";
  let description = [{
    Runs `producer` on warpgroup 0 (128 threads) and `consumers` on
    warpgroups 1 .. `consumer_warpgroups`; the thread block has exactly
    `128 * (1 + consumer_warpgroups)` threads (the kernel's
    `known_block_size`). `producer_registers` / `consumer_registers` are
    the per-thread register budgets each role moves to (setmaxnreg: the
    producer gives registers back to the consumers). The roles share no
    values: they talk through channels and shared memory.

    ```mlir
    fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232)
    producer {
      ...
    } consumers {
      ...
    }
    ```
  }];
  let arguments = (ins ConfinedAttr<I64Attr, [IntPositive]>:$consumer_warpgroups,
                       I64Attr:$producer_registers,
                       I64Attr:$consumer_registers);
  let regions = (region SizedRegion<1>:$producer, SizedRegion<1>:$consumers);
  let assemblyFormat = [{
    `consumer_warpgroups` $consumer_warpgroups
    `registers` `(` $producer_registers `,` $consumer_registers `)`
    attr-dict-with-keyword `producer` $producer `consumers` $consumers
  }];
  let hasVerifier = 1;
}

def FAGPU_YieldOp : FAGPU_Op<"yield", [Pure, Terminator,
    HasParent<"WarpSpecializeOp">]> {
  let summary = "ends a warp role's region";
  let assemblyFormat = "attr-dict";
}

def FAGPU_HostTensorMapOp : FAGPU_Op<"host_tensor_map", [Pure]> {
  let summary = "host side: the TMA tensor map of a tensor, encoded per call";
  let description = [{
    The CUtensorMap of `source` with the box, swizzle, L2 promotion and
    out-of-bounds fill of `descriptor`, as a host value that a `gpu.launch`
    captures (the kernel declares it with `faptx.tensormap_param`). It is
    not computed by the IR: fa-compile writes it into the kernel manifest
    as a `"type": "tensormap"` parameter of `source`, and the runtime
    encodes it (cuTensorMapEncodeTiled) for each call's tensor.

    ```mlir
    %kmap = fagpu.host_tensor_map %k as !nvgpu.tensormap.descriptor<...>
        : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> -> !llvm.ptr
    ```
  }];
  let arguments = (ins AnyMemRef:$source, TypeAttrOf<NVGPU_TensorMapDescriptor>:$descriptor);
  let results = (outs LLVM_AnyPointer:$map);
  let assemblyFormat = [{
    $source `as` $descriptor attr-dict `:` type($source) `->` type($map)
  }];
  let hasVerifier = 1;
}

def FAGPU_HostMultiprocessorCountOp
    : FAGPU_Op<"host_multiprocessor_count", [Pure]> {
  let summary = "host side: the multiprocessor count of the launch's device";
  let description = [{
    The number of streaming multiprocessors of the device a launch runs on,
    as a host index value: a persistent kernel's grid is at most this many
    thread blocks. Like `fagpu.host_tensor_map` it is not computed by the
    IR: the launch description names it `SMS` in the kernel manifest's grid
    and the runtime binds it from the device of each call.

    ```mlir
    %sms = fagpu.host_multiprocessor_count
    %grid = arith.minui %tiles, %sms : index
    ```
  }];
  let results = (outs Index:$count);
  let assemblyFormat = "attr-dict";
}

#endif // FA_DIALECT_FAGPU_IR_FAGPUOPS_TD
