"""Loading an executable from elsewhere is bounded (issue 27, finding 5):
``executable.json`` is measured (declared size, JSON values, nesting) before
it is parsed, nested compression is refused, no member but the known data
members is read, and the kernel digest cannot be skipped by editing the
format version (see test_vm_executable.py for the versions)."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import phasec
from phasec.backend.vm import Executable, ExecutableFormatError, VirtualMachine
from phasec import fileio
from phasec.backend.vm import executable as executable_module
from phasec.errors import InputError, SchemaError
from phasec.fileio import check_json_size, load_json
from phasec.script.json_format import decode as json_decode
from phasec.script.json_format import from_json, to_json

MODULE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        y = R.add(x, R.const([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], "float32"))
        return y
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("exe") / "m.pvm"
    phasec.build(phasec.parse(MODULE)).save(path)
    with zipfile.ZipFile(path) as zf:
        return path, {n: zf.read(n) for n in zf.namelist()}


def _write(path, members, padding: bytes | None = None, repeat: int = 0):
    """An executable with ``members``; ``padding * repeat`` appended inside
    executable.json's top-level object (streamed: never all in memory)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, data in members.items():
            if name == "executable.json" and padding:
                with zf.open(name, "w", force_zip64=True) as fh:
                    fh.write(data[:-1] + b',"pad":[')
                    chunk = padding * 65536
                    for _ in range(repeat // 65536):
                        fh.write(chunk)
                    fh.write(b"{}]}")
            else:
                zf.writestr(name, data)
    return path


def test_a_padded_executable_json_is_refused_from_its_declared_size(tmp_path, saved,
                                                                    monkeypatch):
    """A small file inflating to more than MAX_DOCUMENT_BYTES of ``{}`` (the
    issue saw 5.5 GB of memory for a 0.5 MB file): refused before anything is
    inflated. (Scaled down: the limit is 64 MiB, 1 MiB here.)"""
    _, members = saved
    assert executable_module.MAX_DOCUMENT_BYTES == 64 << 20
    monkeypatch.setattr(executable_module, "MAX_DOCUMENT_BYTES", 1 << 20)
    bomb = _write(tmp_path / "pad.pvm", members, b"{},", 1 << 20)
    assert bomb.stat().st_size < 64 << 10
    tracemalloc.start()
    try:
        with pytest.raises(ExecutableFormatError, match=r"damaged executable: executable.json "
                                                        r"declares 3 MiB, more than the 1 MiB"):
            Executable.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # nothing was inflated


def test_too_many_json_values_are_refused_before_parsing(tmp_path, saved, monkeypatch):
    _, members = saved
    monkeypatch.setattr(executable_module, "MAX_DOCUMENT_VALUES", 100_000)
    padded = _write(tmp_path / "many.pvm", members, b"[],", 65536 * 2)
    with pytest.raises(ExecutableFormatError, match=r"executable.json: the JSON document holds "
                                                    r"more than 100,000 values"):
        Executable.load(padded)
    # within the limit the same kind of padding is just an unknown key: the file loads
    ok = _write(tmp_path / "few.pvm", members, b"[],", 65536)
    monkeypatch.setattr(executable_module, "MAX_DOCUMENT_VALUES", 200_000)
    x = np.ones((2, 3), "float32")
    out = VirtualMachine(Executable.load(ok), kernels="interp")["main"](x)
    np.testing.assert_array_equal(out, x + np.arange(6).reshape(2, 3))


def test_deep_nesting_is_refused_before_parsing(tmp_path, saved):
    _, members = saved
    doc = members["executable.json"]
    deep = doc[:-1] + b',"pad":' + b"[" * 101 + b"]" * 101 + b"}"
    path = _write(tmp_path / "deep.pvm", {**members, "executable.json": deep})
    with pytest.raises(ExecutableFormatError, match=r"nested too deeply \(more than "
                                                    r"100 levels\)"):
        Executable.load(path)


def test_nested_compression_is_refused(tmp_path, saved):
    """np.savez_compressed inside the deflated .pvm: two layers of deflate
    multiply (the issue's 3 KB file made a 1 GiB constant); phasec writes
    constants.npz stored, so a compressed one is refused, whatever its size."""
    _, members = saved
    npz = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["constants.npz"])) as inner:
        names = inner.namelist()
        arrays = {n[:-4]: np.load(io.BytesIO(inner.read(n))) for n in names}
    assert names and all(i.compress_type == zipfile.ZIP_STORED
                         for i in zipfile.ZipFile(io.BytesIO(members["constants.npz"])).infolist())
    np.savez_compressed(npz, **arrays)
    path = _write(tmp_path / "nested.pvm", {**members, "constants.npz": npz.getvalue()})
    with pytest.raises(ExecutableFormatError, match=r"constants.npz.*is compressed inside an "
                                                    r"archive that is itself compressed"):
        Executable.load(path)


