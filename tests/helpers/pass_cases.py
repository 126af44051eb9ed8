"""Shared checks for the pass tests (test_pass_normalize / _lambda_lifting / _opt).

A *case file* in tests/passes/cases/ is TVMScript for the module before a pipeline,
a line ``# ---- after ----``, then TVMScript for the expected result. Header
comments at the top configure it::

    # pipeline: FoldConstant,DeadCodeElimination    (a textual pipeline spec)
    # opt_level: 3                                  (PassContext opt_level; default 3)
    # idempotent: yes                               (running it again changes nothing)
    # results: no                                   (skip the interpreter comparison)

:func:`check_pass` runs a pass and checks everything a pass must satisfy:
the output verifies for its phase, the input is unchanged (structural hash),
the expected module is reached, the result prints as TVMScript that parses
back to the same module, the reference interpreter gives the same results on
random inputs, and (optionally) idempotence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec import verifier
from phasec import parse
from phasec.interp import Closure, run
from phasec.ir import (
    Function, IRModule, PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
    assert_structural_equal, structural_hash, tir,
)
from phasec.transform import Pass, PassContext, parse_pipeline

from helpers.paths import PASS_CASES

CASES_DIR = PASS_CASES
AFTER_MARKER = "# ---- after ----"
HEADER_KEYS = frozenset({"pipeline", "opt_level", "idempotent", "results"})


@dataclass
class Case:
    name: str
    pipeline: str
    opt_level: int
    idempotent: bool
    results: bool
    before: str
    after: str


def case_names(prefix: str = "") -> list[str]:
    """Names (file stems) of the case files starting with ``prefix``."""
    return sorted(p.stem for p in CASES_DIR.glob(f"{prefix}*.py"))


def load_case(name: str) -> Case:
    text = (CASES_DIR / f"{name}.py").read_text()
    before, sep, after = text.partition(AFTER_MARKER)
    assert sep, f"{name}.py has no '{AFTER_MARKER}' line"
    header: dict[str, str] = {}
    for line in before.splitlines():
        key, sep, value = line.removeprefix("# ").partition(":")
        if line.startswith("# ") and sep and key.strip() in HEADER_KEYS:
            header[key.strip()] = value.strip()
    assert "pipeline" in header, f"{name}.py has no '# pipeline: ...' header"
    return Case(name, header["pipeline"], int(header.get("opt_level", 3)),
                header.get("idempotent", "no") == "yes", header.get("results", "yes") == "yes",
                before, after)


# ---------------------------------------------------------------------------
# Random inputs and result comparison
# ---------------------------------------------------------------------------

def _dim(d: Any, syms: dict, rng: np.random.Generator) -> int:
    if type(d) is tir.IntImm:
        return d.value
    if type(d) is tir.Var:
        if d not in syms:
            syms[d] = int(rng.integers(2, 5))
        return syms[d]
    raise ValueError(f"cannot pick a value for dimension {d!r}")


def random_value(sinfo: Any, syms: dict, rng: np.random.Generator) -> Any:
    """A random run-time value fitting ``sinfo`` (symbolic dims shared via ``syms``)."""
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None:  # unknown dims: any shape of the right rank
            shape = tuple(int(rng.integers(2, 5)) for _ in range(max(sinfo.ndim, 0)))
        else:
            shape = tuple(_dim(d, syms, rng) for d in sinfo.shape)
        dtype = sinfo.dtype
        if dtype.startswith("float"):
            return rng.standard_normal(shape).astype(dtype)
        if dtype == "bool":
            return rng.integers(0, 2, shape).astype(bool)
        return rng.integers(-4, 5, shape).astype(dtype)
    if isinstance(sinfo, ShapeStructInfo):
        return tuple(_dim(d, syms, rng) for d in sinfo.values)
    if isinstance(sinfo, PrimStructInfo):
        return _dim(sinfo.value, syms, rng) if sinfo.value is not None else int(rng.integers(0, 5))
    if isinstance(sinfo, TupleStructInfo):
        return tuple(random_value(f, syms, rng) for f in sinfo.fields)
    raise ValueError(f"cannot make a random value of {sinfo!r}")


def random_args(func: Function, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    syms: dict = {}
    return [random_value(p.struct_info, syms, rng) for p in func.params]


def assert_same_value(a: Any, b: Any) -> None:
    if isinstance(a, Closure) or isinstance(b, Closure):
        assert isinstance(a, Closure) and isinstance(b, Closure), (a, b)
        return  # compared by calling them (see assert_same_results)
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            assert_same_value(x, y)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(a, b)


def assert_same_results(before: IRModule, after: IRModule, entry: str = "main",
                        seeds: tuple[int, ...] = (0, 1), args: list | None = None) -> None:
    """The reference interpreter gives equal results for ``entry`` on random inputs."""
    func = before[entry]
    for seed in seeds:
        call_args = args if args is not None else random_args(func, seed)
        assert_same_value(run(before, *call_args, entry=entry), run(after, *call_args, entry=entry))
        if args is not None:
            break


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------

def check_pass(pass_: Pass, mod: IRModule, expected: IRModule | str | None = None, *,
               opt_level: int = 3, idempotent: bool = False, results: bool = True,
               verify: str = "each", entry: str = "main") -> IRModule:
    """Run ``pass_`` on ``mod`` and check the properties every pass must have."""
    before_hash = structural_hash(mod)
    before_text = mod.script()
    with PassContext(opt_level=opt_level, verify=verify):
        out = pass_(mod)
    verifier.verify(out)
    # What the pass produced prints as TVMScript that reads back the same.
    assert_structural_equal(parse(out.script()), out)
    assert structural_hash(mod) == before_hash, "the pass modified its input"
    assert mod.script() == before_text, "the pass modified its input"
    if expected is not None:
        if isinstance(expected, str):
            expected = parse(expected)
        try:
            assert_structural_equal(out, expected)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- got:\n{out.script()}\n--- expected:\n"
                                 f"{expected.script()}") from None
    if results and entry in mod.functions:
        assert_same_results(mod, out, entry)
    if idempotent:
        with PassContext(opt_level=opt_level, verify=verify):
            again = pass_(out)
        assert_structural_equal(again, out)
    return out


def run_case(name: str) -> IRModule:
    """Check one case file (see the module docstring)."""
    case = load_case(name)
    before = parse(case.before, f"{name}.py")
    pipeline = parse_pipeline(case.pipeline)
    return check_pass(pipeline, before, case.after, opt_level=case.opt_level,
                      idempotent=case.idempotent, results=case.results)
