"""Hostile files (issue 15 #4, #5, #7): special files, huge inputs, zip bombs,
tampered executables. Each ends in the documented error — never a hang,
never an allocation the size of the bomb, never "internal error".

Every command that could block is run in a subprocess with a timeout, so
a regression fails the test instead of hanging the suite.
"""

from __future__ import annotations

import io
import json
import os
import socket
import struct
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import phasec
from phasec import fileio
from phasec.backend.vm import Executable, ExecutableFormatError, VirtualMachine
from phasec.errors import FileAccessError, ParseError

from helpers.paths import REPO

ROOT = REPO

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        with R.dataflow():
            y = R.add(x, R.const([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "float32"))
            z = R.multiply(y, R.const(2.0, "float32"))
            R.output(z)
        return z
"""
X = np.arange(6, dtype="float32").reshape(2, 3)
EXPECTED = (X + np.array([[1, 2, 3], [4, 5, 6]], "float32")) * 2  # numpy, not phasec


def _run(argv: list[str], stdin=subprocess.DEVNULL, env: dict | None = None, timeout=60):
    """A command line in a subprocess; the timeout makes a hang a failure."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, *argv], stdin=stdin, capture_output=True,
                          text=True, env=full_env, timeout=timeout)


def _phasec(*args: str, **kw):
    return _run(["-m", "phasec", *map(str, args)], **kw)


def _check(*args: str, **kw):
    return _run(["-m", "phasec.verifier.cli", *map(str, args)], **kw)


@pytest.fixture
def fifo(tmp_path):
    def make(name: str) -> Path:
        path = tmp_path / name
        os.mkfifo(path)
        return path
    return make


@pytest.fixture(scope="module")
def saved_exe(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("exe") / "m.pvm"
    phasec.build(phasec.parse(MODULE)).save(path)
    return path


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _write_zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


# ---------------------------------------------------------------------------
# Special files and sizes (#5)
# ---------------------------------------------------------------------------

def test_phasec_check_dev_zero_is_refused_at_once():
    r = _check("/dev/zero")
    assert r.returncode == 2
    assert "/dev/zero: error[IN001]: it is a character device, not a regular file" in r.stdout


@pytest.mark.parametrize("argv", [
    ["check", "{fifo}.py"],
    ["opt", "{fifo}.py"],
    ["build", "{fifo}.py", "-o", "{tmp}/x.pvm"],
    ["run", "{fifo}.pvm"],
    ["run", "{fifo}"],
    ["run", "--inputs", "{fifo}.npz"],
])
def test_a_fifo_never_blocks(tmp_path, fifo, argv):
    """Nobody writes to the FIFO: reading it would block forever."""
    path = fifo("pipe")
    if argv[-1].endswith(".py") or argv[-1].endswith(".pvm") or argv[-1].endswith(".npz"):
        os.rename(path, str(path) + Path(argv[-1]).suffix)
        path = Path(str(path) + Path(argv[-1]).suffix)
    args = [a.replace("{fifo}.py", str(path)).replace("{fifo}.pvm", str(path))
            .replace("{fifo}.npz", str(path)).replace("{fifo}", str(path))
            .replace("{tmp}", str(tmp_path)) for a in argv]
    r = _check(*args[1:]) if args[0] == "check" else _phasec(*args)
    assert r.returncode == 2, r.stderr
    text = r.stdout + r.stderr
    assert "FIFO" in text or "unknown file type" in text, text
    assert "Traceback" not in text


def test_library_readers_refuse_special_files(tmp_path, fifo):
    path = fifo("m.py")
    with pytest.raises(ParseError, match="FIFO"):
        phasec.load(str(path))
    os.rename(path, path.with_suffix(".pvm"))
    with pytest.raises(ExecutableFormatError, match="FIFO"):
        Executable.load(path.with_suffix(".pvm"))
    zero = tmp_path / "zero.py"  # a link with a module's name
    zero.symlink_to("/dev/zero")
    with pytest.raises(ParseError, match="character device"):
        phasec.load(str(zero))
    with pytest.raises(FileAccessError, match="character device"):
        fileio.read_bytes("/dev/zero")


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.py"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
        r = _check(path)
    finally:
        sock.close()
    assert r.returncode == 2 and "it is a socket, not a regular file" in r.stdout


def test_standard_input_is_capped():
    with open("/dev/zero", "rb") as zero:
        r = _check("-", "--max-input-size", "1M", stdin=zero)
        assert r.returncode == 2
        assert "<stdin>: error[IN001]: it is larger than the input size limit of 1 MiB" in r.stdout
        zero.seek(0)
        r = _phasec("opt", "-", "--max-input-size", "1M", stdin=zero)
        assert r.returncode == 2 and "larger than the input size limit of 1 MiB" in r.stderr


def test_file_size_limit_option_and_environment(tmp_path, capsys):
    from phasec.cli import main

    src = tmp_path / "m.py"
    src.write_text(MODULE)
    size = src.stat().st_size
    assert main(["opt", str(src), "--max-input-size", str(size - 1)]) == 2
    err = capsys.readouterr().err
    assert f"cannot read '{src}'" in err and f"larger ({size} bytes) than the input size limit of {size - 1} bytes" in err
    assert "--max-input-size" in err and "PHASEC_MAX_INPUT_SIZE" in err
    assert main(["opt", str(src), "--max-input-size", str(size)]) == 0  # exactly fits
    capsys.readouterr()
    # each invocation leaves the process's cap as it found it (tests, notebooks)
    from phasec.fileio import DEFAULT_MAX_INPUT_BYTES, max_input_bytes
    from phasec.verifier.cli import main as check_main

    assert max_input_bytes() == DEFAULT_MAX_INPUT_BYTES
    check_main([str(src), "--max-input-size", "10"])
    assert max_input_bytes() == DEFAULT_MAX_INPUT_BYTES
    capsys.readouterr()
    r = _check(src, env={"PHASEC_MAX_INPUT_SIZE": "100"})
    assert r.returncode == 2 and "larger (" in r.stdout
    r = _check(src, env={"PHASEC_MAX_INPUT_SIZE": "lots"})
    assert r.returncode == 2 and "PHASEC_MAX_INPUT_SIZE: 'lots' is not a size" in r.stderr
    r = _phasec("opt", src, env={"PHASEC_MAX_INPUT_SIZE": "lots"})
    assert r.returncode == 2 and "'lots' is not a size" in r.stderr


@pytest.mark.parametrize("text, value", [("1000", 1000), ("512M", 512 << 20), ("4G", 4 << 30),
                                         ("1.5k", 1536), ("2GiB", 2 << 30), ("8 MB", 8 << 20)])
def test_parse_size(text, value):
    assert fileio.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "-5", "0", "12Q", "1e9"])
