//===- FAPTXToLLVM.cpp - faptx ops to inline PTX --------------------------===//
//
// One pattern per faptx op, each printing the op's PTX into an
// `llvm.inline_asm` (side-effecting: none of these may be moved, merged or
// dropped by LLVM).
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/FAPTXToLLVM/FAPTXToLLVM.h"
#include "fa/Dialect/FAPTX/IR/FAPTX.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FACONVERTFAPTXTOLLVM
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::faptx;

namespace {

LLVM::InlineAsmOp createAsm(PatternRewriter &rewriter, Location loc,
                            Type resultType, ValueRange operands, StringRef ptx,
                            StringRef constraints) {
  return LLVM::InlineAsmOp::create(
      rewriter, loc, resultType, operands, rewriter.getStringAttr(ptx),
      rewriter.getStringAttr(constraints), /*has_side_effects=*/
      rewriter.getUnitAttr(), /*is_align_stack=*/UnitAttr(),
      LLVM::TailCallKindAttr(), LLVM::AsmDialectAttr(), ArrayAttr());
}

/// The accumulator goes in and out tied (`=f` ... `<i>`); scale-d is a
/// register predicate set to 1, so the instruction always accumulates.
struct WgmmaMmaRSLowering : OpRewritePattern<WgmmaMmaRSOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(WgmmaMmaRSOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t na = op.getAcc().size();
    std::string regs, constraints;
    llvm::raw_string_ostream os(regs), cs(constraints);
    for (int64_t i = 0; i < na; ++i)
      os << (i ? ", " : "") << "$" << i;
    for (int64_t i = 0; i < na; ++i)
      cs << "=f,";
    for (int64_t i = 0; i < na; ++i)
      cs << i << ",";
    cs << "r,r,r,r,l,n";
    std::string type = op.getElementType().isF16() ? "f16" : "bf16";
    std::string ptx = llvm::formatv(
        "{{\n.reg .pred p;\nsetp.ne.b32 p, ${0}, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n{1}k16.f32.{2}.{2} "
        "{{{3}}, {{${4}, ${5}, ${6}, ${7}}, ${8}, p, 1, 1, 1;\n}\n",
        2 * na + 5, op.getN(), type, regs, 2 * na, 2 * na + 1, 2 * na + 2,
        2 * na + 3, 2 * na + 4);
    SmallVector<Value> operands(op.getAcc());
    llvm::append_range(operands, op.getA());
    operands.push_back(op.getDescB());
    operands.push_back(
        LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(), 1));
    SmallVector<Type> fields(na, rewriter.getF32Type());
    auto structType =
        LLVM::LLVMStructType::getLiteral(rewriter.getContext(), fields);
    Value result =
        createAsm(rewriter, loc, structType, operands, ptx, constraints)
            .getResult(0);
    SmallVector<Value> values;
    for (int64_t i = 0; i < na; ++i)
      values.push_back(LLVM::ExtractValueOp::create(rewriter, loc, result,
                                                    ArrayRef<int64_t>{i}));
    rewriter.replaceOp(op, values);
    return success();
  }
};

struct RedGlobalAddLowering : OpRewritePattern<RedGlobalAddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RedGlobalAddOp op,
                                PatternRewriter &rewriter) const override {
    size_t n = op.getValues().size();
    std::string regs, constraints = "l";
    for (size_t i = 0; i < n; ++i) {
      regs += llvm::formatv("{0}${1}", i ? ", " : "", i + 1).str();
      constraints += ",f";
    }
    std::string ptx =
        llvm::formatv("red.global.add.v{0}.f32 [$0], {{{1}};", n, regs);
    SmallVector<Value> operands = {op.getAddress()};
    llvm::append_range(operands, op.getValues());
    createAsm(rewriter, op.getLoc(), Type(), operands, ptx, constraints);
    rewriter.eraseOp(op);
    return success();
  }
};

struct OperandFenceLowering : OpRewritePattern<OperandFenceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(OperandFenceOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getInput().getType();
    rewriter.replaceOp(op, createAsm(rewriter, op.getLoc(), type, op.getInput(),
                                     "", type.isF32() ? "=f,0" : "=r,0")
                               .getResult(0));
    return success();
  }
};

struct Ex2Lowering : OpRewritePattern<Ex2Op> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(Ex2Op op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
        op, op.getType(), rewriter.getStringAttr("llvm.nvvm.ex2.approx.ftz"),
        ValueRange{op.getInput()});
    return success();
  }
};

/// `llvm.tanh` with `afn`: NVPTX selects tanh.approx.f32 for it (LLVM 22
/// has no NVVM tanh intrinsic).
struct TanhLowering : OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TanhOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<LLVM::TanhOp>(
        op, op.getType(), op.getInput(),
        LLVM::FastmathFlagsAttr::get(rewriter.getContext(),
                                     LLVM::FastmathFlags::afn));
    return success();
  }
};

struct OpaqueLowering : OpRewritePattern<OpaqueOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(OpaqueOp op,
                                PatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       createAsm(rewriter, op.getLoc(), op.getInput().getType(),
                                 op.getInput(), "mov.b64 $0, $1;", "=l,l")
                           .getResult(0));
    return success();
  }
};

/// Marks the kernel argument as CUDA's by-value `__grid_constant__`
/// CUtensorMap; the descriptor the nvgpu lowering turned into !llvm.ptr is
/// that argument.
struct TensorMapParamLowering : OpRewritePattern<TensorMapParamOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TensorMapParamOp op,
                                PatternRewriter &rewriter) const override {
    auto arg = dyn_cast<BlockArgument>(op.getParam());
    auto func = arg ? dyn_cast<LLVM::LLVMFuncOp>(arg.getOwner()->getParentOp())
                    : nullptr;
    if (!func)
      return rewriter.notifyMatchFailure(op, "not an argument of an llvm.func");
    MLIRContext *ctx = rewriter.getContext();
    unsigned index = arg.getArgNumber();
    rewriter.modifyOpInPlace(func, [&] {
      func.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(),
                      TypeAttr::get(LLVM::LLVMArrayType::get(
                          IntegerType::get(ctx, 8), 128)));
      func.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                      rewriter.getI64IntegerAttr(64));
      func.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                      rewriter.getUnitAttr());
    });
    rewriter.replaceOpWithNewOp<UnrealizedConversionCastOp>(op, op.getType(),
                                                            op.getParam());
    return success();
  }
};

struct FAConvertFAPTXToLLVMPass
    : fa::impl::FAConvertFAPTXToLLVMBase<FAConvertFAPTXToLLVMPass> {
  void runOnOperation() override {
    // Argument attributes of a gpu.func do not survive convert-gpu-to-nvvm.
    WalkResult early = getOperation()->walk([](TensorMapParamOp op) {
      auto arg = dyn_cast<BlockArgument>(op.getParam());
      if (arg && isa<LLVM::LLVMFuncOp>(arg.getOwner()->getParentOp()))
        return WalkResult::advance();
      op.emitOpError("lowers on the kernel's llvm.func: run "
                     "fa-convert-faptx-to-llvm after convert-gpu-to-nvvm");
      return WalkResult::interrupt();
    });
    if (early.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(getContext());
    target.addIllegalDialect<FAPTXDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    fa::populateFAPTXToLLVMPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::fa::populateFAPTXToLLVMPatterns(RewritePatternSet &patterns) {
  patterns.add<WgmmaMmaRSLowering, RedGlobalAddLowering, OperandFenceLowering,
               Ex2Lowering, TanhLowering, OpaqueLowering,
               TensorMapParamLowering>(
      patterns.getContext());
}
