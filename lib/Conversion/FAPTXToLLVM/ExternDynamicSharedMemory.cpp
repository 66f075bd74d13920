//===- ExternDynamicSharedMemory.cpp - Extern dynamic shared memory -------===//
//
// Makes the zero-length shared globals that stand for a kernel's dynamic
// shared memory external, so that the NVPTX back end declares them
// `.extern .shared ... []` instead of demoting them to a one-byte static
// variable that other static shared variables may follow.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAEXTERNDYNAMICSHAREDMEMORY
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;

namespace {

struct FAExternDynamicSharedMemoryPass final
    : fa::impl::FAExternDynamicSharedMemoryBase<
          FAExternDynamicSharedMemoryPass> {
  void runOnOperation() override {
    getOperation()->walk([](LLVM::GlobalOp global) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      if (global.getAddrSpace() ==
              static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared) &&
          array && array.getNumElements() == 0 && !global.getValueOrNull() &&
          global.getLinkage() == LLVM::Linkage::Internal)
        global.setLinkage(LLVM::Linkage::External);
    });
  }
};

} // namespace
