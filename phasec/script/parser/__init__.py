"""TVMScript parser: text -> :class:`~phasec.ir.IRModule`, without running anything.

The input is untrusted data. It is read with Python's :mod:`ast` module only:
nothing in it is executed, evaluated, compiled or imported. Every construct is
matched against the TVMScript subset phasec understands (see the printer for
the canonical spelling), and anything else is a :class:`~phasec.errors.ParseError`
carrying the file, line and column.

Structure (one module per IR level; this package module only gathers the
public names):

* :mod:`.driver`: :func:`parse` and :class:`~.driver.ModuleParser` — the
  module-level driver and the state the sub-parsers share: dialect aliases
  from the imports, the ``@I.ir_module`` class, ``I.module_attrs``, every
  function's signature first (so functions may call each other in any
  order), then the bodies; also :func:`parse_struct_info` — one struct info
  annotation on its own (the signatures saved in VM executables).
* :mod:`.expressions`: ``_SinfoParser`` — struct-info annotations
  (``R.Tensor((n, 4), "float32")``...) — and ``_PrimExprParser`` — scalar
  TIR expressions; also the symbolic dimensions of Relax shapes.
* :mod:`.relax_level`: ``_RelaxFunctionParser`` — ``@R.function`` bodies:
  bindings in A-normal form, dataflow blocks, ``if``/``else``, nested
  functions. A nested function sees the enclosing functions' Relax
  variables and symbolic shape variables (the same objects, as in TVM); a
  symbolic variable it declares itself is its own. :mod:`.relax_calls`
  holds ``_RELAX_CALLS``, the table of Relax dialect calls (``R.const``,
  ``R.call_tir``...), and their handlers; every other ``R.<name>(...)`` is a
  registered operator, matched to the registry by :mod:`.relax_ops`.
* :mod:`.global_infos`: ``I.module_global_infos`` (virtual devices) and the
  ``vdevice`` of tensor annotations; :mod:`.meta`: ``I.meta_var`` names.
* :mod:`.tir_level` and :mod:`.tir_blocks`: ``@T.prim_func`` kernels.
* :mod:`.common`: the tables and helpers they share.

Semantic problems (operand struct info that does not fit an operator, a call
with the wrong number of arguments for a function...) are not parse errors:
struct-info inference failures leave ``struct_info`` None and the verifier
reports them with rule codes.
"""

from __future__ import annotations

from phasec.errors import ParseError
from phasec.script.parser.driver import decode_source, parse, parse_struct_info

__all__ = ["parse", "parse_struct_info", "decode_source", "ParseError"]
