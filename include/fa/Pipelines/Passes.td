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