def test_parse_size_rejects(text):
    with pytest.raises(phasec.errors.InputError, match="size"):
        fileio.parse_size(text, "--max-input-size")


# ---------------------------------------------------------------------------
# Zip bombs (#4)
# ---------------------------------------------------------------------------

def _deflated_zeros(nbytes: int) -> bytes:
    """A raw deflate stream of ``nbytes`` zero bytes, built in chunks."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    parts = [comp.compress(chunk) for _ in range(nbytes >> 20)]
    return b"".join(parts) + comp.flush()


def _npz_bomb(nbytes: int, compressed_inner: bool = True) -> bytes:
    """An .npz whose one float32 array of ``nbytes`` zeros is deflated (numpy
    never writes it so; the format allows it): tiny on disk, huge inflated."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (nbytes // 4,)})
    data = header.getvalue()  # the zeros are streamed below
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED if compressed_inner
                         else zipfile.ZIP_STORED) as zf:
        with zf.open("c0.npy", "w", force_zip64=True) as fh:
            fh.write(data)
            zero = bytes(1 << 20)
            for _ in range(nbytes >> 20):
                fh.write(zero)
    return out.getvalue()


def _bomb_executable(tmp_path: Path, saved_exe: Path, npz: bytes) -> Path:
    """The saved executable with its constants.npz replaced by ``npz``
    (deflated again in the .pvm: compressed twice)."""
    members = _members(saved_exe)
    members["constants.npz"] = npz
    doc = json.loads(members["executable.json"])
    doc["constants"][0] = {"tensor": "c0"}
    members["executable.json"] = json.dumps(doc).encode()
    return _write_zip(tmp_path / "bomb.pvm", members)