@pytest.mark.parametrize("name, message", [
    (["kernels.json"], "the kernel file must be one of kernels.json, kernels.py"),
    ("constants.npz", "the kernel file must be one of"),
    ("kernels.py", "kernel file 'kernels.py' is missing"),
])
def test_the_kernel_file_named_must_be_a_kernel_file(tmp_path, saved, name, message):
    _, members = saved
    doc = json.loads(members["executable.json"])
    doc["kernels"] = name
    path = _write(tmp_path / "k.pvm", {**members, "executable.json": json.dumps(doc).encode()})
    with pytest.raises(ExecutableFormatError, match=message):
        Executable.load(path)


def test_a_kernel_file_declaring_too_much_is_refused_before_inflating(tmp_path, saved,
                                                                      monkeypatch):
    _, members = saved
    monkeypatch.setattr(executable_module, "MAX_KERNEL_FILE_BYTES", 1024)
    with pytest.raises(ExecutableFormatError, match=r"kernels.json declares .* more than the "
                                                    r"1 KiB kernels take"):
        Executable.load(_write(tmp_path / "k.pvm", members))


@pytest.mark.parametrize("member", ["kernels.so", "lib/evil.o", "executable.json.bak"])
def test_members_other_than_the_data_are_refused(tmp_path, saved, member):
    """No machine code is read from an executable: kernels are compiled
    again from their IR, and any other member is refused, not ignored."""
    _, members = saved
    path = _write(tmp_path / "extra.pvm", {**members, member: b"\x7fELF" + bytes(60)})
    with pytest.raises(ExecutableFormatError, match=rf"unexpected member '{member}'.*no compiled "
                                                    r"code is ever read"):
        Executable.load(path)


def test_loaded_kernels_are_compiled_from_the_ir_in_the_file(saved):
    """What runs is what the kernel IR says: the loaded executable's kernels
    are PrimFuncs read from kernels.json (no compiled object in the file)."""
    path, members = saved
    assert set(members) == {"executable.json", "constants.npz", "kernels.json"}
    exe = Executable.load(path)
    assert exe.prim_funcs and all(isinstance(f, phasec.ir.tir.PrimFunc)
                                  for f in exe.prim_funcs.values())
    x = np.full((2, 3), 0.5, "float32")
    np.testing.assert_array_equal(VirtualMachine(exe)["main"](x),
                                  x + np.arange(6, dtype="float32").reshape(2, 3))


# ---------------------------------------------------------------------------
# The JSON counting itself, and JSON module files
# ---------------------------------------------------------------------------

def test_json_count_skips_strings_and_escapes():
    text = json.dumps({"a": ["x,[{:", 'q"],\\', {"b": [1, 2]}]})
    assert load_json(text, "t", 12) == json.loads(text)  # 3 containers + 5 ',' + ':' x2 ...
    with pytest.raises(InputError, match="holds more than 5 values"):
        check_json_size(text, "t", 5)
    check_json_size("[" * 50 + "]" * 50, "t", 100, max_depth=50)
    with pytest.raises(InputError, match="nested too deeply"):
        check_json_size("[" * 51 + "]" * 51, "t", 100, max_depth=50)
    with pytest.raises(InputError, match="t: invalid JSON"):
        load_json("[1, 2", "t", 100)


def test_json_module_files_are_counted_before_parsing(monkeypatch):
    mod = phasec.parse(MODULE)
    text = to_json(mod)
    doc = json.loads(text)
    doc["attrs"] = {"pad": {"list": [[]] * 5000}}
    padded = json.dumps(doc)
    monkeypatch.setattr(json_decode, "MAX_VALUES", 4000)
    with pytest.raises(SchemaError, match="invalid module JSON: the JSON document holds more "
                                          "than 4,000 values"):
        from_json(padded)
    assert phasec.structural_equal(from_json(text), mod)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='a"\\[]{},: \n\u00e9', max_size=6),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(alphabet='k"\\[{,:', max_size=4), inner, max_size=4),
    max_leaves=20)


def _counted(value) -> tuple[int, int]:
    """(values, depth) of a parsed document as check_json_size counts them:
    each container, each separator between items, each key's colon."""
    if isinstance(value, list):
        parts = [_counted(v) for v in value]
        return (1 + max(len(value) - 1, 0) + sum(p[0] for p in parts),
                1 + max((p[1] for p in parts), default=0))
    if isinstance(value, dict):
        parts = [_counted(v) for v in value.values()]
        return (1 + max(len(value) - 1, 0) + len(value) + sum(p[0] for p in parts),
                1 + max((p[1] for p in parts), default=0))
    return 0, 0


@settings(max_examples=60, deadline=None)
@given(doc=_JSON, chunk=st.sampled_from([1, 2, 3, 7, 4 << 20]), ascii_only=st.booleans())
def test_json_count_agrees_with_the_parsed_document(doc, chunk, ascii_only):
    """The scan over the text (strings, escapes and chunk borders included)
    counts what the parsed document holds."""
    text = json.dumps(doc, ensure_ascii=ascii_only)
    values, depth = _counted(doc)
    with patch.object(fileio.reading, "_JSON_SCAN_CHUNK", chunk):
        check_json_size(text, "t", values, depth)
        if values:
            with pytest.raises(InputError, match="more than"):
                check_json_size(text, "t", values - 1, depth)
        if depth:
            with pytest.raises(InputError, match="nested too deeply"):
                check_json_size(text, "t", values, depth - 1)
