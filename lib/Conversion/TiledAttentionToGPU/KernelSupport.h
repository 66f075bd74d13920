//===- KernelSupport.h - Building blocks of the attention kernels -*- C++
//-*-===//
//
// What the forward and backward GPU conversions share: scalar builders, the
// shared-memory tile layout and the warp-level mma.sync m16n8k16 fragments.
// Internal to lib/Conversion/TiledAttentionToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_KERNELSUPPORT_H
#define FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_KERNELSUPPORT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::fa::detail {

// (kWarpSize comes from NVGPUDialect.h.)
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
/// Elements of a 16-byte chunk (one cp.async, one ldmatrix row) of f16/bf16.
constexpr int64_t kChunk = 8;

/// A [rows, cols] tile in shared memory, as rows of 16-byte chunks, viewed
/// as a flat 1-d memref (element index row * storedCols() + col): every
/// address is then one per-lane register plus a constant. With
/// `swizzle`, chunk c of row r is stored at chunk c ^ (r % 8); otherwise rows
/// are padded by one chunk. Either way the 8 rows one ldmatrix phase (or one
/// group of 8 cp.async) touches fall in distinct banks.
struct SmemTile {
  Value view;
  int64_t rows = 0, cols = 0;
  bool swizzle = false;

  static bool canSwizzle(int64_t cols) {
    int64_t chunks = cols / kChunk;
    return chunks >= 8 && llvm::isPowerOf2_64(chunks);
  }
  int64_t storedCols() const { return swizzle ? cols : cols + kChunk; }
  int64_t bytes(int64_t eltBytes) const {
    return rows * storedCols() * eltBytes;
  }
};

/// Scalar builders at one location, shared by the kernel emitters.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value divu(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, idx(y));
  }
  Value remu(Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, idx(y));
  }
  Value slt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
  }
  Value toI32(Value x) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), x);
  }
  // Shared-memory element offsets: i32 (one register each; they stay far
  // below 2^31), nsw so that constant terms fold into the address.
  Value addNsw(Value x, Value y) {
    auto op = arith::AddIOp::create(b, loc, x, y);
    op.setOverflowFlags(arith::IntegerOverflowFlags::nsw);
    return op;
  }
  Value mulNsw(Value x, Value y) {
    auto op = arith::MulIOp::create(b, loc, x, y);
    op.setOverflowFlags(arith::IntegerOverflowFlags::nsw);
    return op;
  }
  Value smemIndex(Value off32) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), off32);
  }

  OpBuilder &b;
  Location loc;
};

/// Register fragments of one warp for mma.sync m16n8k16 (f16/bf16 in, f32
/// accumulation), in nvgpu's vector form:
///   A 16x16: vector<4x2xT>, rows a0..a3 = (r, k), (r+8, k), (r, k+8),
///            (r+8, k+8) with r = lane/4, k = 2*(lane%4)
///   B 16x8:  vector<2x2xT>, rows b0, b1 = k-rows 2*(lane%4) and +8, n = lane/4
///   C 16x8:  vector<2x2xf32>, row h = query row lane/4 + 8h, columns
///            2*(lane%4) + {0, 1}
/// Two adjacent C fragments (n = 0..7, 8..15) converted to T are the A
/// fragment of the 16x16 block they cover: P never leaves registers.
/// The Hopper (wgmma) path would provide a second flavour of this class.
class WarpFragments {
public:
  WarpFragments(OpBuilder &b, Location loc, Type elt)
      : b(b), loc(loc), elt(elt) {
    f32 = b.getF32Type();
    aType = VectorType::get({4, 2}, elt);
    bType = VectorType::get({2, 2}, elt);
    cType = VectorType::get({2, 2}, f32);
  }

  Value zeroC() {
    return arith::ConstantOp::create(b, loc, cType, b.getZeroAttr(cType));
  }

  /// x4 ldmatrix of four 8x8 matrices whose row addresses the caller
  /// computed for this lane (an element index into the flat tile `view`).
  Value ldmatrix(Value view, Value index, bool transpose) {
    return nvgpu::LdMatrixOp::create(b, loc, aType, view, ValueRange{index},
                                     transpose, /*numTiles=*/4);
  }