def test_a_double_compressed_bomb_is_refused_before_inflating(tmp_path, saved_exe):
    """A 256 MiB array compressed twice is a few KiB on disk; with a 64 MiB
    limit it is refused from the declared sizes alone."""
    bomb = _bomb_executable(tmp_path, saved_exe, _npz_bomb(256 << 20))
    assert bomb.stat().st_size < 64 << 10
    fileio.set_max_input_bytes(64 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(ExecutableFormatError) as info:
            Executable.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        fileio.set_max_input_bytes(None)
    assert "more than the input size limit of 64 MiB" in str(info.value)
    assert peak < 16 << 20, f"{peak} bytes allocated while refusing a 256 MiB bomb"


def test_the_cli_refuses_the_bomb_with_the_limit_in_the_message(tmp_path, saved_exe):
    bomb = _bomb_executable(tmp_path, saved_exe, _npz_bomb(96 << 20))
    r = _phasec("run", bomb, "--max-input-size", "32M")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "damaged executable" in r.stderr and "32 MiB" in r.stderr


def _patch_declared_size(path: Path, member: str, size: int) -> None:
    """Make ``member`` declare ``size`` uncompressed bytes (local and central
    headers), as a hand-made bomb does; its data is unchanged."""
    raw = bytearray(path.read_bytes())
    name = member.encode()
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := raw.find(sig, start)) >= 0:
            name_at = start + (30 if sig == b"PK\x03\x04" else 46)
            if raw[name_at:name_at + len(name)] == name:
                raw[start + offset:start + offset + 4] = struct.pack("<I", size)
            start += 4
    path.write_bytes(bytes(raw))


def test_a_member_declaring_more_than_deflate_can_produce(tmp_path, saved_exe):
    path = tmp_path / "liar.pvm"
    path.write_bytes(saved_exe.read_bytes())
    _patch_declared_size(path, "kernels.json", 3_000_000_000)
    with pytest.raises(ExecutableFormatError, match="more than deflate can produce"):
        Executable.load(path)


