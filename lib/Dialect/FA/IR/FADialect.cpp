//===- FADialect.cpp - FlashMLIR attention dialect ------------------------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/IR/FAOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fa;

#include "fa/Dialect/FA/IR/FAOpsDialect.cpp.inc"

#include "fa/Dialect/FA/IR/FAEnums.cpp.inc"

/// The optional `, dkv_split = N` and `, schedule = S` of
/// #fa.kernel_config, each printed only when not the default.
static ParseResult parseKernelConfigTail(AsmParser &parser, int64_t &dkvSplit,
                                         KernelSchedule &schedule) {
  dkvSplit = 1;
  schedule = KernelSchedule::Cooperative;
  llvm::SmallSet<StringRef, 2> seen;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(loc, "'") << key << "' is given twice";
    if (key == "dkv_split") {
      if (parser.parseInteger(dkvSplit))
        return failure();
    } else if (key == "schedule") {
      StringRef name;
      if (parser.parseKeyword(&name))
        return failure();
      std::optional<KernelSchedule> s = symbolizeKernelSchedule(name);
      if (!s)
        return parser.emitError(loc, "schedule must be cooperative or "
                                     "warp_specialized, got '")
               << name << "'";
      schedule = *s;
    } else {
      return parser.emitError(loc, "expected 'dkv_split' or 'schedule', got '")
             << key << "'";
    }
  }
  return success();
}

static void printKernelConfigTail(AsmPrinter &printer, int64_t dkvSplit,
                                  KernelSchedule schedule) {
  if (dkvSplit != 1)
    printer << ", dkv_split = " << dkvSplit;
  if (schedule != KernelSchedule::Cooperative)
    printer << ", schedule = " << stringifyKernelSchedule(schedule);
}

#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FA/IR/FAAttrs.cpp.inc"

void FADialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fa/Dialect/FA/IR/FAAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fa/Dialect/FA/IR/FAOps.cpp.inc"
      >();
}
