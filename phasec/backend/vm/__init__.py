"""The Relax virtual machine: bytecode codegen, executable, interpreter loop.

    exe = codegen(mod)                 # mod: verified, phase build (3)
    exe.save("model.pvm"); exe = Executable.load("model.pvm")
    vm = VirtualMachine(exe)           # kernels="llvm" (default) or "interp"
    y = vm["main"](x)
"""

from phasec.backend.vm.bytecode import CalleeKind, Instruction, VMFunction  # noqa: F401
from phasec.backend.vm.codegen import VMCodegenError, codegen
from phasec.backend.vm.executable import Executable, ExecutableFormatError
from phasec.backend.vm.vm import VirtualMachine, VMClosure
from phasec.backend.vm.profiler import RunProfile, profile_run

__all__ = ["codegen", "Executable", "ExecutableFormatError", "VirtualMachine", "VMClosure",
           "VMCodegenError", "CalleeKind", "Instruction", "VMFunction", "RunProfile", "profile_run"]
