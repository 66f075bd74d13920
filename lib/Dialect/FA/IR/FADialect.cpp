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

/// The enum case spelled by the next keyword; `what` names the key and its
/// cases for the error.
template <typename Enum>
static ParseResult parseEnumKeyword(AsmParser &parser, SMLoc loc, Enum &value,
                                    std::optional<Enum> (*symbolize)(StringRef),
                                    StringRef what) {
  StringRef name;
  if (parser.parseKeyword(&name))
    return failure();
  std::optional<Enum> parsed = symbolize(name);
  if (!parsed)
    return parser.emitError(loc, what) << ", got '" << name << "'";
  value = *parsed;
  return success();
}

/// The optional `, dkv_split = N`, `, schedule = S` and `, tile_scheduler =
/// T` of #fa.kernel_config, each printed only when not the default.
static ParseResult parseKernelConfigTail(AsmParser &parser, int64_t &dkvSplit,
                                         KernelSchedule &schedule,
                                         TileScheduler &tileScheduler) {
  dkvSplit = 1;
  schedule = KernelSchedule::Cooperative;
  tileScheduler = TileScheduler::Grid;
  llvm::SmallSet<StringRef, 3> seen;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(loc, "'") << key << "' is given twice";
    ParseResult parsed = failure();
    if (key == "dkv_split")
      parsed = parser.parseInteger(dkvSplit);
    else if (key == "schedule")
      parsed =
          parseEnumKeyword(parser, loc, schedule, symbolizeKernelSchedule,
                           "schedule must be cooperative or warp_specialized");
    else if (key == "tile_scheduler")
      parsed = parseEnumKeyword(
          parser, loc, tileScheduler, symbolizeTileScheduler,
          "tile_scheduler must be grid, persistent or dynamic");
    else
      return parser.emitError(loc, "expected 'dkv_split', 'schedule' or "
                                   "'tile_scheduler', got '")
             << key << "'";
    if (failed(parsed))
      return failure();
  }
  return success();
}

static void printKernelConfigTail(AsmPrinter &printer, int64_t dkvSplit,
                                  KernelSchedule schedule,
                                  TileScheduler tileScheduler) {
  if (dkvSplit != 1)
    printer << ", dkv_split = " << dkvSplit;
  if (schedule != KernelSchedule::Cooperative)
    printer << ", schedule = " << stringifyKernelSchedule(schedule);
  if (tileScheduler != TileScheduler::Grid)
    printer << ", tile_scheduler = " << stringifyTileScheduler(tileScheduler);
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
