"""TVM reading the stages of a pipeline without re-reading unchanged kernels.

After LegalizeOps most passes change only the Relax functions, and TVM's
TVMScript parser spent most of a "TVM reads every stage" test re-reading
the same kernels (the transformer example: 17 s of 18). A kernel TVM has
read whole in an earlier stage, exactly the same (name and fingerprint), is
reduced to its signature in a later one; what a stage adds or changes is
still read whole."""

from __future__ import annotations

import phasec
from phasec.ir import tir
from phasec.ir.structural import exact_fingerprint


def _kernels(mod: phasec.IRModule) -> dict[str, tuple[str, str]]:
    """Each kernel that returns nothing: its name -> (name, fingerprint)."""
    out = {}
    for name, f in mod.functions.items():
        if isinstance(f, tir.PrimFunc) and f.ret_dtype is None:
            fp = exact_fingerprint(f)
            if fp is not None:
                out[name] = (name, fp)
    return out


def tvm_text(mod: phasec.IRModule, read: set[tuple[str, str]]) -> str:
    """The text TVM is to read for ``mod``: kernels in ``read`` (the keys of
    kernels already read whole) as signatures with an empty body. The keys
    of ``mod``'s kernels are added to ``read``: call it after TVM accepted
    the text, or collect failures (a refused stage fails the test anyway)."""
    keys = _kernels(mod)
    stubs = {name: tir.PrimFunc(mod.functions[name].params, tir.Evaluate(tir.IntImm(0, "int32")),
                                mod.functions[name].attrs)
             for name, key in keys.items() if key in read}
    read.update(keys.values())
    return (mod.with_functions({**mod.functions, **stubs}) if stubs else mod).script()
