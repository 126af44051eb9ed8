"""Bytecode edited in a ``.pvm`` (issue 29's adversarial campaign): the
loader refuses an inconsistent call with ExecutableFormatError naming the
function and instruction, before any VM decodes it."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

import phasec
from phasec.backend.vm import CalleeKind, Executable, ExecutableFormatError, VirtualMachine

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 5), dtype="float32")) -> R.Tensor((3, 5), dtype="float32"):
        with R.dataflow():
            s = R.multiply(x, x)
            R.output(s)
        return s
"""


def _rewritten(data: bytes, edit) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(members["executable.json"])
    edit(doc)
    members["executable.json"] = json.dumps(doc).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, member in members.items():
            zf.writestr(name, member)
    return out.getvalue()


@pytest.mark.parametrize("change", [-1, 1])
def test_a_kernel_call_with_another_argument_count_is_refused(change):
    # one argument fewer was an IndexError inside the VM's straight-line
    # compiler (it finds the kernel's outputs by position)
    data = phasec.build(phasec.parse(MODULE)).to_bytes()
    x = np.arange(15, dtype="float32").reshape(3, 5)
    expected = x * x  # numpy, not phasec
    np.testing.assert_array_equal(VirtualMachine(Executable.load(data)).invoke("main", x),
                                  expected)
    found = []

    def edit(doc):
        for pc, ins in enumerate(doc["functions"][0]["code"]):
            if ins[0] == "call" and ins[2] == CalleeKind.KERNEL:
                ins[4] = ins[4][:-1] if change < 0 else ins[4] + [ins[4][0]]
                found.append((pc, ins[3], len(ins[4]) - change))
                return

    tampered = _rewritten(data, edit)
    assert found, "the module has no kernel call"
    pc, kernel, takes = found[0]
    with pytest.raises(ExecutableFormatError,
                       match=rf"function 'main', instruction {pc}: kernel '{kernel}' takes "
                             rf"{takes} arguments, the call passes {takes + change}"):
        Executable.load(tampered)
