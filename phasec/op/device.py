"""Device placement: ``R.to_vdevice`` and ``R.hint_on_device`` (TVM 0.27).

phasec builds for one device, the host CPU, so placement is checked and
carried but never moves data between devices:

* ``R.to_vdevice(x, dst_vdevice="llvm:0:global")`` is x copied to the virtual
  device ``dst_vdevice`` (``"<target kind>:<index>:<memory scope>"``, as in
  :attr:`~phasec.ir.struct_info.TensorStructInfo.vdevice``). The result's
  struct info is x's with that vdevice, as TVM infers it. As in TVM it is a
  memory builtin: it stays through LegalizeOps and VMBuiltinLower turns it
  into the VM builtin ``vm.builtin.to_device`` (TVM's LowerRuntimeBuiltin
  does the same), a copy on the CPU. A target kind that is not a CPU one
  (cuda, opencl...) is refused there, as phasec cannot build for it.
* ``R.hint_on_device(x, R.device(device_type=1, index=0), "global")`` is a
  hint for TVM's RealizeVDevice: the identity, with x's struct info.
  LegalizeOps replaces it by x, as RealizeVDevice does once it has used the
  hint. (tvm.compile never runs RealizeVDevice: a hint left in a module it
  compiles fails in TVM's code generation, a phase error PhaseCheck reports
  as PH202 after TVM's LegalizeOps.)

TVM registers no fusion pattern for either (opaque).
"""

from __future__ import annotations

import re

import numpy as np

from phasec.ir.expr import Call, Expr
from phasec.ir.struct_info import TensorStructInfo
from phasec.op._common import REQUIRED, OpPattern, as_int, as_str, attrs_of, define, err, tensor_arg
from phasec.op.draw import ANY_DTYPE, declares_draw
from phasec.op._lowering import legalizes_to_relax

__all__ = ["CPU_DEVICE_TYPE", "CPU_TARGET_KINDS"]

#: target kinds whose memory is the host's: to_vdevice to them is a copy phasec builds
CPU_TARGET_KINDS = ("llvm", "c")
#: DLPack's device type of the CPU (TVM's R.device(device_type=1))
CPU_DEVICE_TYPE = 1

_VDEVICE = re.compile(r"([A-Za-z_][\w.-]*)(?::(-?\d+)(?::([\w.-]+))?)?")


def _vdevice(v) -> str:
    """The canonical ``"kind:index:scope"``; an omitted index is 0 and an
    omitted scope "global" (the parser resolves them against the module's
    virtual devices first, as TVM looks them up)."""
    text = as_str(v)
    m = _VDEVICE.fullmatch(text)
    if m is None:
        raise ValueError(f"expected a virtual device \"<target kind>[:<index>[:<memory scope>]]\" "
                         f"(e.g. \"llvm:0:global\"), got {text!r}")
    kind, index, scope = m.groups()
    return f"{kind}:{index or 0}:{scope or 'global'}"


def _infer_to_vdevice(call, ctx):
    if len(call.args) != 1:
        raise err(call, f"R.to_vdevice expects 1 operand, got {len(call.args)}")
    x = tensor_arg(call, 0, ctx, "data")
    dst = attrs_of(call)["dst_vdevice"]
    if x.shape is not None:
        return TensorStructInfo(x.shape, x.dtype, vdevice=dst)
    return TensorStructInfo(None, x.dtype, x.ndim, vdevice=dst)


define("to_vdevice", ("data",), _infer_to_vdevice, attrs={"dst_vdevice": (REQUIRED, _vdevice)},
       reference=lambda data, dst_vdevice: np.array(data, copy=True), category="memory",
       doc="Copy to the virtual device ``dst_vdevice`` (VMBuiltinLower: vm.builtin.to_device).")


def _infer_hint_on_device(call, ctx):
    if len(call.args) != 1:
        raise err(call, f"R.hint_on_device expects 1 operand, got {len(call.args)}")
    return tensor_arg(call, 0, ctx, "data")


def _device_type(v) -> int:
    n = as_int(v)
    if n < 1:
        raise ValueError(f"expected a DLPack device type (1 = CPU, 2 = CUDA...), got {n}")
    return n


def _device_index(v) -> int:
    n = as_int(v)
    if n < 0:
        raise ValueError(f"expected a device index >= 0, got {n}")
    return n


define("hint_on_device", ("data",), _infer_hint_on_device,
       attrs={"device_type": (CPU_DEVICE_TYPE, _device_type), "index": (0, _device_index),
              "memory_scope": ("global", as_str)},
       reference=lambda data, **_: np.asarray(data), pattern=OpPattern.OPAQUE,
       doc="A placement hint for RealizeVDevice; the identity.")


@legalizes_to_relax("hint_on_device", lowers_to="its operand")
def _hint_on_device(call: Call) -> Expr:
    return call.args[0]


declares_draw("hint_on_device", dtypes=ANY_DTYPE, build=lambda ctx: ((ctx.x,), {}))
