//===- FADialect.td - FlashMLIR attention dialect ----------*- tablegen -*-===//
//
// The `fa` dialect: exact scaled-dot-product attention as one op, the target
// that ML compilers emit and that FlashMLIR's passes lower the FlashAttention
// way (tiling, online softmax, recomputation).
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FADIALECT_TD
#define FA_DIALECT_FA_IR_FADIALECT_TD

include "mlir/IR/OpBase.td"

def FA_Dialect : Dialect {
  let name = "fa";
  let summary = "Exact attention, lowered the FlashAttention way";
  let description = [{
    The `fa` dialect models multi-head scaled-dot-product attention as a single
    op on tensors, together with its backward. The ops carry the full
    semantics (scale, causal and sliding-window masks, soft-capping,
    grouped-query attention) so that passes can pick the loop structure that
    never materializes the N x N score matrix.

    Semantics shared by all ops (see docs/ARCHITECTURE.md):

    ```
    S[b,h,i,j] = scale * sum_d Q[b,h,i,d] * K[b,h/G,j,d]      (G = Hq / Hkv)
    S          = score_mod(S, b, h, i, j, captures...)          (if score_mod)
    S          = softcap * tanh(S / softcap)                    (if softcap)
    S[b,h,i,j] = -inf  unless j is visible from i               (masks, and
                       mask_mod(b, h, i, j, captures...))
    P          = softmax_j(S)      O = P V      LSE = log sum_j exp(S)
    ```

    Key j is visible from query i when, with `off = Nk - Nq` (masks are
    aligned to the bottom-right corner of the score matrix, as in
    FlashAttention 2.1+), `i + off - left <= j <= i + off + right`, where
    `left`/`right` come from the op's `mask` (`#fa.mask<window left, right>`,
    a side `inf` when unbounded; `#fa.mask<causal>` is `right = 0`). Masks
    implement `MaskAttrInterface`, through which every lowering builds them.
    A row with no visible key produces `out = 0` and `lse = +inf`
    (FlashAttention's convention: the backward then recomputes
    `P = exp(S - LSE) = 0` for that row), so no NaN ever escapes.
  }];
  let cppNamespace = "::mlir::fa";
  let useDefaultAttributePrinterParser = 1;
}

class FA_Op<string mnemonic, list<Trait> traits = []>
    : Op<FA_Dialect, mnemonic, traits>;

#endif // FA_DIALECT_FA_IR_FADIALECT_TD
