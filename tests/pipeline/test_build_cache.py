"""Whole builds kept between processes (phasec/buildcache.py): a second
build of the same file reuses the first's executable and computes what ONNX
Runtime computes; a changed file is built again; a planted or mismatching
entry is refused and rebuilt (nothing in it runs); builds are deterministic;
``phasec cache`` counts and clears the builds."""

from __future__ import annotations

import base64
import os
import pickle
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec import buildcache
from phasec.backend.llvm import diskcache


def _model(path: Path, seed: int) -> Path:
    """x[2, 8] @ W[8, 5] + b, then Relu, with seeded random weights."""
    rng = np.random.default_rng(seed)
    w, b = rng.standard_normal((8, 5)).astype("float32"), rng.standard_normal(5).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


X = np.linspace(-2, 2, 16, dtype=np.float32).reshape(2, 8)


def _check(exe: phasec.Executable, path: Path) -> None:
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": X})
    got = np.asarray(phasec.VirtualMachine(exe)["main"](X))
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-6)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, and no kernels compiled earlier in this
    process: a kernel found in memory is not written to the new directory,
    so a test's "warm" build after an earlier test had compiled the same
    kernel missed on disk (the order -n 2 gave once)."""
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PHASEC_KERNEL_CACHE", raising=False)
    phasec.backend.llvm.clear_cache()
    return tmp_path / "cache"


def _no_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("built again")
    import phasec.pipeline

    monkeypatch.setattr(phasec.pipeline, "build", refuse)


def _entry(cache: Path) -> Path:
    (entry,) = cache.glob("*/*.kb")
    return entry


def _entry_of(cache: Path, key: str) -> Path:
    (entry,) = cache.glob(f"*/{key}*")
    return entry


def test_a_warm_build_maps_its_kernels_by_their_plan_and_computes_as_the_cold_one(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hit takes the kernels' fingerprint, program key and ABIs from the
    entry (no walk of the TIR: the walks refuse here) and its results equal
    the cold build's exactly (and ORT's)."""
    from phasec.backend.llvm import runtime
    from phasec.ir import structural

    path = _model(tmp_path / "m.onnx", 5)
    cold = buildcache.build_file(path)
    _check(cold, path)
    want = np.asarray(phasec.VirtualMachine(cold)["main"](X))
    phasec.backend.llvm.clear_cache()  # (as a fresh process: from the disk cache)

    def walked(*args, **kwargs):
        raise AssertionError("walked the TIR")
    with monkeypatch.context() as m:
        _no_builds(m)
        for module, name in ((runtime, "_abis_for"), (runtime, "exact_fingerprint"),
                             (runtime, "structural_hash"), (runtime, "refuse_host_calls"),
                             (structural, "_tokens")):
            m.setattr(module, name, walked)
        warm = buildcache.build_file(path)
    got = np.asarray(phasec.VirtualMachine(warm)["main"](X))
    assert got.tobytes() == want.tobytes()


