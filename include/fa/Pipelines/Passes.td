//===- Passes.td - FlashMLIR pipeline passes ---------------*- tablegen -*-===//
//
// Passes that the CPU pipelines (lib/Pipelines/Pipelines.cpp) are built from
// besides the fa transformations: they decide which modules a pipeline
// lowers.
//
//===----------------------------------------------------------------------===//

#ifndef FA_PIPELINES_PASSES_TD
#define FA_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def FAHostOnly : Pass<"fa-host-only", "::mlir::ModuleOp"> {
  let summary = "Reject fa ops in device code before a CPU pipeline";
  let description = [{
    The CPU pipelines (`fa-tiled-cpu`, `fa-reference-cpu`, `fa-cpu-to-llvm`)
    lower host code. A `gpu.module` holding fa ops is device code that they
    would tile or expand and then leave half converted; this pass rejects it
    with an error on the `gpu.module` (and a note on its first fa op) before
    anything changes. It changes no IR. The GPU pipelines take fa ops on the
    host and build the `gpu.module` themselves.

    Rejected:
    ```mlir
    gpu.module @kernels {
      func.func @f(...) { %o, %l = fa.attention ... }
    }
    ```
  }];
}

def FAExpandReshapesAsCasts : Pass<"fa-expand-reshapes-as-casts"> {
  let summary = "memref.expand_shape with several dynamic sizes in a group "
                "as a reinterpret_cast";
  let description = [{
    MLIR 22's `expand-strided-metadata` crashes on a `memref.expand_shape`
    that splits one dimension into two or more dynamic ones (fuzz finding N,
    docs/FUZZING.md): the CPU form of `fa-split-kv`'s partials
    `[B, H*S, N, Dv] -> [B, H, S, N, Dv]` with H and S both known only at
    run time. This pass, run just before it, rewrites such reshapes into the
    `memref.reinterpret_cast` they mean: the source's base and offset, the
    output sizes, and strides computed from the source's (innermost size of
    a group gets the source dimension's stride, each outer one the next
    stride times the next size). Other reshapes are left to upstream.

    Before:
    ```mlir
    %e = memref.expand_shape %m [[0], [1, 2], [3]] output_shape [%b, %h, %s, 128]
        : memref<?x?x128xf32> into memref<?x?x?x128xf32>
    ```
    After: `memref.extract_strided_metadata %m` and a
    `memref.reinterpret_cast` to `memref<?x?x?x128xf32>` with sizes
    `[%b, %h, %s, 128]` and strides `[st0, %s * st1, st1, 1]`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FALowerHostModules : Pass<"fa-lower-host-modules", "::mlir::ModuleOp"> {
  let summary = "Lower every builtin.module holding functions to LLVM for the "
                "host, innermost first";
  let description = [{
    Bufferizes tensor code and lowers it to the LLVM dialect (one-shot
    bufferize with function boundaries, loops, memrefs, math, func to LLVM:
    `mlir::fa::buildModuleToLLVMPipeline`) on each `builtin.module` that
    directly holds a function, the root included, innermost first. The
    upstream passes of that lowering only convert the functions of the
    module they run on, so a flat pipeline on the root left the functions of
    nested modules half converted; running it once per module (a dynamic
    pipeline) lowers every level. `gpu.module` bodies are not searched.

    A module still holding a function other than `llvm.func` afterwards is
    an error, never silent output.

    Before:
    ```mlir
    module @outer {
      module @inner {
        func.func @f(%q: tensor<?x1x16x64xf32>, ...) { linalg.generic ... }
      }
    }
    ```
    After: `llvm.func @f` in `@inner`.
  }];
}

#endif // FA_PIPELINES_PASSES_TD
