"""The JSON module format: ``to_json``, ``from_json`` and its schema.

The schema is defined by the pydantic (v2) models below; ``json_schema()``
returns it as a JSON Schema document. Layout of a document::

    {"format": "phasec.ir_module", "version": 2,
     "phase": "optimization",            # or null: no phase attribute
     "attrs": {...},                     # the other module attributes
     "tir_vars": [{"id": 0, "name": "n", "dtype": "int64"}, ...],
     "buffers":  [{"id": 0, "name": "A", "shape": [{"node": "tir.Var", "id": 0}, 4],
                   "dtype": "float32"}, ...],
     "struct_infos": [{"node": "TensorStructInfo", "shape": [...], "dtype": "float32"}, ...],
     "vars":     [{"id": 0, "name": "x", "struct_info": 0},
                  {"id": 1, "name": "lv", "dataflow": true, "struct_info": 0}, ...],
     "functions": {"main": {"node": "Function", "params": [0], "body": {...}, ...},
                   "add": {"node": "PrimFunc", ...}}}

Design points:

* Every node is an object whose ``"node"`` field names its kind (the IR class
  name; TIR nodes are prefixed ``tir.``), validated as a discriminated union.
  Every node may carry a ``"span"`` (file, line, col, end_line, end_col).
* Variables have identity: Relax ``Var``/``DataflowVar``, TIR ``Var`` and
  ``Buffer`` are defined once, in the module-level tables ``vars``,
  ``tir_vars`` and ``buffers``, and every use (parameters and binding targets
  included) refers to them by ``id``: where a Relax expression is expected a
  JSON integer is a use of that Var; TIR uses are ``{"node": "tir.Var", "id":
  ...}`` and buffer fields hold buffer ids. Identity round-trips exactly, even
  across functions. A buffer's shape may only refer to buffers listed before it.
* Compact forms: where a TIR expression is expected a JSON integer is an
  ``int64`` ``IntImm`` (shape dimensions stay readable); a call's ``op``
  given as a string is the registered operator of that name. Struct info is
  written once in the ``struct_infos`` table (equal ones shared) and referred
  to by index; inline struct info objects are accepted anywhere too (a table
  entry may refer to earlier entries only).
* Constants carry ``dtype``, ``shape`` and ``data``: the array's bytes,
  little-endian, C order, base64-encoded.
* Struct info of expressions is stored, not re-inferred, so a loaded module
  needs no inference: a ``Call``/``If`` (and ``Op``/``GlobalVar``/
  ``ExternFunc``) keeps its ``struct_info`` when it has one; for ``Tuple``,
  ``TupleGetItem``, ``SeqExpr`` and ``Function`` it is written only when it is
  not the one the node derives from its parts.
* Attribute values: ``null``, booleans, integers, strings and finite floats
  are JSON literals; a JSON array is a Python tuple; the one-key objects
  ``{"list": [...]}``, ``{"dict": {...}}``, ``{"float": "nan"|"inf"|"-inf"}``,
  ``{"prim_expr": ...}``, ``{"expr": ...}``, ``{"struct_info": ...}``,
  ``{"buffer": id}`` (a block annotation naming a buffer), ``{"target": ...}``
  (TVM's ``T.target(...)``, a target string or dictionary) and
  ``{"vdevice": {"target": ..., "vdevice_id": 0, "memory_scope": "global"}}``
  (``I.vdevice(...)``) hold the rest. (``buffer``, ``target`` and ``vdevice``
  values were added within version 2: older readers refuse them by name.)
* Loading is exact, not normalizing: the module holds what the document says
  (non-normal-form or use-before-definition programs included), so the
  verifier can inspect it. ``to_json(from_json(t)) == t`` for any ``t``
  written by ``to_json``.
* Chains whose length the program's structure does not bound are lists, not
  nestings: ``tir.Nest`` holds statements each continuing in the next (lets,
  the statements after a let, allocations, attributes, else-ifs) as
  ``{"scopes": [...], "body": ...}``, and ``tir.SelectChain`` selects nested
  in their false value as ``{"cases": [...], "false_value": ...}``; the writer
  uses them for chains of two or more.
* Nesting is limited to :data:`MAX_DEPTH` JSON levels (pydantic's JSON parser
  stops there); ``to_json`` refuses a module it could not read back (a sum of
  hundreds of terms, say). A document holds at most :data:`MAX_VALUES` JSON
  values; both are measured on the text before it is parsed
  (:func:`phasec.fileio.check_json_size`), so a padded document cannot make
  the reader take gigabytes.
* Versions: documents are written as :data:`FORMAT_VERSION` 2 (version 1 had
  no chain nodes); ``from_json`` reads :data:`READABLE_VERSIONS` and names the
  version of any other.

Any document that does not fit raises :class:`phasec.errors.SchemaError`
listing the path of each offending field (``functions.main.body.blocks.0.
bindings.3.value.args: Field required``; the paths are also in its
``errors`` attribute as ``(path, message)`` pairs). Unknown ids, duplicate
ids, bad dtypes and constant data of the wrong length are SchemaErrors too;
invalid JSON text gives the line and column.

Performance: reading and writing are linear and iterative over binding
lists; a 100k-binding function writes in about 0.6 s and loads (pydantic
validation included) in about 1.5 s.
"""


from __future__ import annotations

from phasec.script.json_format.decode import from_json
from phasec.script.json_format.encode import to_json
from phasec.script.json_format.schema import (
    FORMAT_NAME, FORMAT_VERSION, MAX_DEPTH, MAX_VALUES, READABLE_VERSIONS, ModuleDoc,
    json_schema,
)

__all__ = ["to_json", "from_json", "json_schema", "FORMAT_NAME", "FORMAT_VERSION",
           "READABLE_VERSIONS", "MAX_DEPTH", "MAX_VALUES", "ModuleDoc"]
