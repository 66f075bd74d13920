//===- FAInterfaces.td - FlashMLIR attribute interfaces ----*- tablegen -*-===//
//
// The mask interface: the one definition of which keys a query sees, and of
// which key (query) blocks a query (key) block must visit, that every
// lowering builds its IR from.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FAINTERFACES_TD
#define FA_DIALECT_FA_IR_FAINTERFACES_TD

include "mlir/IR/OpBase.td"

def FA_MaskAttrInterface : AttrInterface<"MaskAttrInterface"> {
  let cppNamespace = "::mlir::fa";
  let description = [{
    A visibility rule of attention: whether key `j` is visible from query `i`
    of a problem of `Nq` queries and `Nk` keys. An op holds the rule as an
    attribute implementing this interface, and the values the rule takes at
    run time (e.g. window sizes) as its mask operands.

    Lowerings build every mask computation through this interface:
    `buildParameters` once (turns the run-time operands into the values the
    other methods take), then `buildVisible` per element, or
    `buildKeyBlockRange` / `buildQueryBlockRange` per block. Static
    parameters and sizes fold to constants. Masks whose rule is a diagonal
    band (causal, sliding window) also describe the band (`getBand`), which
    the GPU kernels turn into one compare per element.

    A new rule (document masks, prefix-LM, chunked) is a new attribute
    implementing these methods; see docs/ARCHITECTURE.md.
  }];

  let methods = [
    InterfaceMethod<[{
        Whether every key is visible from every query: the mask changes
        nothing and lowerings may drop it.
      }], "bool", "isFull">,
    InterfaceMethod<[{
        Checks the types of the mask operands an op gives this rule (how
        many, which types), reporting through `emitError`.
      }], "::mlir::LogicalResult", "verifyOperands",
      (ins "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError,
           "::mlir::TypeRange":$types)>,
    InterfaceMethod<[{
        The equivalent rule with the operands whose value is in `constants`
        (an attribute, or null where the value is unknown) built in, and in
        `kept` the indices of the operands it still takes; null when nothing
        folds.
      }], "::mlir::Attribute", "foldOperands",
      (ins "::llvm::ArrayRef<::mlir::Attribute>":$constants,
           "::llvm::SmallVectorImpl<unsigned> &":$kept)>,
    InterfaceMethod<[{
        The run-time operands as the values the other methods take, built at
        the builder's point (once: at a kernel's or a loop nest's start).
      }], "::llvm::SmallVector<::mlir::Value>", "buildParameters",
      (ins "::mlir::OpBuilder &":$b, "::mlir::Location":$loc,
           "::mlir::ValueRange":$operands)>,
    InterfaceMethod<[{
        i1: whether key `key` is visible from query `query` (index values)
        in a problem of `nq` queries and `nk` keys; `params` come from
        `buildParameters`. The rule only: keys past `nk` are the caller's.
      }], "::mlir::Value", "buildVisible",
      (ins "::mlir::OpBuilder &":$b, "::mlir::Location":$loc,
           "::mlir::ValueRange":$params, "::mlir::Value":$query,
           "::mlir::Value":$key, "::mlir::Value":$nq, "::mlir::Value":$nk)>,
    InterfaceMethod<[{
        The key blocks (of `blockKV` keys, block `b` = keys [b blockKV,
        (b + 1) blockKV)) that the query block [qStart, qStart + blockQ)
        must visit, as index values: see `::mlir::fa::MaskBlockRange`.
      }], "::mlir::fa::MaskBlockRange", "buildKeyBlockRange",
      (ins "::mlir::OpBuilder &":$b, "::mlir::Location":$loc,
           "::mlir::ValueRange":$params, "::mlir::Value":$qStart,
           "int64_t":$blockQ, "int64_t":$blockKV, "::mlir::Value":$nq,
           "::mlir::Value":$nk)>,
    InterfaceMethod<[{
        The mirror for the backward: the query blocks (of `blockQ` rows)
        holding a row that sees a key of [kStart, kStart + blockKV), and
        those whose every row sees every key of it.
      }], "::mlir::fa::MaskBlockRange", "buildQueryBlockRange",
      (ins "::mlir::OpBuilder &":$b, "::mlir::Location":$loc,
           "::mlir::ValueRange":$params, "::mlir::Value":$kStart,
           "int64_t":$blockKV, "int64_t":$blockQ, "::mlir::Value":$nq,
           "::mlir::Value":$nk)>,
    InterfaceMethod<[{
        Whether the rule is a diagonal band (see `getBand`): what the GPU
        kernels compute.
      }], "bool", "isBand">,
    InterfaceMethod<[{
        For a rule that is a diagonal band (key j visible from query i iff
        `i + off - left <= j <= i + off + right`, `off = Nk - Nq`): its two
        widths, each constant, a value of `params`, or unbounded. None for
        other rules.
      }], "std::optional<::mlir::fa::MaskBand>", "getBand",
      (ins "::mlir::ValueRange":$params)>
  ];
}

#endif // FA_DIALECT_FA_IR_FAINTERFACES_TD
