// The sliding-window sizes are run-time kernel parameters: --window selects
// the window kind, and kernels compiled with different sizes are the same
// PTX (and manifest), named without the sizes.

// RUN: rm -rf %t && mkdir -p %t
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_80 --no-spill-check --window=97,31 -o %t/a > /dev/null
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_80 --no-spill-check --window=123,-1 -o %t/b > /dev/null
// RUN: cmp %t/a/fa_fwd_d64_bf16_window_sm80.ptx %t/b/fa_fwd_d64_bf16_window_sm80.ptx
// RUN: cmp %t/a/fa_fwd_d64_bf16_window_sm80.json %t/b/fa_fwd_d64_bf16_window_sm80.json
// RUN: FileCheck %s --check-prefix=FWD < %t/a/fa_fwd_d64_bf16_window_sm80.json

// The sizes lead the parameters, as i64 parameters named by their roles.
// FWD:      "params": [
// FWD-NEXT:   {
// FWD-NEXT:     "name": "window_left",
// FWD-NEXT:     "role": "window_left",
// FWD-NEXT:     "type": "i64",
// FWD-NEXT:     "value": "window_left"
// FWD-NEXT:   },
// FWD-NEXT:   {
// FWD-NEXT:     "name": "window_right",
// FWD-NEXT:     "role": "window_right",
// FWD-NEXT:     "type": "i64",
// FWD-NEXT:     "value": "window_right"
// FWD-NEXT:   },
// FWD:      "window": "runtime"

// Causal + window (sm_90a): the same kernel for every left size.
// RUN: fa-compile --head-dim=64 --dtype=f16 --causal --chip=sm_90a --no-spill-check --window=255,0 -o %t/c > /dev/null
// RUN: fa-compile --head-dim=64 --dtype=f16 --causal --chip=sm_90a --no-spill-check --window=77,0 -o %t/d > /dev/null
// RUN: cmp %t/c/fa_fwd_d64_f16_causal_window_sm90a.ptx %t/d/fa_fwd_d64_f16_causal_window_sm90a.ptx
// A causal window kernel takes the left size only; the Python package's
// manifest reader (which the launcher uses) accepts every manifest here.
// RUN: FileCheck %s --check-prefix=CAUSAL-PARAMS < %t/c/fa_fwd_d64_f16_causal_window_sm90a.json
// CAUSAL-PARAMS:     "name": "window_left"
// CAUSAL-PARAMS-NOT: "window_right"
// RUN: fa-compile --kind=backward --head-dim=64 --dtype=bf16 --causal --chip=sm_90a --no-spill-check --window=255,0 -o %t/c > /dev/null
// RUN: python3 %S/check-manifests.py %t/a && python3 %S/check-manifests.py %t/c

// The backward: every kernel that masks takes the sizes, the preprocess and
// the dQ conversion do not.
// RUN: fa-compile --kind=backward --head-dim=64 --dtype=f16 --chip=sm_80 --no-spill-check --window=97,31 -o %t/e > /dev/null
// RUN: fa-compile --kind=backward --head-dim=64 --dtype=f16 --chip=sm_80 --no-spill-check --window=5,600 -o %t/f > /dev/null
// RUN: cmp %t/e/fa_bwd_d64_f16_window_sm80.ptx %t/f/fa_bwd_d64_f16_window_sm80.ptx
// RUN: FileCheck %s --check-prefix=BWD < %t/e/fa_bwd_d64_f16_window_sm80.json
// RUN: python3 %S/check-manifests.py %t/e
// BWD:      "entry": "fa_bwd_preprocess_kernel"
// BWD-NOT:  "role"
// BWD:      "entry": "fa_bwd_kernel"
// BWD:      "role": "scale"
// BWD:      "role": "window_left"
// BWD:      "role": "window_right"
// BWD:      "entry": "fa_bwd_dq_convert_kernel"
// BWD-NOT:  "role": "window
// BWD:      "window": "runtime"

// Bad sizes name the flag; a window unbounded on both sides is none.
// RUN: not fa-compile --window=-2,0 -o %t/g 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-compile --causal --window=8,4 -o %t/g 2>&1 | FileCheck %s --check-prefix=CAUSAL
// BAD: fa-compile: --window bounds must be in [-1, 2147483647], got '-2,0'
// CAUSAL: fa-compile: --causal needs --window right bound 0, got '8,4'
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_80 --no-spill-check --window=-1,-1 -o %t/h > /dev/null
// RUN: ls %t/h | FileCheck %s --check-prefix=NONE
// NONE: fa_fwd_d64_bf16_sm80.ptx