  /// Splits an x4 result into the B fragments of two n8 tiles.
  std::pair<Value, Value> splitB(Value x4) {
    auto pick = [&](int64_t r0) {
      Value frag =
          arith::ConstantOp::create(b, loc, bType, b.getZeroAttr(bType));
      for (int64_t i = 0; i < 2; ++i) {
        Value row =
            vector::ExtractOp::create(b, loc, x4, ArrayRef<int64_t>{r0 + i});
        frag =
            vector::InsertOp::create(b, loc, row, frag, ArrayRef<int64_t>{i});
      }
      return frag;
    };
    return {pick(0), pick(2)};
  }

  /// D = A * B + C.
  Value mma(Value a, Value bFrag, Value c) {
    if (elt.isF16())
      return nvgpu::MmaSyncOp::create(b, loc, a, bFrag, c,
                                      ArrayRef<int64_t>{16, 8, 16});
    // MLIR 22's nvgpu.mma.sync lowering has no bf16 case: emit the NVVM op on
    // packed bf16x2 registers.
    Type i32 = b.getI32Type();
    auto packed = [&](Value frag, int64_t n) {
      SmallVector<Value> regs;
      for (int64_t i = 0; i < n; ++i)
        regs.push_back(LLVM::BitcastOp::create(
            b, loc, i32,
            vector::ExtractOp::create(b, loc, frag, ArrayRef<int64_t>{i})));
      return regs;
    };
    SmallVector<Value> accs;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 2; ++e)
        accs.push_back(element(c, h, e));
    auto resType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    auto op = NVVM::MmaOp::create(
        b, loc, resType, packed(a, 4), packed(bFrag, 2), accs,
        ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                      NVVM::MMATypes::bf16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value> res;
    for (int64_t i = 0; i < 4; ++i)
      res.push_back(
          LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i}));
    return fromElements(res);
  }

  /// Element (row half h, column e) of a C fragment.
  Value element(Value c, int64_t h, int64_t e) {
    return vector::ExtractOp::create(b, loc, c, ArrayRef<int64_t>{h, e});
  }

  /// A C fragment from its four elements (c0, c1, c2, c3).
  Value fromElements(ArrayRef<Value> elems) {
    Value c = zeroC();
    auto rowType = VectorType::get({2}, f32);
    for (int64_t h = 0; h < 2; ++h) {
      Value row = vector::FromElementsOp::create(
          b, loc, rowType, ValueRange{elems[2 * h], elems[2 * h + 1]});
      c = vector::InsertOp::create(b, loc, row, c, ArrayRef<int64_t>{h});
    }
    return c;
  }

  /// Multiplies row half h of `c` by scales[h].
  Value scaleRows(Value c, Value s0, Value s1) {
    auto rowType = VectorType::get({2}, f32);
    Value scales = zeroC();
    // A named array: a ValueRange over a braced list would dangle here.
    Value rowScales[2] = {s0, s1};
    for (int64_t h = 0; h < 2; ++h)
      scales = vector::InsertOp::create(
          b, loc, vector::BroadcastOp::create(b, loc, rowType, rowScales[h]),
          scales, ArrayRef<int64_t>{h});
    return arith::MulFOp::create(b, loc, c, scales);
  }

  /// Row half h of `c` in the input element type: one packed conversion.
  Value truncRow(Value c, int64_t h) {
    Value row = vector::ExtractOp::create(b, loc, c, ArrayRef<int64_t>{h});
    return arith::TruncFOp::create(b, loc, VectorType::get({2}, elt), row);
  }

  /// The A fragment of the 16x16 block covered by two adjacent C fragments.
  Value packA(Value c0, Value c1) {
    Value a = arith::ConstantOp::create(b, loc, aType, b.getZeroAttr(aType));
    int64_t i = 0;
    for (Value c : {c0, c1})
      for (int64_t h = 0; h < 2; ++h)
        a = vector::InsertOp::create(b, loc, truncRow(c, h), a,
                                     ArrayRef<int64_t>{i++});
    return a;
  }

private:
  OpBuilder &b;
  Location loc;
  Type elt, f32;
  VectorType aType, bType, cType;
};

} // namespace mlir::fa::detail

#endif // FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_KERNELSUPPORT_H
