# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FLASHMLIR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fa_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "README.txt", "lit.cfg.py",
                   "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%fa_libs", config.fa_lib_dir))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.fa_tools_dir, config.llvm_tools_dir]
tools = ["fa-opt", "fa-compile", "mlir-opt", "mlir-runner"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# ptxas checks need CUDA; they run wherever it is installed (no GPU needed).
if config.cuda_bin_dir and os.path.exists(os.path.join(config.cuda_bin_dir,
                                                       "ptxas")):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas",
                                 os.path.join(config.cuda_bin_dir, "ptxas")))
    config.substitutions.append(("%cuda_root",
                                 os.path.dirname(config.cuda_bin_dir)))

# CPU execution tests (test/Integration): mlir-runner and its runtime
# libraries, which sit next to the LLVM tools.
mlir_lib_dir = os.path.normpath(os.path.join(config.llvm_tools_dir, "..", "lib"))
runner_libs = {name: os.path.join(mlir_lib_dir, "lib" + name + config.llvm_shlib_ext)
               for name in ["mlir_runner_utils", "mlir_c_runner_utils"]}
if all(os.path.exists(lib) for lib in runner_libs.values()):
    config.available_features.add("mlir-runner")
    for name, lib in runner_libs.items():
        config.substitutions.append(("%" + name, lib))
