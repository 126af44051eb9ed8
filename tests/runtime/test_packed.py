"""The packed-function registry (phasec.runtime.packed)."""

import threading

import numpy as np
import pytest

import phasec
from phasec.errors import PhasecError
from phasec.runtime.packed import (
    PackedFuncError, find_packed_func, get_packed_func, list_packed_funcs, register_func,
    remove_func,
)


@pytest.fixture
def name(request):
    """A unique packed-function name, unregistered after the test."""
    n = f"test_packed.{request.node.name}"
    yield n
    remove_func(n)


def test_register_call_form_and_lookup(name):
    def double(x):
        return x * 2

    assert register_func(name, double) is double
    assert get_packed_func(name) is double
    assert find_packed_func(name) is double
    assert name in list_packed_funcs()
    np.testing.assert_array_equal(get_packed_func(name)(np.arange(3)), [0, 2, 4])


def test_register_decorator_form(name):
    @register_func(name)
    def triple(x):
        return 3 * x

    assert triple(2) == 6  # the decorator returns the function unchanged
    assert get_packed_func(name) is triple


def test_top_level_exports(name):
    phasec.register_func(name, abs)
    assert phasec.get_packed_func(name) is abs


def test_duplicate_registration_needs_override(name):
    register_func(name, abs)
    with pytest.raises(PackedFuncError, match="already registered.*override=True"):
        register_func(name, min)
    assert get_packed_func(name) is abs
    register_func(name, min, override=True)
    assert get_packed_func(name) is min


def test_unknown_name_lists_close_matches(name):
    register_func(name, abs)
    with pytest.raises(PackedFuncError) as info:
        get_packed_func(name + "x")
    message = str(info.value)
    assert repr(name + "x") in message and "did you mean" in message and name in message
    assert isinstance(info.value, PhasecError) and isinstance(info.value, LookupError)
    assert find_packed_func(name + "x") is None


def test_bad_registrations():
    with pytest.raises(PackedFuncError, match="non-empty string"):
        register_func("", abs)
    with pytest.raises(PackedFuncError, match="non-empty string"):
        register_func(3, abs)
    with pytest.raises(PackedFuncError, match="must be callable"):
        register_func("test_packed.not_callable", 42)
    assert find_packed_func("test_packed.not_callable") is None


def test_remove_func(name):
    register_func(name, abs)
    remove_func(name)
    assert find_packed_func(name) is None
    remove_func(name)  # idempotent


def test_list_is_sorted_and_has_vm_builtins():
    names = list_packed_funcs()
    assert names == sorted(names)
    assert {"vm.builtin.shape_of", "vm.builtin.reshape", "vm.builtin.tuple_getitem"} <= set(names)


def test_vm_builtins_behave():
    x = np.arange(6, dtype="float32")
    assert get_packed_func("vm.builtin.shape_of")(x) == (6,)
    assert get_packed_func("vm.builtin.reshape")(x, (2, 3)).shape == (2, 3)
    assert get_packed_func("vm.builtin.tuple_getitem")((1, 2, 3), 1) == 2
    assert get_packed_func("vm.builtin.make_tuple")(1, 2) == (1, 2)
    copy = get_packed_func("vm.builtin.copy")(x)
    assert copy is not x and np.array_equal(copy, x)
    assert get_packed_func("vm.builtin.null_value")() is None
    assert get_packed_func("vm.builtin.read_if_cond")(np.array(True)) is True


def test_concurrent_registration_is_safe():
    names = [f"test_packed.thread{i}" for i in range(40)]
    errors = []

    def worker(chunk):
        try:
            for n in chunk:
                register_func(n, abs)
        except Exception as exc:  # pragma: no cover - would be the failure
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(names[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors
        assert all(find_packed_func(n) is abs for n in names)
    finally:
        for n in names:
            remove_func(n)