def test_an_inner_array_whose_header_lies_about_its_size(tmp_path, saved_exe):
    """The header says 10**9 elements; the member holds 24 bytes of data."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (10**9,)})
    npz = io.BytesIO()
    with zipfile.ZipFile(npz, "w") as zf:
        zf.writestr("c0.npy", header.getvalue() + bytes(24))
    path = _bomb_executable(tmp_path, saved_exe, npz.getvalue())
    with pytest.raises(ExecutableFormatError, match=r"declares an array of shape \(1000000000,\)"):
        Executable.load(path)


def test_inputs_npz_bomb_is_refused(tmp_path, capsys):
    from phasec.cli import main

    bomb = tmp_path / "in.npz"
    bomb.write_bytes(_npz_bomb(64 << 20))
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    assert main(["run", str(src), "--inputs", str(bomb), "--max-input-size", "16M"]) == 2
    err = capsys.readouterr().err
    assert "--inputs" in err and "16 MiB" in err and "Traceback" not in err


@pytest.mark.parametrize("version", [1, 2])
def test_a_npy_header_with_an_unclosed_bracket_is_a_damaged_member(tmp_path, version):
    # numpy retries a header it cannot parse through tokenize, whose
    # TokenError escaped as "internal error" from `phasec run --inputs`
    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, }"
    text += b" " * (63 - (12 + len(text)) % 64) + b"\n"
    length = struct.pack("<H" if version == 1 else "<I", len(text))
    path = tmp_path / "in.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", b"\x93NUMPY" + bytes([version, 0]) + length + text + bytes(16))
    with pytest.raises(FileAccessError, match=r"member 'x\.npy': not a valid \.npy array "
                                              r"\(\('EOF in multi-line statement"):
        fileio.read_npz(path)


def test_pickled_arrays_are_never_loaded(tmp_path):
    obj = tmp_path / "o.npz"
    np.savez(obj, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(FileAccessError, match="Python objects"):
        fileio.read_npz(obj)


# ---------------------------------------------------------------------------
# Lazy constants
# ---------------------------------------------------------------------------

def test_constants_load_when_first_used(tmp_path, saved_exe):
    exe = Executable.load(saved_exe)
    tensors = [i for i in range(len(exe.constants)) if not exe.constants.loaded(i)]
    assert tensors, "the executable has tensor constants"
    out = VirtualMachine(exe, kernels="interp")["main"](X)
    np.testing.assert_allclose(out, EXPECTED)
    assert all(exe.constants.loaded(i) for i in tensors)


def test_an_unused_damaged_constant_is_never_read(tmp_path, saved_exe):
    """A constant nothing references stays on disk: its (corrupt) data is not
    inflated, and the program runs."""
    members = _members(saved_exe)
    doc = json.loads(members["executable.json"])
    inner = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(members["constants.npz"])) as zf, \
            zipfile.ZipFile(inner, "w") as out:
        for info in zf.infolist():
            out.writestr(info, zf.read(info))
        arr = io.BytesIO()
        np.lib.format.write_array(arr, np.ones(1000, "float32"))
        corrupt = bytearray(arr.getvalue())
        corrupt[-100:] = b"\xff" * 100  # the data is wrong, so its CRC will not match
        info = zipfile.ZipInfo("unused.npy")
        out.writestr(info, arr.getvalue())
    inner_bytes = bytearray(inner.getvalue())
    at = inner_bytes.find(arr.getvalue()[-100:])
    inner_bytes[at:at + 100] = corrupt[-100:]  # stored member: corrupt it in place
    doc["constants"].append({"tensor": "unused"})
    members["constants.npz"] = bytes(inner_bytes)
    members["executable.json"] = json.dumps(doc).encode()
    path = _write_zip(tmp_path / "extra.pvm", members)
    exe = Executable.load(path)
    out = VirtualMachine(exe, kernels="interp")["main"](X)
    np.testing.assert_allclose(out, EXPECTED)
    assert not exe.constants.loaded(len(exe.constants) - 1)
    with pytest.raises(ExecutableFormatError, match="damaged executable.*unused.npy"):
        exe.constants[len(exe.constants) - 1]  # read on demand: then the damage shows


# ---------------------------------------------------------------------------
# Damaged and modified executables (#7)
# ---------------------------------------------------------------------------

def _compressed_data_range(path: Path, member: str) -> tuple[int, int]:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    raw = path.read_bytes()
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:
                                                    info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    return start, start + info.compress_size


@pytest.mark.parametrize("member", ["executable.json", "constants.npz", "kernels.json"])
@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_one_flipped_byte_is_a_damaged_executable(tmp_path, saved_exe, member, where):
    start, end = _compressed_data_range(saved_exe, member)
    raw = bytearray(saved_exe.read_bytes())
    raw[start + int((end - start) * where)] ^= 0xFF
    path = tmp_path / "flipped.pvm"
    path.write_bytes(bytes(raw))
    r = _phasec("run", path, "--kernels", "interp")
    assert r.returncode == 2, r.stderr
    assert "damaged executable" in r.stderr and "internal error" not in r.stderr


def test_kernels_modified_after_build_are_refused(tmp_path, saved_exe):
    members = _members(saved_exe)
    kernels = json.loads(members["kernels.json"])
    text = json.dumps(kernels)
    assert "float32" in text
    members["kernels.json"] = text.replace('"float32"', '"float32" ', 1).encode()  # any edit
    path = _write_zip(tmp_path / "edited.pvm", members)
    with pytest.raises(ExecutableFormatError, match="modified after build"):
        Executable.load(path)
    r = _phasec("run", path)
    assert r.returncode == 2 and "modified after build" in r.stderr


def test_the_kernel_digest_is_the_sha256_of_the_kernel_file(saved_exe):
    import hashlib

    members = _members(saved_exe)
    doc = json.loads(members["executable.json"])
    assert doc["version"] == 3
    assert doc["kernel_sha256"] == hashlib.sha256(members["kernels.json"]).hexdigest()


# ---------------------------------------------------------------------------
# Bytecode that loops (#5)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("code, message", [
    ([["goto", 0]], "backward jump to instruction 0"),
    ([["ret", 0], ["goto", -1]], "backward jump to instruction 0"),
    ([["if", 0, 0], ["ret", 0]], "backward jump to instruction 0"),
])
def test_loops_in_bytecode_are_refused(tmp_path, saved_exe, code, message):
    members = _members(saved_exe)
    doc = json.loads(members["executable.json"])
    doc["functions"][0]["code"] = code
    members["executable.json"] = json.dumps(doc).encode()
    path = _write_zip(tmp_path / "loop.pvm", members)
    with pytest.raises(ExecutableFormatError, match=message):
        Executable.load(path)
    r = _phasec("run", path, timeout=120)
    assert r.returncode == 2 and message in r.stderr


@pytest.mark.parametrize("array", [np.asfortranarray(np.arange(6, dtype="float32").reshape(2, 3)),
                                   np.arange(6, dtype=">f4").reshape(2, 3)])
def test_constants_are_loaded_c_contiguous_in_native_byte_order(tmp_path, saved_exe, array):
    """numpy writes Fortran-order and big-endian arrays too; kernels take
    neither, so a constant arrives as the C-order native array it stands for."""
    npz = io.BytesIO()
    np.savez(npz, c0=array)
    exe = Executable.load(_bomb_executable(tmp_path, saved_exe, npz.getvalue()))
    value = exe.constants[0]
    assert value.flags.c_contiguous and value.dtype == np.dtype("float32")
    np.testing.assert_array_equal(value, np.arange(6).reshape(2, 3))
