"""Random inputs are capped by the memory available and made in place
(issue 27, #5: ``phasec run`` made random inputs up to 16 GiB whatever the
machine had, peaking at ~5x the tensor's size)."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import phasec
from phasec.cli import main
from phasec.cli._inputs import make_inputs
from phasec.errors import InputError
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.runtime import random_inputs
from phasec import testing as phasec_testing

HUGE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1048576, 1048576), dtype="float32")) -> R.Tensor((1048576, 1048576), dtype="float32"):
        y = R.add(x, x)
        return y
'''


def _tensor(*shape, dtype="float32"):
    return TensorStructInfo([tir.IntImm(d, "int64") for d in shape], dtype)


@pytest.fixture
def memory_64m(monkeypatch):
    """A machine with 64 MiB available: random inputs may take 32 MiB."""
    monkeypatch.setattr(random_inputs, "available_memory", lambda: 64 << 20)


def test_an_input_beyond_the_budget_is_named_with_its_shape_and_the_cap(memory_64m):
    with pytest.raises(InputError, match=r"parameter 'w' would be a float32 array of "
                                         r"shape \(4096, 4096\) \(64 MiB\), more than random "
                                         r"inputs may take: 32 MiB \(half the memory available\)"
                                         r".*--inputs"):
        make_inputs([("w", _tensor(4096, 4096))], {}, {}, 0)


def test_the_budget_is_shared_by_all_random_inputs(memory_64m):
    params = [("a", _tensor(5, 1 << 20)), ("b", TupleStructInfo([_tensor(4, 1 << 20)]))]
    with pytest.raises(InputError, match=r"parameter 'b'\[0\] would be .* shape \(4, 1048576\) "
                                         r"\(16 MiB\).*after 20 MiB of other random inputs"):
        make_inputs(params, {}, {}, 0)
    # a given array takes nothing from it
    given = {"a": np.zeros((5, 1 << 20), "float32")}
    args, generated = make_inputs(params, given, {}, 0)
    assert generated == ["b"] and args[1][0].shape == (4, 1 << 20)


def test_random_inputs_are_made_in_place_with_the_documented_values():
    """A 16 MiB float32 input peaks at its own size plus one float64 chunk
    (8 MiB), not ~5x; the values are N(0, 1/fan_in) as documented, drawn
    exactly as numpy draws them in one go."""
    shape = (64, 65536)
    tracemalloc.start()
    try:
        (x,), _ = make_inputs([("x", _tensor(*shape))], {}, {}, 7)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert x.dtype == np.float32 and x.shape == shape
    assert peak < x.nbytes + (10 << 20), f"peak {peak / x.nbytes:.2f}x the input"
    expected = (np.random.default_rng(7).standard_normal(shape) / math.sqrt(65536))
    np.testing.assert_array_equal(x, expected.astype("float32"))
    (i, b), _ = make_inputs([("i", _tensor(3, 1000, dtype="int8")),
                             ("b", _tensor(2000, dtype="bool"))], {}, {}, 0)
    assert i.dtype == np.int8 and i.min() == 0 and i.max() == 7
    assert b.dtype == np.bool_ and 0 < b.sum() < 2000


def test_phasec_run_refuses_a_shape_larger_than_the_machine(capsys, tmp_path):
    path = tmp_path / "huge.py"
    path.write_text(HUGE)
    status = main(["run", str(path), "--kernels", "interp", "--opt-level", "0"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "parameter 'x' would be a float32 array of shape (1048576, 1048576) " \
           "(4 TiB)" in err
    assert "half the memory available" in err and "Traceback" not in err


def test_testing_make_inputs_is_capped_too(memory_64m):
    mod = phasec.parse(HUGE.replace("1048576", "8192"))  # 256 MiB
    with pytest.raises(InputError, match=r"parameter 'x' of 'main' would be a float32 "
                                         r"array of shape \(8192, 8192\) \(256 MiB\)"):
        phasec_testing.make_inputs(mod, 0)


def test_available_memory_is_known_here_and_plausible():
    available = random_inputs.available_memory()
    with open("/proc/meminfo") as fh:
        total = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1]) * 1024
    assert available is not None and 0 < available <= total


@pytest.mark.parametrize("own, files, expected", [
    # cgroup v2: the process's own group, page cache it can drop counted as free
    ("0::/job\n", {"job/memory.max": "1000000", "job/memory.current": "700000",
                    "job/memory.stat": "anon 400000\ninactive_file 300000\n"}, 600000),
    ("0::/job\n", {"job/memory.max": "max", "memory.max": "5000", "memory.current": "1000"},
     4000),
    # cgroup v1: the memory controller's group; "no limit" is a huge number
    ("4:memory:/a/b\n", {"memory/a/b/memory.limit_in_bytes": "8000",
                          "memory/a/b/memory.usage_in_bytes": "3000",
                          "memory/a/b/memory.stat": "total_inactive_file 1000\n"}, 6000),
    ("4:cpu,memory:/a\n", {"memory/a/memory.limit_in_bytes": "9223372036854771712"}, None),
])
def test_the_cgroup_limit_is_read_where_the_process_is(tmp_path, own, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "self_cgroup").write_text(own)
    assert random_inputs._cgroup_available(str(tmp_path), str(tmp_path / "self_cgroup")) \
        == expected