def test_a_second_build_reuses_the_first(cache: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = _model(tmp_path / "m.onnx", 0)
    _check(buildcache.build_file(path), path)
    assert diskcache.info()["builds"] == 1
    with monkeypatch.context() as m:
        _no_builds(m)
        _check(buildcache.build_file(path), path)  # from the cache: nothing lowered
    # another file content is another build, computing with its own weights
    _model(path, 1)
    _check(buildcache.build_file(path), path)
    assert diskcache.info()["builds"] == 2


def test_planted_and_mismatching_entries_are_refused_and_rebuilt(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = _model(tmp_path / "one.onnx", 0), _model(tmp_path / "two.onnx", 1)
    buildcache.build_file(one)
    entry_one = _entry(cache)
    buildcache.build_file(two)
    (entry_two,) = set(cache.glob("*/*.kb")) - {entry_one}
    # another model's (valid) entry filed under this one's name: bound to its key, refused
    entry_one.write_bytes(entry_two.read_bytes())
    _check(buildcache.build_file(one), one)
    # an entry phasec wrote, under the right key, whose kernels' plan is not
    # theirs: the plan does not fit (its program key is not its fingerprint's),
    # so the kernels are compiled from their TIR, and compute the right thing
    key, _ = buildcache.lookup(one)
    data, text = diskcache.load(key, kind="build")
    head, _, pickled = text.partition("\n")
    form, fingerprint, program_key = head.split(" ")
    assert form == buildcache.ENTRY_FORMAT
    assert diskcache.store(key, data, f"{form} {'0' * 64} {program_key}\n{pickled}",
                           kind="build")
    phasec.backend.llvm.clear_cache()
    _check(buildcache.lookup(one)[1], one)
    # an older phasec's entry (a fingerprint line, the kernels alone): a miss, with a warning
    old = base64.b64encode(pickle.dumps({})).decode()
    assert diskcache.store(key, data, fingerprint + "\n" + old, kind="build")
    with pytest.warns(diskcache.KernelCacheWarning, match="not 'phasec-build-2'"):
        assert buildcache.lookup(one)[1] is None
        _check(buildcache.build_file(one), one)
    # an entry changed on disk (one byte of its kernels): refused before anything is read
    entry = _entry_of(cache, key)
    raw = bytearray(entry.read_bytes())
    raw[-10] ^= 1
    entry.write_bytes(bytes(raw))
    assert buildcache.lookup(one)[1] is None
    _check(buildcache.build_file(one), one)
    text = diskcache.load(key, kind="build")[1]
    # ... or whose pickle would make something other than TIR: never unpickled that far
    ran: list[str] = []
    monkeypatch.setattr(os, "getcwd", lambda: ran.append("ran") or "/")
    evil = b"cos\ngetcwd\n(tR."  # a pickle that calls os.getcwd()
    assert pickle.loads(evil) == "/" and ran == ["ran"]  # (as plain pickle would)
    fingerprint = text.partition("\n")[0]  # (the entry's first line, as it is)
    assert diskcache.store(key, data, fingerprint + "\n" + base64.b64encode(evil).decode(),
                           kind="build")
    ran.clear()
    with pytest.warns(diskcache.KernelCacheWarning, match="os.getcwd is not part of the TIR"):
        assert buildcache.lookup(one)[1] is None and not ran
        _check(buildcache.build_file(one), one)
    # ... nor a dotted name through the TIR module's own imports (numpy as np)
    import numpy

    monkeypatch.setattr(numpy, "getbufsize", lambda: ran.append("ran") or 8192)
    module, name = b"phasec.ir.tir", b"np.getbufsize"  # STACK_GLOBAL of a dotted name, called
    dotted = b"\x80\x04\x8c%c%s\x94\x8c%c%s\x94\x93)R." % (len(module), module, len(name), name)
    assert pickle.loads(dotted) == 8192 and ran == ["ran"]  # (as plain pickle would)
    assert diskcache.store(key, data, fingerprint + "\n" + base64.b64encode(dotted).decode(),
                           kind="build")
    ran.clear()
    with pytest.warns(diskcache.KernelCacheWarning, match="np.getbufsize is not part of the TIR"):
        assert buildcache.lookup(one)[1] is None and not ran
    # ... nor a TIR node made of the wrong number of fields
    from phasec.ir import tir

    class Malformed:
        def __reduce__(self):
            return buildcache._tir_node, (tir.Var, (1,))

    assert diskcache.store(key, data, fingerprint + "\n" + base64.b64encode(
        pickle.dumps({"k": Malformed()})).decode(), kind="build")
    with pytest.warns(diskcache.KernelCacheWarning, match="is no TIR node of 1 fields"):
        assert buildcache.lookup(one)[1] is None
        _check(buildcache.build_file(one), one)


def test_builds_are_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _model(tmp_path / "m.onnx", 3)
    entries = []
    monkeypatch.delenv("PHASEC_KERNEL_CACHE", raising=False)
    for name in ("a", "b"):
        monkeypatch.setenv("PHASEC_CACHE_DIR", str(tmp_path / name))
        buildcache.build_file(path)
        key, _ = buildcache.lookup(path)
        entries.append(diskcache.load(key, kind="build"))
    assert entries[0] == entries[1]


def test_phasec_cache_counts_and_clears_builds(cache: Path, tmp_path: Path, capsys) -> None:
    from phasec.cli import main

    buildcache.build_file(_model(tmp_path / "m.onnx", 0))
    assert main(["cache", "info"]) == 0
    assert "(1 of them whole builds)" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    capsys.readouterr()
    assert diskcache.info()["entries"] == 0 and not list(cache.glob("*/*.kb"))


def test_cache_off_builds_every_time(cache: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    path = _model(tmp_path / "m.onnx", 0)
    _check(buildcache.build_file(path), path)
    assert buildcache.lookup(path) == (None, None)
    assert not cache.exists() or not list(cache.glob("*/*.kb"))


def test_aligned_npz_reads_back_with_every_array_aligned() -> None:
    """write_aligned_npz is an ordinary .npz (numpy reads it back equal), and
    each array's data starts on a 64-byte boundary of the file (offsets read
    from the zip and .npy headers with zipfile and numpy themselves)."""
    import io
    import struct
    import zipfile

    from phasec.fileio import write_aligned_npz

    rng = np.random.default_rng(0)
    arrays = {"a": rng.standard_normal((3, 5)).astype("float32"), "b": np.arange(7, dtype=np.int8),
              "scalar": np.float64(2.5), "empty": np.zeros((0, 4), np.float32),
              "fortran": np.asfortranarray(rng.standard_normal((4, 3))),
              "long_name_" * 5: np.ones(13, np.bool_)}
    buffer = io.BytesIO()
    buffer.write(b"x" * 13)  # the archive need not start on a boundary of its own file
    write_aligned_npz(buffer, arrays)
    data = buffer.getvalue()
    back = np.load(io.BytesIO(data[13:]), allow_pickle=False)
    assert sorted(back.files) == sorted(arrays)
    for name, want in arrays.items():
        np.testing.assert_array_equal(back[name], want)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
            start = info.header_offset + 30 + name_len + extra_len
            with zf.open(info) as fp:
                np.lib.format.read_array_header_1_0(fp) if np.lib.format.read_magic(fp) == (
                    1, 0) else np.lib.format.read_array_header_2_0(fp)
                header = fp.tell()
            assert info.compress_type == zipfile.ZIP_STORED
            assert (start + header) % 64 == 0, info.filename


def test_a_cached_build_uses_its_constants_in_place(cache: Path, tmp_path: Path) -> None:
    """A warm build's tensor constants are read-only views of the entry read
    from disk (no copy), each on a 64-byte boundary, and compute what ONNX
    Runtime computes."""
    path = _model(tmp_path / "m.onnx", 3)
    buildcache.build_file(path)
    exe = buildcache.build_file(path)
    arrays = [c for c in (exe.constants[i] for i in range(len(exe.constants)))
              if isinstance(c, np.ndarray) and c.size]
    assert arrays
    entry_size = _entry(cache).stat().st_size
    for arr in arrays:
        assert not arr.flags.writeable
        assert arr.__array_interface__["data"][0] % 64 == 0
        owner = arr
        while isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        # a view of the memory the whole entry was read into, not an array of its own
        assert isinstance(owner, memoryview) and len(owner.obj) >= entry_size
    _check(exe, path)


def test_a_model_with_external_weights_is_never_kept(cache: Path, tmp_path: Path) -> None:
    """Weights in a file of their own are not in the build key: such a model
    is built every time (no entry), computing what ONNX Runtime computes with
    the weights its side file holds now."""
    import onnx

    path = tmp_path / "ext.onnx"
    for seed in (4, 5):
        model = onnx.load_from_string(_model(tmp_path / "plain.onnx", seed).read_bytes())
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location="ext.data", size_threshold=0)
        _check(buildcache.build_file(path), path)
        assert diskcache.info()["builds"] == 0


def _record_workers_before(module, name: str, event: str,
                           monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list]:
    """(events, workers): "worker" recorded as each compile worker starts and
    ``event`` as ``module.name`` (the build, or the passes) is called; a model
    of 3 bindings or more counts as large, on two compile processes."""
    from phasec.backend.llvm import parallel

    events: list[str] = []
    workers: list[parallel._Worker] = []
    real_init, real_call = parallel._Worker.__init__, getattr(module, name)

    def init(self, *args):
        real_init(self, *args)
        workers.append(self)
        events.append("worker")

    def call(*args, **kwargs):
        events.append(event)
        return real_call(*args, **kwargs)

    monkeypatch.setattr(parallel._Worker, "__init__", init)
    monkeypatch.setattr(module, name, call)
    monkeypatch.setenv("PHASEC_COMPILE_JOBS", "2")
    monkeypatch.setattr(buildcache, "STANDBY_BINDINGS", 3)
    return events, workers


def test_a_cold_build_of_a_large_model_starts_a_compile_worker_first(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (a model of 3 bindings or more counts as large here) the worker is started
    # before the passes run, and none is left once the build is done
    from phasec.backend.llvm import parallel

    import phasec.pipeline

    events, workers = _record_workers_before(phasec.pipeline, "build", "build", monkeypatch)
    path = _model(tmp_path / "m.onnx", 0)
    _check(buildcache.build_file(path), path)
    assert events == ["worker", "build"]  # (one module: the worker was not taken)
    assert all(w.proc is not None and w.proc.returncode is not None for w in workers)
    assert parallel._standby == []
    # a small model, or one process: no worker
    events.clear()
    for bindings, jobs in ((1000, "2"), (3, "1")):
        monkeypatch.setattr(buildcache, "STANDBY_BINDINGS", bindings)
        monkeypatch.setenv("PHASEC_COMPILE_JOBS", jobs)
        small = _model(tmp_path / f"{bindings}{jobs}.onnx", 1)
        _check(buildcache.build_file(small), small)
    assert events == ["build", "build"]


def test_phasec_run_starts_the_worker_before_its_passes_and_keeps_the_build(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the command's own cold build (timed pass by pass) overlaps as build_file's does
    import phasec.cli.run as run_cli
    from phasec.backend.llvm import parallel
    from phasec.cli import main

    events, workers = _record_workers_before(run_cli, "lower", "passes", monkeypatch)
    path = _model(tmp_path / "m.onnx", 0)
    assert main(["run", str(path), "-q", "--repeat", "1"]) == 0
    assert events == ["worker", "passes"]
    assert all(w.proc is not None and w.proc.returncode is not None for w in workers)
    assert parallel._standby == []
    assert diskcache.info()["builds"] == 1  # kept, the entry packed meanwhile
    assert main(["run", str(path), "-q", "--repeat", "1"]) == 0
    assert "reused from the build cache" in capsys.readouterr().out
    assert events == ["worker", "passes"]  # the second run built nothing


def test_kernels_read_back_field_for_field() -> None:
    """A build entry's kernels (SqueezeNet's: convolutions on Winograd tiles and
    GEMM panels, pools, concatenations, a softmax) read back with every field
    of every node as it was: pickled again, the same bytes (the pickle holds
    each node's fields, spans and derived ones included, and which are shared)."""
    import io
    import os

    import onnx

    from phasec.frontend.onnx import from_onnx
    from phasec.ir.structural import exact_fingerprint

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        "light_squeezenet.onnx")
    funcs = dict(phasec.build(from_onnx(path), kernels="none").prim_funcs)

    def pickled(kernels: dict) -> bytes:
        out = io.BytesIO()
        buildcache._KernelPickler(out, protocol=5).dump(kernels)
        return out.getvalue()

    data = pickled(funcs)
    back = buildcache._KernelUnpickler(io.BytesIO(data)).load()
    assert back.keys() == funcs.keys() and all(back[k] is not funcs[k] for k in funcs)
    assert pickled(back) == data
    assert exact_fingerprint(back) == exact_fingerprint(funcs)


def test_a_node_field_that_is_no_slot_is_set_as_setstate_sets_it() -> None:
    """The unpickler sets each field through its slot, or as the dataclass's
    ``__setstate__`` does (``object.__setattr__``, frozen or not) for one that
    is no slot; both read back the value."""
    import dataclasses

    from phasec.ir import tir

    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int

    node = object.__new__(Plain)
    buildcache._setter(Plain, "a")(node, 3)
    assert node.a == 3
    var = object.__new__(tir.Var)
    for name, value in zip(buildcache._NODE_FIELDS[tir.Var], ("n", "int64", None)):
        buildcache._setter(tir.Var, name)(var, value)
    assert (var.name, var.dtype) == ("n", "int64")


@pytest.mark.parametrize("error", [RuntimeError("LLVM failed"), KeyboardInterrupt()])
@pytest.mark.parametrize("stored_first", [True, False])
def test_an_entry_stored_while_the_kernels_compile_goes_if_they_fail(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException,
        stored_first: bool) -> None:
    """The entry is stored while the workers compile (the meanwhile job, run
    by the compilation: here as the kernels start); kernels that then fail,
    or a Ctrl-C, leave no entry, nor do ones that fail before it was stored;
    kernels that compile keep it, stored before they were done."""
    from phasec.backend.llvm import parallel
    from phasec.frontend.onnx import from_onnx

    path = _model(tmp_path / "m.onnx", 0)
    key, _ = buildcache.lookup(path)
    exe = phasec.build(from_onnx(str(path)), kernels="none")
    compile_kernels = type(exe).kernels
    seen: list[int] = []

    def kernels(self, backend: str = "llvm"):
        if stored_first:
            parallel._pending.job.run()  # (what compile_modules does once its workers have modules)
        seen.append(diskcache.info()["builds"])
        if error is not None:
            raise error
        return compile_kernels(self, backend)

    monkeypatch.setattr(type(exe), "kernels", kernels)
    with pytest.raises(type(error)):
        buildcache.compile_and_remember(key, exe)
    assert seen == [1 if stored_first else 0]
    assert diskcache.info()["builds"] == 0 and buildcache.lookup(path)[1] is None
    error = None
    buildcache.compile_and_remember(key, exe)
    assert seen[-1] == (1 if stored_first else 0) and diskcache.info()["builds"] == 1
    monkeypatch.setattr(type(exe), "kernels", compile_kernels)
    _no_builds(monkeypatch)
    _check(buildcache.build_file(path), path)  # (the entry, read back)


#: what a build cache hit never uses, imported only to build (a test below)
_BUILD_ONLY = ("phasec.pipeline", "phasec.script.loader", "onnx", "phasec.passes")


def test_a_warm_build_imports_nothing_it_does_not_use(cache: Path, tmp_path: Path) -> None:
    """``import phasec`` and ``import phasec.buildcache`` import no pass, no
    pipeline, no script loader nor onnx, and neither does a build that hits the cache (in a
    fresh process); a miss imports them and builds."""
    import subprocess
    import sys

    path = _model(tmp_path / "m.onnx", 7)
    script = (f"import sys, phasec; a = set(sys.modules); import phasec.buildcache; "
              f"b = set(sys.modules); phasec.buildcache.build_file({str(path)!r}); "
              f"print([m for m in {_BUILD_ONLY!r} if m in a], "
              f"[m for m in {_BUILD_ONLY!r} if m in b], "
              f"[m for m in {_BUILD_ONLY!r} if m in sys.modules])")

    def run() -> str:
        return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                              text=True, env={**os.environ}).stdout.strip()
    # cold: a miss reads the model and builds (an ONNX model: no script loader)
    assert run() == "[] [] ['phasec.pipeline', 'onnx', 'phasec.passes']"
    assert run() == "[] [] []"  # warm


def test_a_build_under_other_threads_is_another_entry(cache: Path, tmp_path: Path) -> None:
    """The threads set when building are part of the key (a stem's kernel
    is split in as many bands): a build on two threads does not take the
    one made on one, and each computes what ORT computes."""
    from phasec.backend.llvm import get_num_threads, set_num_threads

    path = _model(tmp_path / "m.onnx", 3)
    before = get_num_threads()
    try:
        for threads, builds in ((1, 1), (2, 2), (1, 2)):
            set_num_threads(threads)
            _check(buildcache.build_file(path), path)
            assert diskcache.info()["builds"] == builds
    finally:
        set_num_threads(before)
