"""Scalar TIR expressions and struct-info annotations: the pieces of the
TVMScript parser shared by the Relax and TIR levels (see :mod:`phasec.script.parser`)."""

from __future__ import annotations

import ast
import difflib
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from phasec.errors import ParseError, counted
from phasec.ir import tir
from phasec.ir.intrinsics import ALIASES
from phasec.ir.node import Span
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.script.checks import int_range_problem
from phasec.script.parser.common import (
    TIR_BUILTIN_ERROR, _BINOPS, _CMPOPS, _PY_OP_SPELLING, _SINFO_KINDS, _TIR_BINARY_FUNCS,
    _TIR_BUILTINS, _TIR_FUNCS, _dotted, _is_none,
)
from phasec.script.parser.global_infos import resolve_vdevice

if TYPE_CHECKING:
    from phasec.script.parser.driver import ModuleParser


#: Python's bit operators as TVM prints its TIR bit intrinsics.
_BIT_OPS = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
            ast.LShift: "shift_left", ast.RShift: "shift_right"}


class _PrimExprParser:
    """Scalar expressions: TIR kernels and symbolic dimensions.

    ``int_dtype`` is the dtype of a bare integer literal (int32 in TIR,
    int64 for Relax shapes). Bare literals are "weak": combined with a typed
    operand they take its dtype (``i + 1`` with an int64 ``i`` is int64), as
    in TVM. ``resolve(name, node, declare)`` maps identifiers to ``tir.Var``
    or ``tir.Buffer``; ``declare`` is True for names written inside strings
    (``R.Tensor(("n", "n * 2"))``), which may declare symbolic variables.
    """

    def __init__(self, mp: ModuleParser, int_dtype: str,
                 resolve: Callable[[str, ast.AST, bool], Any]) -> None:
        self.mp = mp
        self.int_dtype = int_dtype
        self.resolve = resolve
        self._in_string = False
        #: name -> the opaque handle variable a host call may take (T.handle
        #: parameters without T.match_buffer), or None; set by the TIR reader
        self.handle_operand: Callable[[str], tir.Var | None] | None = None

    def parse(self, node: ast.AST, dtype: str | None = None) -> tir.PrimExpr:
        """Parse ``node``; with ``dtype``, a bare literal takes that dtype."""
        e, weak = self._p(node)
        if weak and dtype is not None:
            e = _adopt(e, dtype)
        return e

    def parse_pair(self, a: ast.AST, b: ast.AST) -> tuple[tir.PrimExpr, tir.PrimExpr]:
        """Two operands, a bare literal taking the other's dtype."""
        x, xw = self._p(a)
        y, yw = self._p(b)
        if xw and not yw:
            x = _adopt(x, y.dtype)
        elif yw and not xw:
            y = _adopt(y, x.dtype)
        return x, y

    def _literal(self, value: Any, node: ast.AST) -> tuple[tir.PrimExpr, bool]:
        span = self.mp.span(node)
        if isinstance(value, bool):
            return tir.IntImm(int(value), "bool", span=span), False
        if isinstance(value, int):
            dtype = self.int_dtype
            if int_range_problem(value, dtype) is not None:
                dtype = "int64"  # as in TVM, a literal too big for int32 is an int64
            problem = int_range_problem(value, dtype)
            if problem is not None:
                raise self.mp.error(f"integer literal {problem}", node)
            return tir.IntImm(value, dtype, span=span), True
        return tir.FloatImm(float(value), "float32", span=span), True

    def _p(self, node: ast.AST) -> tuple[tir.PrimExpr, bool]:
        mp = self.mp
        number = mp.number(node)
        if number is not None:
            return self._literal(number, node)
        span = mp.span(node)
        if isinstance(node, ast.Name):
            value = self.resolve(node.id, node, self._in_string)
            if isinstance(value, tir.Buffer):
                raise mp.error(f"buffer {node.id!r} is used as a scalar; index it, e.g. "
                               f"{node.id}[i]", node)
            return value, False
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and not self._in_string:
                return self._string_dim(node), False
            raise mp.error(f"unsupported literal {mp.src(node)} in a scalar expression", node)
        if isinstance(node, ast.BinOp):
            bit = _BIT_OPS.get(type(node.op))
            if bit is not None:  # TVM prints T.bitwise_and(a, b) as a & b (and | ^ << >>)
                lhs, rhs = self.parse_pair(node.left, node.right)
                for v in (lhs, rhs):
                    if not (tir.is_int(v.dtype) or tir.is_bool(v.dtype)):
                        raise mp.error(f"{_PY_OP_SPELLING[type(node.op)]!r} needs integer or "
                                       f"bool operands, not {v.dtype}", node)
                return tir.Call(bit, (lhs, rhs), lhs.dtype, span=span), False
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise mp.error(f"unsupported operator {_PY_OP_SPELLING.get(type(node.op), '?')!r} "
                               f"in a scalar expression", node)
            lhs, rhs = self.parse_pair(node.left, node.right)
            return tir.BinaryOp(op, lhs, rhs, span=span), False
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return tir.Not(self.parse(node.operand), span=span), False
            if isinstance(node.op, ast.USub):
                value = self.parse(node.operand)
                zero = _adopt(tir.IntImm(0, "int32"), value.dtype)
                return tir.BinaryOp("-", zero, value, span=span), False
            if isinstance(node.op, ast.UAdd):
                return self._p(node.operand)
            value = self.parse(node.operand)  # ast.Invert: `~x`, TVM's bitwise not
            if not (tir.is_int(value.dtype) or tir.is_bool(value.dtype)):
                raise mp.error(f"'~' needs an integer or bool operand, not {value.dtype}", node)
            return tir.Call("bitwise_not", (value,), value.dtype, span=span), False
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            result = self.parse(node.values[0])
            for v in node.values[1:]:
                result = tir.BinaryOp(op, result, self.parse(v), span=span)
            return result, False
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise mp.error("chained comparisons are not supported; combine them with 'and'",
                               node)
            op = _CMPOPS.get(type(node.ops[0]))
            if op is None:
                raise mp.error(f"unsupported comparison in {mp.src(node)!r}", node)
            lhs, rhs = self.parse_pair(node.left, node.comparators[0])
            return tir.BinaryOp(op, lhs, rhs, span=span), False
        if isinstance(node, ast.Subscript):
            dim = self.buffer_dim(node)
            if dim is not None:
                return dim, False
            return self._load(node), False
        if isinstance(node, ast.Call):
            return self._call(node), False
        raise mp.error(f"unsupported scalar expression {mp.src(node)!r}", node)

    def buffer_shape(self, node: ast.AST) -> tuple[tir.PrimExpr, ...] | None:
        """``A.shape`` for a buffer ``A``: its shape (None for anything else)."""
        if not (isinstance(node, ast.Attribute) and node.attr == "shape"
                and isinstance(node.value, ast.Name)):
            return None
        try:
            buf = self.resolve(node.value.id, node.value, False)
        except ParseError:
            return None
        return buf.shape if isinstance(buf, tir.Buffer) else None

    def buffer_dim(self, node: ast.Subscript) -> tir.PrimExpr | None:
        """``A.shape[1]`` for a buffer ``A``: that dimension (None for anything else)."""
        shape = self.buffer_shape(node.value)
        if shape is None:
            return None
        index = self.mp.number(node.slice)
        if not isinstance(index, int) or isinstance(index, bool) or not -len(shape) <= index < len(shape):
            raise self.mp.error(f"{self.mp.src(node.value)} has {len(shape)} dimension(s); "
                                f"index it with an integer literal in range, got "
                                f"{self.mp.src(node.slice)!r}", node.slice)
        return shape[index]

    def _string_dim(self, node: ast.Constant) -> tir.PrimExpr:
        """``"n"`` or ``"n * 2"``: a dimension written as a string (signatures)."""
        text = node.value.strip()
        if text.isidentifier():
            return self.resolve(text, node, True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sub = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise self.mp.error(f"invalid dimension expression {node.value!r}", node) from None
        for n in ast.walk(sub):  # report positions at the string
            ast.copy_location(n, node)
            n.end_lineno, n.end_col_offset = node.end_lineno, node.end_col_offset
        self._in_string = True
        try:
            return self.parse(sub)
        finally:
            self._in_string = False

    def _load(self, node: ast.Subscript) -> tir.BufferLoad:
        mp = self.mp
        if not isinstance(node.value, ast.Name):
            raise mp.error(f"only buffers can be indexed in a scalar expression, not "
                           f"{mp.src(node.value)!r}", node.value)
        buf = self.resolve(node.value.id, node.value, False)
        if not isinstance(buf, tir.Buffer):
            raise mp.error(f"{node.value.id!r} is not a buffer; only buffers can be indexed",
                           node.value)
        return tir.BufferLoad(buf, self.indices(node), span=mp.span(node))

    def indices(self, node: ast.Subscript) -> tuple[tir.PrimExpr, ...]:
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice):
                raise self.mp.error("slices are only allowed in T.reads/T.writes regions", e)
            out.append(self.parse(e))
        return tuple(out)

    def _tvm_const(self, node: ast.Call) -> tir.PrimExpr:
        """``tvm.tirx.const(value, dtype)``: a constant, as TVM's Python API builds
        it (dtype by default int32 for an integer, float32 for a float)."""
        mp = self.mp
        a = mp.bind_args(node, "tvm.tirx.const", ("value", "dtype"), 1)
        value = mp.number(a["value"])
        if value is None:
            raise mp.error(f"tvm.tirx.const expects a number or bool literal, got "
                           f"{mp.src(a['value'])}", a["value"])
        if "dtype" in a:
            dtype = mp.dtype_arg(a["dtype"], "tvm.tirx.const")
        else:
            dtype = ("bool" if isinstance(value, bool) else
                     "float32" if isinstance(value, float) else "int32")
        if tir.is_float(dtype):
            return tir.FloatImm(float(value), dtype, span=mp.span(node))
        if isinstance(value, float):
            raise mp.error(f"tvm.tirx.const({value!r}, {dtype!r}): an integer dtype needs an "
                           f"integer value", a["value"])
        problem = int_range_problem(int(value), dtype) if tir.is_int(dtype) else None
        if problem is not None:
            raise mp.error(f"tvm.tirx.const({value}): {problem}", a["value"])
        return tir.IntImm(int(value), dtype, span=mp.span(node))

    def _prim_func_call(self, node: ast.Call, callee: str) -> tir.Call:
        """``Module.f(x, y)``: a call of PrimFunc ``f`` that returns a value."""
        mp = self.mp
        dtype = mp.prim_ret_dtypes[callee]
        if dtype is None:
            raise mp.error(f"PrimFunc {callee!r} returns nothing (a kernel); only a PrimFunc "
                           f"that returns a value (-> {mp.T}.float32...) can be called in a "
                           f"scalar expression", node)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise mp.error(f"a call of PrimFunc {callee!r} takes positional arguments only", node)
        args = tuple(self.parse(a) for a in node.args)
        return tir.Call(tir.PRIM_FUNC_CALL + callee, args, dtype, span=mp.span(node))

    def _host_call(self, node: ast.Call, fn: str) -> tir.Call:
        """``T.call_packed("f", ...)``, ``T.tvm_stack_make_array(buf.data, ...)``,
        ``T.tvm_stack_make_shape(...)``: kept as opaque calls (tir.HOST_CALLS);
        their operands may be strings and buffer addresses (``buf.data``)."""
        mp = self.mp
        keywords = list(node.keywords)
        arg_nodes = list(node.args)
        dtype = ""
        if fn == "tvm_struct_get":  # the dtype: `dtype="uint8"`, or last as TVM prints it
            dtype_node = None
            if keywords and keywords[0].arg == "dtype":
                dtype_node = keywords.pop(0).value
            elif len(arg_nodes) == 4:
                dtype_node = arg_nodes.pop()
            if dtype_node is None or len(arg_nodes) != 3:
                raise mp.error(f"{mp.T}.tvm_struct_get takes (handle, index, field, dtype)", node)
            dtype = mp.dtype_arg(dtype_node, f"{mp.T}.tvm_struct_get")
        if keywords:
            raise mp.error(f"{mp.T}.{fn} takes positional arguments only", keywords[0].value)
        args: list[tir.PrimExpr] = []
        for a in arg_nodes:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{mp.T}.{fn}: *args are not supported", a)
            handle = (self.handle_operand(a.id) if isinstance(a, ast.Name)
                      and self.handle_operand is not None else None)
            if handle is not None:
                args.append(handle)
            elif isinstance(a, ast.Constant) and isinstance(a.value, str):
                args.append(tir.StringImm(a.value, span=mp.span(a)))
            elif isinstance(a, ast.Attribute) and a.attr == "data" and isinstance(a.value, ast.Name):
                buf = self.resolve(a.value.id, a.value, False)
                if not isinstance(buf, tir.Buffer):
                    raise mp.error(f"{a.value.id!r} is not a buffer; only a buffer has .data", a)
                args.append(tir.BufferData(buf, span=mp.span(a)))
            else:
                args.append(self.parse(a))
        if fn in ("call_packed", "call_cpacked") and (not args or type(args[0]) is not tir.StringImm):
            raise mp.error(f"{mp.T}.{fn} needs the packed function's name (a string) first", node)
        return tir.Call(fn, tuple(args), dtype, span=mp.span(node))

    def _op_call(self, node: ast.Call) -> tuple[ast.Call, str]:
        """``T.Call(tvm.ir.Op.get("tirx.tvm_call_packed"), [args...], ret_ty=...)``,
        TVM's generic spelling of a call of a TIR operator, respelt as the call
        TVM prints for it (``T.call_packed(args...)``); the result type is the
        operator's own. Operators phasec's TIR does not have stay an error."""
        mp = self.mp
        op = node.args[0] if node.args else None
        op_name = None
        if isinstance(op, ast.Call) and _dotted(op.func) == ("tvm", "ir", "Op", "get") \
                and len(op.args) == 1 and isinstance(op.args[0], ast.Constant) \
                and isinstance(op.args[0].value, str) and not op.keywords:
            op_name = op.args[0].value
        if op_name is None or len(node.args) != 2 or not isinstance(node.args[1], (ast.List,
                                                                                 ast.Tuple)) \
                or any(kw.arg not in ("ret_ty", "dtype") for kw in node.keywords):
            raise mp.error(f"{mp.T}.Call: expected {mp.T}.Call(tvm.ir.Op.get(\"tirx.<op>\"), "
                           f"[operands...], ret_ty=...), got {mp.src(node)}", node)
        short = op_name.split(".", 1)[1] if op_name.startswith(("tirx.", "tir.")) else op_name
        fn = {"tvm_call_packed": "call_packed", "tvm_call_cpacked": "call_cpacked"}.get(short, short)
        if fn not in tir.HOST_CALLS and fn not in tir.INTRINSICS:
            raise mp.error(f"{mp.T}.Call of {op_name!r}: {TIR_BUILTIN_ERROR}", node)
        func = ast.copy_location(ast.Attribute(ast.Name(mp.T, ast.Load()), fn, ast.Load()),
                                 node.func)
        return ast.copy_location(ast.Call(func, list(node.args[1].elts), []), node), fn

    def _call(self, node: ast.Call) -> tir.PrimExpr:
        mp = self.mp
        name = _dotted(node.func)
        span = mp.span(node)
        if (name is not None and len(name) == 2 and name[0] in mp.class_names
                and name[1] in mp.prim_ret_dtypes):
            return self._prim_func_call(node, name[1])
        if name in (("tvm", "tirx", "const"), ("tvm", "tir", "const")):
            return self._tvm_const(node)
        if name is None or len(name) != 2 or name[0] != mp.T:
            raise mp.error(f"unsupported call {mp.src(node.func)!r} in a scalar expression; "
                           f"expected a {mp.T}.<function> such as {mp.T}.max or {mp.T}.exp", node)
        fn = name[1]
        if fn == "Call":
            node, fn = self._op_call(node)
        if fn in tir.HOST_CALLS:
            return self._host_call(node, fn)
        if fn in _TIR_BUILTINS:
            raise mp.error(f"{mp.T}.{fn}: {TIR_BUILTIN_ERROR}", node.func)
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{mp.T}.{fn}: *args are not supported", a)
        args = node.args
        keywords = node.keywords
        if fn in tir.INTRINSICS or fn in _TIR_BINARY_FUNCS or fn == "if_then_else":
            # TVM's T.<op> wrappers drop a `dtype=` keyword (TVM's printer writes
            # one on some calls); the operands decide the dtype.
            keywords = [kw for kw in keywords if kw.arg != "dtype"]
        if fn == "if_then_else" and keywords:
            bound = mp.bind_args(ast.copy_location(ast.Call(node.func, list(args), keywords), node),
                                 f"{mp.T}.if_then_else", ("cond", "t", "f"), 3)
            args, keywords = [bound["cond"], bound["t"], bound["f"]], []
        if keywords:
            raise mp.error(f"{mp.T}.{fn} takes positional arguments only", keywords[0].value)

        def arity(n: int) -> None:
            if len(args) != n:
                raise mp.error(f"{mp.T}.{fn} takes {counted(n, 'argument')}, got {len(args)}", node)

        if fn in tir.DTYPES:
            if not args:
                raise mp.error(f"{mp.T}.{fn}() declares a symbolic variable; write it as a "
                               f"statement `n = {mp.T}.{fn}()`", node)
            arity(1)
            number = mp.number(args[0])
            if (number is None and tir.is_float(fn) and isinstance(args[0], ast.Constant)
                    and isinstance(args[0].value, str)):
                # T.float32("-inf"), T.float32("nan"): how TVM prints non-finite values
                word = args[0].value.strip().lower()
                if word not in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
                    raise mp.error(f"{mp.T}.{fn} expects a number, \"inf\", \"-inf\" or "
                                   f"\"nan\", got {args[0].value!r}", args[0])
                number = float(word)
            if number is None:
                return tir.Cast(fn, self.parse(args[0]), span=span)
            if tir.is_float(fn):
                if isinstance(number, bool):
                    raise mp.error(f"{mp.T}.{fn} expects a number, got {number}", args[0])
                return tir.FloatImm(float(number), fn, span=span)
            if isinstance(number, float):
                raise mp.error(f"{mp.T}.{fn} expects an integer, got {number!r}", args[0])
            problem = int_range_problem(int(number), fn)
            if problem is not None:
                raise mp.error(f"{mp.T}.{fn}({number}): {problem}", args[0])
            return tir.IntImm(int(number), fn, span=span)
        if fn in ("FloatImm", "IntImm"):
            # T.FloatImm("float32", 0.1): TVM's node constructors (dtype, value)
            arity(2)
            dtype = mp.dtype_arg(args[0], f"{mp.T}.{fn}")
            number = mp.number(args[1])
            if number is None or isinstance(number, bool) or (
                    fn == "IntImm" and isinstance(number, float)):
                raise mp.error(f"{mp.T}.{fn} expects a number literal, got {mp.src(args[1])}",
                               args[1])
            if fn == "FloatImm":
                if not tir.is_float(dtype):
                    raise mp.error(f"{mp.T}.FloatImm needs a float dtype, got {dtype!r}", args[0])
                return tir.FloatImm(float(number), dtype, span=span)
            if not tir.is_int(dtype) and not tir.is_bool(dtype):
                raise mp.error(f"{mp.T}.IntImm needs an integer dtype, got {dtype!r}", args[0])
            problem = int_range_problem(int(number), dtype) if tir.is_int(dtype) else None
            if problem is not None:
                raise mp.error(f"{mp.T}.IntImm({number}): {problem}", args[1])
            return tir.IntImm(int(number), dtype, span=span)
        if fn in ("min_value", "max_value"):
            arity(1)
            # TVM's meaning: the dtype's finite extreme (not an infinity)
            dtype = mp.dtype_arg(args[0], f"{mp.T}.{fn}")
            if tir.is_bool(dtype):
                return tir.IntImm(int(fn == "max_value"), "bool", span=span)
            info = np.iinfo(dtype) if tir.is_int(dtype) else np.finfo(dtype)
            value = info.min if fn == "min_value" else info.max
            if tir.is_int(dtype):
                return tir.IntImm(int(value), dtype, span=span)
            return tir.FloatImm(float(value), dtype, span=span)
        if fn in ("Cast", "cast"):
            arity(2)
            # T.Cast(dtype, value) (TVM's node) and T.cast(value, dtype)
            d_node, v_node = (args[0], args[1]) if fn == "Cast" else (args[1], args[0])
            dtype = mp.dtype_arg(d_node, f"{mp.T}.{fn}")
            return tir.Cast(dtype, self.parse(v_node), span=span)
        if fn in ("Select", "if_then_else"):
            arity(3)
            cond = self.parse(args[0])
            a, b = self.parse_pair(args[1], args[2])
            return tir.Select(cond, a, b, span=span)
        if fn in ("And", "Or"):
            arity(2)
            return tir.BinaryOp(fn.lower(), self.parse(args[0]), self.parse(args[1]), span=span)
        if fn == "Not":
            arity(1)
            return tir.Not(self.parse(args[0]), span=span)
        if fn in ("call_pure_extern", "call_extern"):
            return self._extern_call(fn, args, node)
        if fn == "truncmod":  # the remainder with the dividend's sign: a - truncdiv(a, b) * b
            arity(2)
            a, b = self.parse_pair(args[0], args[1])
            return tir.BinaryOp("-", a, tir.BinaryOp("*", tir.BinaryOp("/", a, b), b), span=span)
        if fn in _TIR_BINARY_FUNCS:
            arity(2)
            a, b = self.parse_pair(args[0], args[1])
            return tir.BinaryOp(_TIR_BINARY_FUNCS[fn], a, b, span=span)
        fn = _TIR_SYNONYMS.get(fn, fn)
        if fn in tir.INTRINSICS:
            arity(tir.INTRINSICS[fn])
            return tir.Call(fn, [self.parse(a) for a in args], span=span)
        close = difflib.get_close_matches(fn, _TIR_FUNCS, n=1)
        hint = f" (did you mean {mp.T}.{close[0]}?)" if close else ""
        raise mp.error(f"unknown TIR function {mp.T}.{fn}{hint}", node.func)

    def _extern_call(self, fn: str, args: list[ast.expr], node: ast.Call) -> tir.PrimExpr:
        """``T.call_pure_extern("int64", "phasec_checked_index", i, n)``: how the
        TVM spelling writes phasec's checked_index; other external functions
        are not something phasec's kernels can call."""
        mp = self.mp
        name = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else None
        if name != tir.CHECKED_INDEX_EXTERN:
            raise mp.error(f"{mp.T}.{fn}: external function {mp.src(args[1]) if len(args) > 1 else ''}"
                           f" is not supported (phasec's kernels call only "
                           f"{tir.CHECKED_INDEX_EXTERN!r})", node)
        if len(args) != 4 or mp.dtype_arg(args[0], f"{mp.T}.{fn}") != "int64":
            raise mp.error(f'{mp.T}.{fn}("int64", "{tir.CHECKED_INDEX_EXTERN}", index, extent) '
                           f"takes an int64 result and two operands", node)
        return tir.Call("checked_index", (self.parse(args[2]), self.parse(args[3])), "int64",
                        span=mp.span(node))


