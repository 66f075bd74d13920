//===- LaunchDescription.h - What a launcher needs, read from the IR -*- C++
//-*-===//
//
// After the GPU pipeline, the host function holds everything a launcher
// needs: each gpu.launch_func's grid and block sizes, its dynamic shared
// memory and its operands, and the memref.alloc of every workspace buffer.
// These helpers read them back as the manifest's terms: sizes become
// expressions over the dimensions of the host function's arguments (the
// manifest's expression language: integers, names, + - * //, ceildiv, min,
// max), so the grid the conversion built is the grid the launcher computes,
// with no second transcription of the formula. A host
// `fagpu.host_multiprocessor_count` is the name SMS (a persistent kernel's
// grid), which the runtime binds from the launch's device.
//
//===----------------------------------------------------------------------===//

#ifndef FA_PIPELINES_LAUNCHDESCRIPTION_H
#define FA_PIPELINES_LAUNCHDESCRIPTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <string>

namespace mlir::fa {

/// A memref argument of the host function as the launcher names it: the
/// tensor's name and the name of each dimension (e.g. "q", {B, Hq, Nq, D});
/// an integer argument without dims is a size named by itself (e.g.
/// "max_seqlen_q").
struct HostArgument {
  StringRef name;
  SmallVector<StringRef, 4> dims;
};

/// `value`, an index or integer value of `host`'s body, as an expression over
/// the dimensions of `args` (the host function's leading memref arguments).
/// Fails with a diagnostic at the op that has no such form (e.g. a value
/// loaded from memory).
FailureOr<std::string> describeSize(Value value, func::FuncOp host,
                                    ArrayRef<HostArgument> args);

/// The grid of `launch` (x, y, z) as expressions; see `describeSize`.
FailureOr<SmallVector<std::string, 3>>
describeGrid(gpu::LaunchFuncOp launch, func::FuncOp host,
             ArrayRef<HostArgument> args);

/// The dimensions of the buffer `alloc` allocates: its static sizes as
/// integers and its dynamic ones as expressions.
FailureOr<SmallVector<std::string, 4>>
describeAllocation(memref::AllocOp alloc, func::FuncOp host,
                   ArrayRef<HostArgument> args);

} // namespace mlir::fa

#endif // FA_PIPELINES_LAUNCHDESCRIPTION_H
