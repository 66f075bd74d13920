//===- FAPTXToLLVM.h - faptx ops to inline PTX ------------------*- C++ -*-===//

#ifndef FA_CONVERSION_FAPTXTOLLVM_FAPTXTOLLVM_H
#define FA_CONVERSION_FAPTXTOLLVM_FAPTXTOLLVM_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace fa {
#define GEN_PASS_DECL_FACONVERTFAPTXTOLLVM
#define GEN_PASS_DECL_FAEXTERNDYNAMICSHAREDMEMORY
#include "fa/Conversion/Passes.h.inc"

/// The lowering of each faptx op to `llvm.inline_asm`.
void populateFAPTXToLLVMPatterns(RewritePatternSet &patterns);
} // namespace fa
} // namespace mlir

#endif // FA_CONVERSION_FAPTXTOLLVM_FAPTXTOLLVM_H
