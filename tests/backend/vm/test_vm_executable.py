"""VM executables: save and load, the format's versions and signatures, the
validation of hand-made or tampered bytecode, and a build-phase module
written in TVMScript through the VM, saved and loaded."""

import zipfile

import numpy as np
import pytest

import phasec
from phasec import ir
from phasec.backend.vm import (
    CalleeKind, Executable, ExecutableFormatError, VirtualMachine, codegen,
)
from phasec.backend.vm import bytecode as bc
from phasec.errors import VMError
from phasec.interp import run as interpret
from phasec.ir import tir

from helpers.vm_build import (
    UNIT, B, V, alloc, f32, func, module, straight_line_module, tensor, vector_add_kernel,
)


# ---------------------------------------------------------------------------
# Executables: save, load, validation
# ---------------------------------------------------------------------------


def _constants_module():
    x = V("x", tensor((3,)))
    c = ir.Constant(np.array([1.5, np.nan, -np.inf], "float32"))
    s, out, blk = alloc("out", [3])
    u = V("u", UNIT)
    main = func([x], [*blk, B(u, ir.Call(ir.GlobalVar("vadd"), [x, c, out]))],
                ir.Tuple([out, ir.PrimValue(tir.FloatImm(0.1, "float64")), ir.StringImm("hi")]))
    return module(main=main, vadd=vector_add_kernel())


def test_save_load_round_trip(tmp_path):
    exe = codegen(_constants_module())
    path = tmp_path / "model.pvm"
    exe.save(path)
    loaded = Executable.load(path)
    assert loaded.as_text() == exe.as_text()
    assert set(loaded.prim_funcs) == {"vadd"}
    assert phasec.structural_equal(loaded.prim_funcs["vadd"], exe.prim_funcs["vadd"])
    x = f32(1, 2, 3)
    for e in (exe, loaded):
        out, tenth, hi = VirtualMachine(e, kernels="interp")["main"](x)
        np.testing.assert_array_equal(out, [2.5, np.nan, -np.inf])
        assert tenth == 0.1 and hi == "hi"


def test_load_rejects_garbage(tmp_path):
    bad = tmp_path / "bad.pvm"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ExecutableFormatError, match="not a phasec executable"):
        Executable.load(bad)
    with pytest.raises(ExecutableFormatError, match="no such file"):
        Executable.load(tmp_path / "missing.pvm")
    other = tmp_path / "other.pvm"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("executable.json", '{"format": "something-else"}')
    with pytest.raises(ExecutableFormatError, match="something-else"):
        Executable.load(other)


