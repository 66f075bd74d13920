// The scale and the softcap value are run-time kernel parameters: kernels
// compiled for one variant with different --scale / --softcap values are the
// same PTX, and the manifest lists the parameters with their roles.

// RUN: rm -rf %t && mkdir -p %t
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_80 --no-spill-check --scale=0.3 -o %t/a > /dev/null
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_80 --no-spill-check --scale=0.07 -o %t/b > /dev/null
// RUN: cmp %t/a/fa_fwd_d64_bf16_sm80.ptx %t/b/fa_fwd_d64_bf16_sm80.ptx
// RUN: cmp %t/a/fa_fwd_d64_bf16_sm80.json %t/b/fa_fwd_d64_bf16_sm80.json
// RUN: FileCheck %s --check-prefix=FWD < %t/a/fa_fwd_d64_bf16_sm80.json

// The forward takes scale * log2(e), which the host computes (its FMAs read
// the parameter directly); nothing of the value is in the manifest.
// FWD:      "params": [
// FWD:          "name": "log2e_scale",
// FWD-NEXT:     "role": "log2e_scale",
// FWD-NEXT:     "type": "f32",
// FWD-NEXT:     "value": "log2e_scale"
// FWD-NOT:      "role"
// FWD:      "scale": null,
// FWD-NEXT: "schedule": "cooperative",
// FWD-NEXT: "softcap": null,

// With a softcap: scale / softcap and softcap * log2(e), both from the host.
// RUN: fa-compile --head-dim=64 --dtype=bf16 --chip=sm_90a --no-spill-check --softcap=30 -o %t/s > /dev/null
// RUN: FileCheck %s --check-prefix=CAP < %t/s/fa_fwd_d64_bf16_softcap_sm90a.json
// CAP-DAG:  "role": "scale_over_softcap"
// CAP-DAG:  "role": "log2e_softcap"
// CAP-NOT:  "role": "scale"
// CAP:      "softcap": "runtime"
// RUN: python3 %S/check-manifests.py %t/a && python3 %S/check-manifests.py %t/s

// RUN: fa-compile --kind=backward --head-dim=64 --dtype=f16 --causal --chip=sm_80 --no-spill-check --softcap=2 --scale=0.3 -o %t/c > /dev/null
// RUN: fa-compile --kind=backward --head-dim=64 --dtype=f16 --causal --chip=sm_80 --no-spill-check --softcap=50 -o %t/d > /dev/null
// RUN: cmp %t/c/fa_bwd_d64_f16_causal_softcap_sm80.ptx %t/d/fa_bwd_d64_f16_causal_softcap_sm80.ptx
// RUN: FileCheck %s --check-prefix=BWD < %t/c/fa_bwd_d64_f16_causal_softcap_sm80.json

// The key-block kernel takes both (scale first), the dQ conversion the
// scale only, the preprocess neither.
// BWD:      "entry": "fa_bwd_preprocess_kernel"
// BWD-NOT:  "role"
// BWD:      "entry": "fa_bwd_kernel"
// BWD:      "role": "scale"
// BWD:      "role": "softcap"
// BWD:      "entry": "fa_bwd_dq_convert_kernel"
// BWD-NOT:  "role": "softcap"
// BWD:      "role": "scale"
// BWD:      "softcap": "runtime"

// A bad value is still reported, naming its flag.
// RUN: not fa-compile --softcap=-1 -o %t/e 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-compile --softcap=abc -o %t/e 2>&1 | FileCheck %s --check-prefix=BADTEXT
// BAD: fa-compile: --softcap must be a positive, finite f32 value, got -1.000000e+00 (it does not change the kernel: the kernel takes it at run time)
// BADTEXT: fa-compile: --softcap takes no value or a number, got 'abc'