#: TVM's names for phasec's intrinsics (the ``aliases`` of their declarations):
#: TVM legalizes R.round to T.nearbyint, which rounds half to even, as phasec's
#: round does.
_TIR_SYNONYMS = ALIASES


def _adopt(e: tir.PrimExpr, dtype: str) -> tir.PrimExpr:
    """A bare literal takes the dtype its context asks for."""
    if e.dtype == dtype:
        return e
    if isinstance(e, tir.IntImm) and (tir.is_int(dtype) or tir.is_float(dtype)):
        if tir.is_float(dtype):
            return tir.FloatImm(float(e.value), dtype, span=e.span)
        problem = int_range_problem(e.value, dtype)
        if problem is not None:
            raise ParseError(f"integer literal {problem}", e.span)
        return tir.IntImm(e.value, dtype, span=e.span)
    if isinstance(e, tir.FloatImm) and tir.is_float(dtype):
        return tir.FloatImm(e.value, dtype, span=e.span)
    return e


def _same(a: tir.PrimExpr, b: tir.PrimExpr) -> bool:
    """Syntactic equality of small scalar expressions (variables by identity)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tir.IntImm, tir.FloatImm)):
        return a.value == b.value and a.dtype == b.dtype
    if isinstance(a, tir.BinaryOp):
        return a.op == b.op and _same(a.lhs, b.lhs) and _same(a.rhs, b.rhs)
    return False


def _extent(start: tir.PrimExpr, stop: tir.PrimExpr) -> tir.PrimExpr:
    """``stop - start``, folded when obvious (``range(a, a + n)`` has extent ``n``)."""
    if isinstance(start, tir.IntImm) and start.value == 0:
        return stop
    if isinstance(start, tir.IntImm) and isinstance(stop, tir.IntImm):
        return tir.IntImm(stop.value - start.value, stop.dtype, span=stop.span)
    if isinstance(stop, tir.BinaryOp) and stop.op == "+" and _same(stop.lhs, start):
        return stop.rhs
    return tir.BinaryOp("-", stop, start, span=stop.span)


# ---------------------------------------------------------------------------
# Struct info annotations
# ---------------------------------------------------------------------------

class _SinfoParser:
    """``R.Tensor(...)``, ``R.Tuple(...)``, ``R.Shape(...)``, ``R.Prim(...)``,
    ``R.Object``, ``R.Callable(...)``. Dimensions go through ``prim``."""

    def __init__(self, mp: ModuleParser, prim: _PrimExprParser,
                 var_sinfo: Callable[[str], Any] | None = None) -> None:
        self.mp = mp
        self.prim = prim
        #: in a function body: name -> the Relax variable of that name (or None),
        #: for `x.ty`, the struct info of variable x (as TVM's parser evaluates it)
        self.var_sinfo = var_sinfo

    def parse(self, node: ast.AST) -> StructInfo:
        mp = self.mp
        if (isinstance(node, ast.Attribute) and node.attr in ("ty", "struct_info")
                and isinstance(node.value, ast.Name) and self.var_sinfo is not None):
            var = self.var_sinfo(node.value.id)
            if var is not None:
                if var.struct_info is None:
                    raise mp.error(f"{node.value.id!r} has no known struct info to take "
                                   f"`.{node.attr}` of", node)
                return var.struct_info
        call = node if isinstance(node, ast.Call) else None
        name = _dotted(call.func if call is not None else node)
        if (call is None and name is not None and len(name) == 2 and name[0] == mp.T
                and name[1] in tir.DTYPES):
            # T.bool, T.int64: how TVM 0.27 prints R.Prim("bool"), R.Prim("int64")
            return PrimStructInfo(name[1], span=mp.span(node))
        if name == (mp.I, "StringType") and call is not None and not call.args \
                and not call.keywords:
            # TVM 0.27's type of R.str(...): phasec has no string struct info and
            # gives strings R.Object, which holds them
            return ObjectStructInfo(span=mp.span(node))
        if name is None or len(name) != 2 or name[0] != mp.R or name[1] not in _SINFO_KINDS:
            raise mp.error(f"expected a struct info annotation such as "
                           f"{mp.R}.Tensor((n, 4), \"float32\"), got {mp.src(node)!r}", node)
        kind = name[1]
        span = mp.span(node)
        if call is None:  # bare R.Tensor, R.Object...
            if kind == "Tensor":
                return TensorStructInfo(span=span)
            if kind in ("Object", "Any"):  # R.Any: newer TVM's name for R.Object
                return ObjectStructInfo(span=span)
            if kind == "Shape":
                return ShapeStructInfo(span=span)
            if kind == "Tuple":
                return TupleStructInfo((), span=span)
            if kind == "Callable":
                return FuncStructInfo(None, ObjectStructInfo(), True, span=span)
            raise mp.error(f"{mp.R}.Prim needs a dtype, e.g. {mp.R}.Prim(\"int64\")", node)
        return getattr(self, "_" + ("object" if kind == "Any" else kind.lower()))(call, span)

    def _dims(self, node: ast.AST, what: str, allow_negative: bool = False
              ) -> tuple[tir.PrimExpr, ...]:
        if not isinstance(node, (ast.Tuple, ast.List)):
            raise self.mp.error(f"{what} must be a tuple or list of dimensions, got "
                                f"{self.mp.src(node)!r}", node)
        return tuple(self.mp.dims(self.prim, node.elts, what, allow_negative))

    def _int(self, node: ast.AST, what: str) -> int:
        value = self.mp.number(node)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.mp.error(f"{what} must be an integer literal, got {self.mp.src(node)!r}", node)
        return value

    def _tensor(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Tensor", ("shape", "dtype", "vdevice", "ndim"), 0)
        first = a.get("shape")
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and "dtype" not in a:
            a["dtype"] = a.pop("shape")  # R.Tensor("float32", ndim=2)
        shape = None
        ndim = -1
        shape_var = None
        if isinstance(a.get("shape"), ast.Name) and self.var_sinfo is not None:
            shape_var = self.var_sinfo(a["shape"].id)
        if shape_var is not None:
            # R.Tensor(s, "float32") with a shape variable s (TVM keeps the link to
            # s): the shape s's struct info knows, else its rank, else unknown.
            s_sinfo = shape_var.struct_info
            if not isinstance(s_sinfo, ShapeStructInfo):
                raise mp.error(f"{mp.R}.Tensor: {a['shape'].id!r} is not a shape value (its "
                               f"struct info is not {mp.R}.Shape)", a["shape"])
            if s_sinfo.values is not None:
                shape = s_sinfo.values
            ndim = s_sinfo.ndim
        elif _unknown_length(mp, a.get("shape")):
            # R.Tensor((-1,)): what TVM 0.27 infers (and prints) for R.shape_to_tensor
            # of a shape of unknown rank, the rank written as a dimension; read as
            # what it stands for, a 1-D tensor of unknown length
            ndim = 1
        elif "shape" in a and not _is_none(a["shape"]):
            shape = self._dims(a["shape"], f"{mp.R}.Tensor shape")
        dtype = "void"
        if "dtype" in a and not _is_none(a["dtype"]):
            dtype = mp.str_arg(a["dtype"], f"{mp.R}.Tensor dtype")
            if dtype not in tir.DTYPES and dtype != "void":
                raise mp.error(f"{mp.R}.Tensor: unknown dtype {dtype!r}", a["dtype"])
        if "ndim" in a:
            ndim = self._int(a["ndim"], f"{mp.R}.Tensor ndim")
            if ndim < -1:
                raise mp.error(f"{mp.R}.Tensor: ndim must be -1 (unknown) or >= 0", a["ndim"])
            if shape is not None and ndim not in (-1, len(shape)):
                raise mp.error(f"{mp.R}.Tensor: ndim={ndim} does not match the shape's "
                               f"{len(shape)} dimension(s)", a["ndim"])
        vdevice = None
        if "vdevice" in a and not _is_none(a["vdevice"]):
            vdevice = resolve_vdevice(mp, a["vdevice"])
        if shape is None and ndim != -1:
            return TensorStructInfo(None, dtype, ndim, span=span, vdevice=vdevice)
        return TensorStructInfo(shape, dtype, ndim, span=span, vdevice=vdevice)

    def _tuple(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        if call.keywords:
            raise mp.error(f"{mp.R}.Tuple takes its fields as positional arguments",
                           call.keywords[0].value)
        elts = call.args
        if len(elts) == 1 and isinstance(elts[0], (ast.List, ast.Tuple)):
            elts = elts[0].elts
        return TupleStructInfo([self.parse(e) for e in elts], span=span)

    def _shape(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Shape", ("values", "ndim"), 0)
        if "values" in a and not _is_none(a["values"]):
            values = self._dims(a["values"], f"{mp.R}.Shape values", allow_negative=True)
            if "ndim" in a and self._int(a["ndim"], f"{mp.R}.Shape ndim") not in (-1, len(values)):
                raise mp.error(f"{mp.R}.Shape: ndim does not match the number of values", a["ndim"])
            return ShapeStructInfo(values, span=span)
        ndim = self._int(a["ndim"], f"{mp.R}.Shape ndim") if "ndim" in a else -1
        if ndim < -1:
            raise mp.error(f"{mp.R}.Shape: ndim must be -1 (unknown) or >= 0", a["ndim"])
        return ShapeStructInfo(None, ndim, span=span)

    def _prim(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Prim", ("dtype", "value"), 0)
        value = None
        if "value" in a and not _is_none(a["value"]):
            value = self.prim.parse(a["value"])
        if "dtype" in a and not _is_none(a["dtype"]):
            dtype = mp.dtype_arg(a["dtype"], f"{mp.R}.Prim dtype")
            if value is not None:
                value = _adopt(value, dtype)
                if tir.is_float(value.dtype) != tir.is_float(dtype) or \
                        tir.is_bool(value.dtype) != tir.is_bool(dtype):
                    raise mp.error(f"{mp.R}.Prim: the value {mp.src(a['value'])} is "
                                   f"{value.dtype}, not {dtype}", a["value"])
        elif value is not None:
            dtype = value.dtype
        else:
            raise mp.error(f"{mp.R}.Prim needs a dtype or a value", call)
        return PrimStructInfo(dtype, value, span=span)

    def _object(self, call: ast.Call, span: Span) -> StructInfo:
        if call.args or call.keywords:
            raise self.mp.error(f"{self.mp.R}.Object takes no arguments", call)
        return ObjectStructInfo(span=span)

    def _callable(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Callable", ("params", "ret", "purity", "derive_func"), 0)
        if "derive_func" in a and not _is_none(a["derive_func"]):
            # The name of a TVM-registered function that derives a call's result
            # struct info; phasec cannot run it, so the callable stays opaque in
            # its result (R.Object unless the binding is annotated).
            mp.str_arg(a["derive_func"], f"{mp.R}.Callable derive_func")
        params = None
        if "params" in a and not _is_none(a["params"]):
            p = a["params"]
            if not isinstance(p, (ast.Tuple, ast.List)):
                raise mp.error(f"{mp.R}.Callable params must be a tuple of struct info", p)
            params = [self.parse(e) for e in p.elts]
        ret: StructInfo = ObjectStructInfo()
        if "ret" in a and not _is_none(a["ret"]):
            ret = self.parse(a["ret"])
        purity = True
        if "purity" in a:
            value = a["purity"]
            if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                raise mp.error(f"{mp.R}.Callable purity must be True or False", value)
            purity = value.value
        return FuncStructInfo(params, ret, purity, span=span)


def _unknown_length(mp: Any, node: ast.AST | None) -> bool:
    """``(-1,)``: TVM 0.27's shape for a 1-D tensor of unknown length."""
    return isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == 1 \
        and type(mp.number(node.elts[0])) is int and mp.number(node.elts[0]) == -1