def test_load_rejects_tampered_bytecode(tmp_path):
    path = tmp_path / "model.pvm"
    codegen(_constants_module()).save(path)
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    import json

    doc = json.loads(files["executable.json"])
    doc["functions"][0]["code"][-1] = ["ret", 999]  # register out of range
    files["executable.json"] = json.dumps(doc).encode()
    tampered = tmp_path / "tampered.pvm"
    with zipfile.ZipFile(tampered, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    with pytest.raises(ExecutableFormatError, match="register 999 out of range"):
        Executable.load(tampered)


def test_executable_validation_of_hand_made_bytecode():
    ok = bc.VMFunction("f", ("x",), 1, (bc.Ret(0),))
    Executable([ok], [], {})
    with pytest.raises(ExecutableFormatError, match="jump target"):
        Executable([bc.VMFunction("f", (), 1, (bc.Goto(5),))], [], {})
    with pytest.raises(ExecutableFormatError, match="unknown kernel 'k'"):
        Executable([bc.VMFunction("f", (), 1, (bc.Call(0, CalleeKind.KERNEL, "k", ()),
                                               bc.Ret(0)))], [], {})
    with pytest.raises(ExecutableFormatError, match="'f' takes 1 arguments, the call passes 0"):
        Executable([bc.VMFunction("f", ("x",), 1, (bc.Call(0, CalleeKind.VM_FUNC, 0, ()),
                                                   bc.Ret(0)))], [], {})


def _rewrite_doc(src, dst, edit):
    """Copy executable ``src`` to ``dst`` with ``edit(doc)`` applied to executable.json."""
    import json

    with zipfile.ZipFile(src) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(files["executable.json"])
    edit(doc)
    files["executable.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(dst, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    return dst


def test_signature_survives_save_and_load(tmp_path):
    n = tir.Var("n", "int64")
    x, s = V("x", tensor((n, 4))), V("s", ir.ShapeStructInfo([n]))
    t, k = V("t", ir.TupleStructInfo([tensor((n,), "int32"), ir.PrimStructInfo("int64")])), V("k")
    main = func([x, s, t, k], [], x)
    exe = codegen(module(main=main), verify=False)
    assert exe.functions[0].param_sinfo == (
        'R.Tensor((n, 4), dtype="float32")', "R.Shape([n])",
        'R.Tuple(R.Tensor((n,), dtype="int32"), R.Prim("int64"))', None)
    path = tmp_path / "sig.pvm"
    exe.save(path)
    loaded = Executable.load(path)
    for e in (exe, loaded):
        sig = e.signature("main")
        assert [name for name, _ in sig] == ["x", "s", "t", "k"]
        (_, xs), (_, ss), (_, ts), (_, ks) = sig
        dim = xs.shape[0]
        assert isinstance(dim, tir.Var) and dim.name == "n" and dim.dtype == "int64"
        assert xs.shape[1].value == 4 and xs.dtype == "float32"
        assert ss.values[0] is dim and ts.fields[0].shape[0] is dim  # one n for the signature
        assert ks is None
        assert phasec.structural_equal([p.struct_info for p in main.params[:3]],
                                       [xs, ss, ts])
    with pytest.raises(VMError, match="no function 'nope'; it has: main"):
        loaded.signature("nope")


def test_signature_distinct_variables_keep_distinct_names():
    n1, n2 = tir.Var("n", "int64"), tir.Var("n", "int64")
    main = func([V("a", tensor((n1,))), V("b", tensor((n2,)))], [], ir.Tuple([]))
    exe = codegen(module(main=main), verify=False)
    (_, a), (_, b) = exe.signature("main")
    assert a.shape[0] is not b.shape[0]
    assert exe.functions[0].param_sinfo == ('R.Tensor((n,), dtype="float32")',
                                            'R.Tensor((n_1,), dtype="float32")')


def test_executable_format_versions(tmp_path):
    from phasec.backend.vm.executable import FORMAT_VERSION

    path = tmp_path / "model.pvm"
    codegen(straight_line_module()).save(path)
    assert FORMAT_VERSION == 3

    def as_version_1(doc):
        doc["version"] = 1
        for f in doc["functions"]:
            del f["param_sinfo"]

    # versions 1 and 2 record no kernel digest: a file with kernels is refused, so
    # that editing the version cannot skip the digest check
    for version, edit in ((1, as_version_1), (2, lambda d: d.update(version=2))):
        def older(doc, edit=edit):
            edit(doc)
            del doc["kernel_sha256"]
        with pytest.raises(ExecutableFormatError, match=rf"version {version} records no kernel "
                                                        r"digest.*rebuild"):
            Executable.load(_rewrite_doc(path, tmp_path / f"v{version}.pvm", older))
        # ... with the digest left in (unchecked by those versions), just as refused
        with pytest.raises(ExecutableFormatError, match="records no kernel digest"):
            Executable.load(_rewrite_doc(path, tmp_path / f"v{version}d.pvm", edit))
    # version 1 without kernels (no signatures) still loads and runs; its signature
    # is unknown
    x, y = V("x", tensor((tir.Var("n", "int64"),))), V("y", tensor((2,)))
    plain = tmp_path / "plain.pvm"
    codegen(module(main=func([x, y], [], ir.Tuple([y, x])))).save(plain)
    old = Executable.load(_rewrite_doc(plain, tmp_path / "v1.pvm", as_version_1))
    assert old.signature("main") == [("x", None), ("y", None)] and not old.prim_funcs
    out = VirtualMachine(old, kernels="interp")["main"](f32(1, 2, 3), f32(3, 4))
    np.testing.assert_array_equal(out[0], [3, 4])
    np.testing.assert_array_equal(out[1], [1, 2, 3])
    # an unknown version is refused with a clear message
    newer = _rewrite_doc(path, tmp_path / "v9.pvm", lambda d: d.update(version=9))
    with pytest.raises(ExecutableFormatError, match=r"version 9 is not supported.*reads "
                                                    r"versions 1, 2, 3.*phasec build"):
        Executable.load(newer)


@pytest.mark.parametrize("edit, message", [
    (lambda f: f.pop("param_sinfo"), "'main' has no param_sinfo"),
    (lambda f: f.update(param_sinfo=["R.Tensor((n,))"]), "one struct info per parameter"),
    (lambda f: f.update(param_sinfo="R.Tensor"), "param_sinfo must be a list"),
    (lambda f: f.update(param_sinfo=[3, None]), "param_sinfo must be a list"),
    (lambda f: f.update(param_sinfo=["R.Tensor((n,), \"nope\")", None]),
     "parameter 'x': bad struct info.*unknown dtype 'nope'"),
    (lambda f: f.update(param_sinfo=["__import__('os').system('false')", None]),
     "parameter 'x': bad struct info.*expected a struct info annotation"),
])
def test_load_rejects_bad_signatures(tmp_path, edit, message):
    path = tmp_path / "model.pvm"
    codegen(straight_line_module()).save(path)
    bad = _rewrite_doc(path, tmp_path / "bad.pvm", lambda d: edit(d["functions"][0]))
    with pytest.raises(ExecutableFormatError, match=message):
        Executable.load(bad)


def test_hand_made_signature_is_validated():
    with pytest.raises(ExecutableFormatError, match="one struct info per parameter"):
        Executable([bc.VMFunction("f", ("x",), 1, (bc.Ret(0),), ())], [], {})
    with pytest.raises(ExecutableFormatError, match="function 'f', parameter 'x': bad struct"):
        Executable([bc.VMFunction("f", ("x",), 1, (bc.Ret(0),), ("R.Tensor((",))], [], {})
    exe = Executable([bc.VMFunction("f", ("x",), 1, (bc.Ret(0),), ("R.Prim(value=k)",))],
                     [], {})
    assert exe.signature("f")[0][1].value.name == "k"


def test_instruction_json_round_trip():
    instrs = [bc.Call(1, CalleeKind.PACKED, "p", (0,)), bc.Ret(1), bc.Goto(-2), bc.If(0, 3),
              bc.LoadConst(2, 0), bc.Match(0, ("tensor", "float32", 1, (("bind", 3),)), "w", "e"),
              bc.MakeShape(1, (("bin", "*", ("reg", 3), ("imm", 2)),)),
              bc.MakePrim(1, ("reg", 3), "int64"), bc.MakeTuple(1, (0, 2)), bc.GetItem(1, 0, 1),
              bc.MakeClosure(1, 0, (2,)), bc.Move(1, 0), bc.Kill(1, 0)]
    for ins in instrs:
        assert bc.instruction_from_json(ins.to_json()) == ins
        assert str(ins)
    with pytest.raises(ValueError):
        bc.instruction_from_json(["nope"])


# ---------------------------------------------------------------------------
# A build-phase module written in TVMScript
# ---------------------------------------------------------------------------

SCRIPT = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "build"})

    @T.prim_func(private=True)
    def add(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, (n,), "float32")
        for i in range(n):
            C[i] = A[i] + B[i]

    @R.function(pure=False, private=True)
    def lifted(x: R.Tensor(("n",), "float32"), c: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        st: R.Object = R.vm.alloc_storage(R.shape([n * 4]), runtime_device_index=0, dtype="uint8")
        out: R.Tensor((n,), "float32") = R.vm.alloc_tensor(st, R.prim_value(0), R.shape([n]), dtype="float32")
        _ = cls.add(x, c, out)
        return out

    @R.function(pure=False)
    def fact(k: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        c: R.Tensor((), "bool") = R.call_packed("test.vm.le1", k, sinfo_args=R.Tensor((), "bool"))
        if c:
            r: R.Tensor((), "int64") = k
        else:
            m: R.Tensor((), "int64") = R.call_packed("test.vm.sub1", k, sinfo_args=R.Tensor((), "int64"))
            rec: R.Tensor((), "int64") = cls.fact(m)
            r: R.Tensor((), "int64") = R.call_packed("test.vm.mul", k, rec, sinfo_args=R.Tensor((), "int64"))
        return r

    @R.function(pure=False)
    def main(x: R.Tensor(("b",), "float32"), k: R.Tensor((), "int64")):
        b = T.int64()
        clo = R.make_closure(cls.lifted, (x,))
        y: R.Tensor((b,), "float32") = R.invoke_closure(clo, (x,), sinfo_args=R.Tensor((b,), "float32"))
        f = cls.fact(k)
        return (y, f)
'''


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_tvmscript_module_through_vm_and_interpreter(packed_funcs, kernels, tmp_path):
    packed_funcs("test.vm.le1", lambda k: np.asarray(k <= 1))
    packed_funcs("test.vm.sub1", lambda k: k - 1)
    packed_funcs("test.vm.mul", lambda a, b: a * b)
    mod = phasec.parse(SCRIPT)
    exe = codegen(mod)
    exe.save(tmp_path / "m.pvm")
    for e in (exe, Executable.load(tmp_path / "m.pvm")):
        vm = VirtualMachine(e, kernels=kernels)
        for x in (f32(1, 2), f32(1, 2, 3, 4)):
            y, f = vm["main"](x, np.int64(5))
            np.testing.assert_array_equal(y, 2 * x)
            assert int(f) == 120
    y, f = interpret(mod, f32(1, 2), np.int64(6))
    np.testing.assert_array_equal(y, [2, 4])
    assert int(f) == 720
