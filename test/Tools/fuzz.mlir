// The fuzzer (scripts/fuzz.py) against stand-in tools (Inputs/fuzz/): the
// fake fa-opt crashes on sliding windows, the fake fa-compile writes a
// manifest over sm_80's shared memory with --causal. Both are found, saved
// and reduced; the run fails while they are new and passes once allowed.
// RUN: rm -rf %t && mkdir -p %t
// RUN: not python3 %S/../../scripts/fuzz.py --bin %S/Inputs/fuzz --seeds %S/Inputs/fuzz-seeds --seed 3 --iterations 30 --out %t/out > %t/log
// RUN: FileCheck %s < %t/log
// CHECK: fuzz: 30 cases
// CHECK-DAG: NEW {{.*}} fa-compile: forward mma.sync on sm_80: dynamic shared memory over the chip's limit
// CHECK-DAG: NEW {{.*}} fa-opt: SIGSEGV in fake::crashOnWindow
// CHECK: fuzz: 2 distinct signatures, 2 new

// The crash is reduced to the one line with a window, fa-compile's case to
// its flag.
// RUN: FileCheck %s --check-prefix=REDUCED < %t/out/crash-8df134f551/reduced.mlir
// REDUCED: {{^.*}} mask<window {{[^>]*}}>{{.*$}}
// REDUCED-EMPTY:
// RUN: FileCheck %s --check-prefix=REPRO < %t/out/bad-manifest-74b25cfa40/repro.sh
// REPRO: fa-compile --causal -o out{{$}}

// The same seed finds the same cases; allowed signatures do not fail it.
// RUN: printf 'crashOnWindow\n# a comment\nshared memory\n' > %t/allow
// RUN: python3 %S/../../scripts/fuzz.py --bin %S/Inputs/fuzz --seeds %S/Inputs/fuzz-seeds --seed 3 --iterations 30 --allow %t/allow --out %t/out2 | FileCheck %s --check-prefix=KNOWN
// KNOWN: fuzz: 30 cases
// KNOWN-DAG: known {{.*}} fa-compile: forward mma.sync
// KNOWN-DAG: known {{.*}} fa-opt: SIGSEGV in fake::crashOnWindow
// KNOWN: fuzz: 2 distinct signatures, 0 new
