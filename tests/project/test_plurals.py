"""Counts in messages agree with their nouns (issue 32, item 12): "takes 1
argument but 2 were given", "takes 2 operands but 1 was given", never
"argument(s)" (phasec.errors.counted)."""

from __future__ import annotations

import re

import pytest

import phasec
from phasec import verifier
from phasec.errors import StructInfoError, counted
from phasec.ir import Var
from phasec.ir.struct_info import TensorStructInfo
from phasec.op import call_op

from helpers.paths import REPO

CALLS = '''
@I.ir_module
class Module:
    @R.function
    def two(a: R.Tensor((2,), "float32"), b: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return a

    @R.function
    def one(a: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return a

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        cls = Module
        y = cls.two(x)
        z = cls.one(x, x)
        return z
'''


def test_counted():
    assert counted(1, "argument") == "1 argument"
    assert counted(0, "argument") == "0 arguments"
    assert counted(2, "index", "indices") == "2 indices"


def test_function_call_arity_messages():
    messages = [d.message for d in verifier.check(phasec.parse(CALLS)) if d.code == "WF405"]
    assert any("cls.two takes 2 arguments but 1 was given" in m for m in messages), messages
    assert any("cls.one takes 1 argument but 2 were given" in m for m in messages), messages


def test_operator_arity_message():
    x = Var("x", TensorStructInfo((2,), "float32"))
    with pytest.raises(StructInfoError, match=r"R\.add takes 2 operands \(x1, x2\) but 1 was given"):
        call_op("add", x)


def test_no_source_says_argument_s():
    # a formatted count right before the noun: f"{n} argument(s)"
    pattern = re.compile(r"\}\s+(positional )?(argument|operand|attribute)\(s\)")
    offenders = [f"{p.relative_to(REPO)}:{n}" for folder in ("phasec", "verifier", "passes")
                 for p in sorted((REPO / folder).rglob("*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if pattern.search(line) and "never" not in line]
    assert not offenders, offenders
