"""The published JSON Schema (``phasec schema``) accepts every document phasec
writes, checked by an independent validator (jsonschema, Draft 2020-12), and
rejects documents the reader rejects for their shape (issue 18 #1)."""

from __future__ import annotations

import glob
import json
import os

import jsonschema
import pytest

import phasec
from phasec import transform
from phasec.op import list_ops
from phasec.script.json_format import json_schema, to_json

from helpers.paths import FIXTURES, VERIFIER_CASES
from helpers.sample_modules import PIPELINE, all_nodes_module, op_module

EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(phasec.__file__), "examples", "*.py")))
FILES = sorted(glob.glob(os.path.join(FIXTURES, "*.py"))
               + glob.glob(os.path.join(VERIFIER_CASES, "*.py"))) + EXAMPLES


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, mod) -> list[str]:
    doc = json.loads(to_json(mod))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
            for e in validator.iter_errors(doc)]


def test_every_node_kind_and_operator_validates(validator):
    assert _errors(validator, all_nodes_module()) == []
    for opdef in list_ops():
        assert _errors(validator, op_module(opdef)) == [], opdef.name


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_files_validate(validator, path):
    with open(path, encoding="utf-8") as fh:
        assert _errors(validator, phasec.parse(fh.read(), path)) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_every_pipeline_stage_validates(validator, path):
    mod = phasec.load(path)
    for name in PIPELINE:
        mod = transform.get_pass(name)(mod)
        assert _errors(validator, mod) == [], name


def test_integer_attribute_is_not_ambiguous(validator):
    # The defect: an integer attribute matched both "integer" and "number" of a oneOf.
    doc = json.loads(to_json(all_nodes_module()))
    doc["attrs"] = {"count": -1, "ratio": 0.5, "flag": True, "nested": {"list": [1, 2.5]}}
    assert list(validator.iter_errors(doc)) == []
    doc["attrs"] = {"bad": {"two": 1, "keys": 2}}
    assert list(validator.iter_errors(doc)) != []
    doc = json.loads(to_json(all_nodes_module()))
    doc["format"] = "something.else"
    assert list(validator.iter_errors(doc)) != []


def _tagged_nodes(doc) -> list[dict]:
    """Every object with a ``node`` tag, outermost first."""
    out, stack = [], [doc]
    while stack:
        v = stack.pop(0)
        if isinstance(v, dict):
            if isinstance(v.get("node"), str):
                out.append(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def test_tagged_nodes_are_checked_against_their_own_tag(validator):
    """The schema dispatches on ``node`` (linear, not a oneOf tried against every
    alternative): an unknown tag, a missing field or a field of the wrong type
    at the deepest node of each kind is refused as the reader refuses it."""
    from phasec.errors import PhasecError
    from phasec.script.json_format import from_json

    base = json.loads(to_json(all_nodes_module()))
    tags = sorted({n["node"] for n in _tagged_nodes(base)})
    assert len(tags) > 20
    refused = 0
    for tag in tags:
        doc = json.loads(json.dumps(base))
        node = next(n for n in reversed(_tagged_nodes(doc)) if n["node"] == tag)  # the deepest
        saved = dict(node)
        fields = [k for k in sorted(node) if k not in ("node", "span")][:1]
        edits = [("node", tag + "Nope")] + [(f, None) for f in fields] \
            + [(f, {"not": ["what", "the", "tag", "declares"]}) for f in fields]
        for field, value in edits:
            if value is None:
                del node[field]
            else:
                node[field] = value
            schema_refuses = not validator.is_valid(doc)  # (stops at the first error)
            try:
                from_json(json.dumps(doc))
                reader_refuses = False
            except PhasecError:
                reader_refuses = True
            # never stricter than the reader (which also refuses some documents
            # for their meaning, e.g. a block whose axes have no values)
            assert reader_refuses or not schema_refuses, (tag, field, value)
            assert schema_refuses or field != "node", tag  # an unknown tag is always refused
            refused += schema_refuses
            node.clear()
            node.update(saved)
    assert refused > 1.5 * len(tags)
