//===- LaunchDescription.cpp - What a launcher needs, read from the IR ----===//

#include "fa/Pipelines/LaunchDescription.h"

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Binding strength of an expression's top operator, for parentheses.
enum Precedence { kAdd = 1, kMul = 2, kAtom = 3 };

struct Expr {
  std::string text;
  Precedence prec = kAtom;
};

class SizeDescriber {
public:
  SizeDescriber(func::FuncOp host, ArrayRef<HostArgument> args)
      : host(host), args(args) {}

  FailureOr<Expr> describe(Value v, int depth = 0) {
    // Host size arithmetic is a few ops deep; a runaway chain is not it.
    if (depth > 32)
      return fail(v, "is too deep an expression");
    APInt cst;
    if (matchPattern(v, m_ConstantInt(&cst)))
      return Expr{std::to_string(cst.getSExtValue())};
    Operation *op = v.getDefiningOp();
    // A named integer argument (a packed batch's max_seqlen_q): its name.
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (arg.getOwner() == &host.getBody().front() &&
          arg.getArgNumber() < args.size() &&
          args[arg.getArgNumber()].dims.empty() &&
          isa<IndexType, IntegerType>(arg.getType()))
        return Expr{args[arg.getArgNumber()].name.str()};
    if (!op)
      return fail(v, "is not computed from the arguments' dimensions");
    if (auto dim = dyn_cast<memref::DimOp>(op))
      return describeDim(dim);
    // Bound by the runtime from the launch's device.
    if (isa<fagpu::HostMultiprocessorCountOp>(op))
      return Expr{"SMS"};
    // Casts between index and integer widths keep the value (sizes are
    // non-negative and far below 2^31).
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtUIOp,
            arith::ExtSIOp, arith::TruncIOp>(op))
      return describe(op->getOperand(0), depth + 1);
    auto binary = [&](StringRef sym, Precedence prec) -> FailureOr<Expr> {
      FailureOr<Expr> l = describe(op->getOperand(0), depth + 1);
      FailureOr<Expr> r = describe(op->getOperand(1), depth + 1);
      if (failed(l) || failed(r))
        return failure();
      // Left-associative: the right operand needs parentheses at equal
      // strength ("a - (b + c)", "a // (b * c)").
      return Expr{wrap(*l, prec, false) + " " + sym.str() + " " +
                      wrap(*r, prec, true),
                  prec};
    };
    auto call = [&](StringRef fn) -> FailureOr<Expr> {
      FailureOr<Expr> l = describe(op->getOperand(0), depth + 1);
      FailureOr<Expr> r = describe(op->getOperand(1), depth + 1);
      if (failed(l) || failed(r))
        return failure();
      return Expr{llvm::formatv("{0}({1}, {2})", fn, l->text, r->text).str()};
    };
    if (isa<arith::AddIOp>(op))
      return binary("+", kAdd);
    if (isa<arith::SubIOp>(op))
      return binary("-", kAdd);
    if (isa<arith::MulIOp>(op))
      return binary("*", kMul);
    // Floor and truncating division agree on the non-negative sizes here.
    if (isa<arith::DivUIOp, arith::DivSIOp, arith::FloorDivSIOp>(op))
      return binary("//", kMul);
    if (isa<arith::RemUIOp, arith::RemSIOp>(op))
      return binary("%", kMul);
    if (isa<arith::CeilDivUIOp, arith::CeilDivSIOp>(op))
      return call("ceildiv");
    if (isa<arith::MinUIOp, arith::MinSIOp>(op))
      return call("min");
    if (isa<arith::MaxUIOp, arith::MaxSIOp>(op))
      return call("max");
    return fail(v, "has no expression form");
  }

private:
  static std::string wrap(const Expr &e, Precedence outer, bool right) {
    bool paren = e.prec < outer || (right && e.prec == outer);
    return paren ? "(" + e.text + ")" : e.text;
  }

  FailureOr<Expr> describeDim(memref::DimOp dim) {
    auto arg = dyn_cast<BlockArgument>(dim.getSource());
    std::optional<int64_t> index = dim.getConstantIndex();
    if (!arg || arg.getOwner() != &host.getBody().front() ||
        arg.getArgNumber() >= args.size() || !index)
      return fail(dim.getResult(),
                  "is not a dimension of a named argument of the host "
                  "function");
    const HostArgument &a = args[arg.getArgNumber()];
    if (*index < 0 || *index >= static_cast<int64_t>(a.dims.size()))
      return fail(dim.getResult(), "is a dimension the argument does not have");
    return Expr{a.dims[*index].str()};
  }

  FailureOr<Expr> fail(Value v, const Twine &why) {
    Location loc =
        v.getDefiningOp() ? v.getDefiningOp()->getLoc() : host.getLoc();
    emitError(loc) << "launch description: a size of the launch " << why;
    return failure();
  }

  func::FuncOp host;
  ArrayRef<HostArgument> args;
};

} // namespace

FailureOr<std::string> mlir::fa::describeSize(Value value, func::FuncOp host,
                                              ArrayRef<HostArgument> args) {
  FailureOr<Expr> e = SizeDescriber(host, args).describe(value);
  if (failed(e))
    return failure();
  return e->text;
}

FailureOr<SmallVector<std::string, 3>>
mlir::fa::describeGrid(gpu::LaunchFuncOp launch, func::FuncOp host,
                       ArrayRef<HostArgument> args) {
  SmallVector<std::string, 3> grid;
  for (Value v :
       {launch.getGridSizeX(), launch.getGridSizeY(), launch.getGridSizeZ()}) {
    FailureOr<std::string> e = describeSize(v, host, args);
    if (failed(e))
      return failure();
    grid.push_back(*e);
  }
  return grid;
}

FailureOr<SmallVector<std::string, 4>>
mlir::fa::describeAllocation(memref::AllocOp alloc, func::FuncOp host,
                             ArrayRef<HostArgument> args) {
  SmallVector<std::string, 4> dims;
  MemRefType type = alloc.getType();
  unsigned dynamic = 0;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (!type.isDynamicDim(i)) {
      dims.push_back(std::to_string(type.getDimSize(i)));
      continue;
    }
    FailureOr<std::string> e =
        describeSize(alloc.getDynamicSizes()[dynamic++], host, args);
    if (failed(e))
      return failure();
    dims.push_back(*e);
  }
  return dims;
}
