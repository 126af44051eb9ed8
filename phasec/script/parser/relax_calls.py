"""The Relax dialect calls of the TVMScript parser (``R.const``, ``R.shape``,
``R.call_tir``, packed calls, closures...): the table :data:`_RELAX_CALLS` and
their handlers, a mixin of :class:`~phasec.script.parser.relax_level._RelaxFunctionParser`."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from phasec.errors import StructInfoError
from phasec.ir import expr as rx
from phasec.ir import tir
from phasec.ir.struct_info import StructInfo
from phasec.ir.structural import structural_equal
from phasec.op.calls import normalize_attrs
from phasec.op.unary import STOP_FUSION_PACKED
from phasec.op.registry import find_op, get_op
from phasec.script.parser.common import _dotted, _is_none, _to_tuple

#: Relax dialect calls with their own argument conventions: R.<name> -> handler.
_RELAX_CALLS = {
    "const": "_call_const",
    "shape": "_call_shape",
    "ShapeExpr": "_call_shape",
    "TupleGetItem": "_call_tuple_get_item",
    "emit_with_ty": "_call_emit_with_type",
    "emit_with_type": "_call_emit_with_type",
    "prim_value": "_call_prim_value",
    "str": "_call_str",
    "dtype": "_call_dtype",
    "call_tir": "_call_tir",
    "call_tir_inplace": "_call_tir_inplace",
    "call_tir_with_grad": "_call_tir_with_grad",
    "call_dps_packed": "_call_dps_packed",
    "call_packed": "_call_packed",
    "call_pure_packed": "_call_pure_packed",
    "call_inplace_packed": "_call_inplace_packed",
    "call_builtin_with_ctx": "_call_builtin_with_ctx",
    "make_closure": "_call_make_closure",
    "invoke_closure": "_call_invoke_closure",
    "invoke_pure_closure": "_call_invoke_pure_closure",
    "ExternFunc": "_call_extern_func",
    "tuple": "_call_tuple",
    "nn.relu6": "_call_relu6",
}

#: Dialect names that are statements, not values: R.<name> -> where they belong.
_RELAX_STATEMENT_ONLY = {
    "match_cast": "can only be the value of an assignment: `y = R.match_cast(x, R.Tensor(...))`",
    "output": "can only be the last statement of a dataflow block",
    "dataflow": "opens a block: `with R.dataflow():`",
    "func_attr": "can only be a statement at the start of a function body",
    "function": "is a decorator: `@R.function`",
}

_OUT_SINFO = {"out_ty": "out_sinfo"}
#: arithmetic folded in R.const values (TVM's parser evaluates the Python expression)
_CONST_FOLD = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
               ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}
_SINFO_ARGS = {"ty_args": "sinfo_args"}


class _DialectCalls:
    """Handlers of the dialect calls (mixed into the Relax function parser)."""

    def _call_const(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.const", ("value", "dtype"), 1)
        value = self._const_value(a["value"])
        dtype = None
        if "dtype" in a and not _is_none(a["dtype"]):
            dtype = mp.dtype_arg(a["dtype"], f"{mp.R}.const dtype")
        leaves = list(_flatten(value))
        if dtype is None:
            if leaves and all(isinstance(v, bool) for v in leaves):
                dtype = "bool"
            elif leaves and all(isinstance(v, int) for v in leaves):
                dtype = "int32"
            else:
                dtype = "float32"
        if not tir.is_float(dtype):
            for v in leaves:
                if isinstance(v, float):
                    raise mp.error(f"{mp.R}.const: {v!r} is not a valid {dtype} value", a["value"])
        try:
            with np.errstate(all="raise"):
                data = np.array(value, dtype=dtype)
        except (ValueError, TypeError, OverflowError, FloatingPointError) as exc:
            raise mp.error(f"{mp.R}.const: cannot make a {dtype} tensor of this value ({exc})",
                           a["value"]) from None
        if tir.is_int(dtype):
            info = np.iinfo(dtype)
            bad = [v for v in leaves if not info.min <= v <= info.max]
            if bad:
                raise mp.error(f"{mp.R}.const: {bad[0]} does not fit in {dtype}", a["value"])
        return rx.Constant(data, span=mp.span(node))

    def _const_value(self, node: ast.AST) -> Any:
        """Nested lists of numbers (tensor constants), or one number."""
        mp = self.mp
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._const_value(e) for e in node.elts]
        number = mp.number(node)
        if (number is None and isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value.strip().lower() in ("inf", "-inf", "+inf", "nan")):
            number = float(node.value)  # R.const("inf", "float32"): how TVM prints infinity
        if number is None and isinstance(node, ast.BinOp) and type(node.op) in _CONST_FOLD:
            # R.const(15.0 / 14.0): arithmetic on two number literals (folded
            # here as Python would; nothing else is evaluated)
            lhs, rhs = self._const_value(node.left), self._const_value(node.right)
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       for v in (lhs, rhs)):
                raise mp.error(f"{mp.R}.const: only number literals can be combined, got "
                               f"{mp.src(node)!r}", node)
            if isinstance(node.op, ast.Div) and rhs == 0:
                raise mp.error(f"{mp.R}.const: division by zero in {mp.src(node)!r}", node)
            number = _CONST_FOLD[type(node.op)](lhs, rhs)
        if number is None:
            raise mp.error(f"{mp.R}.const expects a number or nested lists of numbers, got "
                           f"{mp.src(node)!r}", node)
        return number

    def _call_tuple(self, node: ast.Call) -> rx.Expr:
        """``R.tuple(a, b)``: TVM 0.27's function spelling of the tuple ``(a, b)``
        (``R.tuple()`` is the empty tuple)."""
        mp = self.mp
        if node.keywords:
            raise mp.error(f"{mp.R}.tuple takes the fields as positional arguments only",
                           node.keywords[0].value)
        fields = []
        for e in node.args:
            if isinstance(e, ast.Starred):
                raise mp.error("*args are not supported in a tuple", e)
            fields.append(self._arg(e))
        return rx.Tuple(fields, span=mp.span(node))

    def _call_relu6(self, node: ast.Call) -> rx.Expr:
        """``R.nn.relu6(x)``: TVM 0.27 registers no such operator; its script
        function builds ``R.clip(x, 0, 6)`` (and prints that), so does phasec."""
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.nn.relu6", ("data",), 1)
        clip = ast.Call(ast.Attribute(ast.Name(mp.R, ast.Load()), "clip", ast.Load()),
                        [a["data"], ast.Constant(0), ast.Constant(6)], [])
        for n in ast.walk(clip):
            ast.copy_location(n, node)
        return self._op_call(get_op("relax.clip"), clip)

    def _call_shape(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.shape", ("values",), 1)
        v = a["values"]
        if not isinstance(v, (ast.List, ast.Tuple)):
            raise mp.error(f"{mp.R}.shape expects a list of dimensions, e.g. {mp.R}.shape([n, 4])", v)
        return rx.ShapeExpr(mp.dims(self.prim, v.elts, f"{mp.R}.shape", allow_negative=True),
                            span=mp.span(node))

    def _call_tuple_get_item(self, node: ast.Call) -> rx.Expr:
        """``R.TupleGetItem(t, i)``: the builder spelling of ``t[i]``."""
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.TupleGetItem", ("tuple_value", "index"), 2)
        index = mp.number(a["index"])
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise mp.error(f"a tuple index must be a non-negative integer literal, got "
                           f"{mp.src(a['index'])!r}", a["index"])
        return rx.TupleGetItem(self._arg(a["tuple_value"]), index, span=mp.span(node))

    def _call_emit_with_type(self, node: ast.Call) -> rx.Expr:
        """``R.emit_with_ty("relax.<op>", (args...), (struct infos...))``: TVM's
        builder spelling of a call of a registered operator by name, with
        explicit type arguments. It is the call ``R.<op>(args..., ty_args=...)``,
        as TVM prints it."""
        mp = self.mp
        what = f"{mp.R}.{_dotted(node.func)[-1]}"
        a = mp.bind_args(node, what, ("op", "args", "ty_args"), 2)
        name = mp.str_arg(a["op"], f"{what}: the operator name")
        if not name.startswith("relax.") or find_op(name) is None:
            raise mp.error(f"{what}: unknown operator {name!r}", a["op"])
        if not isinstance(a["args"], (ast.Tuple, ast.List)):
            raise mp.error(f"{what}: the arguments must be a tuple, e.g. (x, y)", a["args"])
        func: ast.expr = ast.Name(mp.R, ast.Load())
        for part in name.removeprefix("relax.").split("."):
            func = ast.Attribute(func, part, ast.Load())
        keywords = ([ast.keyword("ty_args", a["ty_args"])]
                    if "ty_args" in a and not _is_none(a["ty_args"]) else [])
        call = ast.Call(func, list(a["args"].elts), keywords)
        for n in ast.walk(call):
            if not hasattr(n, "lineno"):  # the synthesized callee: located at the call
                ast.copy_location(n, node)
        return self._call(call)

    def _call_prim_value(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.prim_value", ("value",), 1)
        return rx.PrimValue(self.prim.parse(a["value"]), span=mp.span(node))

    def _call_str(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.str", ("value",), 1)
        return rx.StringImm(mp.str_arg(a["value"], f"{mp.R}.str"), span=mp.span(node))

    def _call_dtype(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.dtype", ("value",), 1)
        return rx.DataTypeImm(mp.dtype_arg(a["value"], f"{mp.R}.dtype"), span=mp.span(node))

    def _call_tir(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.call_tir",
                         ("gvar", "args", "out_sinfo", "tir_vars", "sinfo_args"), 2,
                         {**_OUT_SINFO, **_SINFO_ARGS})
        func = self._arg(a["gvar"])
        args = [func, self._args_tuple(a["args"])]
        if "tir_vars" in a and not _is_none(a["tir_vars"]):
            args.append(self._tir_vars(a["tir_vars"]))
        return self._builtin("relax.call_tir", node, args, self._dps_sinfo(a, f"{mp.R}.call_tir"))

    def _call_tir_inplace(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.call_tir_inplace"
        # TVM's positional order is (gvar, args, inplace_indices, out_sinfo,
        # tir_vars); with inplace_indices given by keyword, a third positional
        # argument is tir_vars (the operand order of phasec's registry).
        if any(kw.arg == "inplace_indices" for kw in node.keywords):
            params = ("gvar", "args", "tir_vars", "out_sinfo", "inplace_indices", "sinfo_args")
        else:
            params = ("gvar", "args", "inplace_indices", "out_sinfo", "tir_vars", "sinfo_args")
        a = mp.bind_args(node, what, params, 2, {**_OUT_SINFO, **_SINFO_ARGS})
        if "inplace_indices" not in a:
            raise mp.error(f"{what} needs inplace_indices=[...]", node)
        args = [self._arg(a["gvar"]), self._args_tuple(a["args"])]
        if "tir_vars" in a and not _is_none(a["tir_vars"]):
            args.append(self._tir_vars(a["tir_vars"]))
        indices = _to_tuple(mp.literal(a["inplace_indices"]))
        if isinstance(indices, int):
            indices = (indices,)
        if not (isinstance(indices, tuple) and all(isinstance(k, int) and not isinstance(k, bool)
                                                   for k in indices)):
            raise mp.error(f"{what}: inplace_indices must be a list of integers, got "
                           f"{mp.src(a['inplace_indices'])}", a["inplace_indices"])
        return self._builtin("relax.call_tir_inplace", node, args, self._dps_sinfo(a, what),
                             {"inplace_indices": indices})

    def _call_tir_with_grad(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.call_tir_with_grad"
        a = mp.bind_args(node, what,
                         ("gvar", "args", "out_sinfo", "te_grad_name", "te_grad_kwargs",
                          "sinfo_args"), 2, {**_OUT_SINFO, **_SINFO_ARGS})
        if "te_grad_name" not in a:
            raise mp.error(f"{what} needs te_grad_name=\"...\" (the TE gradient's name)", node)
        attrs = {"te_grad_name": mp.str_arg(a["te_grad_name"], f"{what} te_grad_name")}
        if "te_grad_kwargs" in a and not _is_none(a["te_grad_kwargs"]):
            kwargs = mp.literal(a["te_grad_kwargs"])
            if not isinstance(kwargs, dict):
                raise mp.error(f"{what}: te_grad_kwargs must be a dict, got "
                               f"{mp.src(a['te_grad_kwargs'])}", a["te_grad_kwargs"])
            attrs["te_grad_kwargs"] = {k: _to_tuple(v) for k, v in kwargs.items()}
        try:
            attrs = normalize_attrs(find_op("relax.call_tir_with_grad"), attrs)
        except StructInfoError as exc:
            raise mp.error(f"{what}: {exc.message}", node) from None
        args = [self._arg(a["gvar"]), self._args_tuple(a["args"])]
        return self._builtin("relax.call_tir_with_grad", node, args, self._dps_sinfo(a, what),
                             attrs)

    def _dps_sinfo(self, a: dict[str, ast.expr], what: str) -> tuple[StructInfo, ...]:
        """``out_sinfo=`` (the usual spelling) or raw ``sinfo_args=``."""
        if "out_sinfo" in a and "sinfo_args" in a:
            raise self.mp.error(f"{what}: give out_sinfo= or sinfo_args=, not both", a["sinfo_args"])
        if "out_sinfo" in a:
            return (self._out_sinfo(a["out_sinfo"]),)
        if "sinfo_args" in a:
            return self._sinfo_list(a["sinfo_args"])
        raise self.mp.error(f"{what} needs out_sinfo=<struct info of the result>", self.mp.where)

    def _tir_vars(self, node: ast.AST) -> rx.Expr:
        if isinstance(node, (ast.List, ast.Tuple)):
            return rx.ShapeExpr(self.mp.dims(self.prim, node.elts, "tir_vars", allow_negative=True),
                                span=self.mp.span(node))
        return self._arg(node)

    def _call_dps_packed(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.call_dps_packed"
        a = mp.bind_args(node, what, ("func", "args", "out_sinfo", "sinfo_args"), 2,
                         {**_OUT_SINFO, **_SINFO_ARGS})
        func = self._callee_arg(a["func"])
        return self._builtin("relax.call_dps_packed", node, [func, self._args_tuple(a["args"])],
                             self._dps_sinfo(a, what))

    def _callee_arg(self, node: ast.AST) -> rx.Expr:
        """A packed function name (string literal -> ExternFunc) or any value."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return rx.ExternFunc(node.value, span=self.mp.span(node))
        return self._arg(node)

    def _call_extern_func(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.ExternFunc", ("global_symbol", "struct_info"), 1)
        func = self._extern(a["global_symbol"], f"{mp.R}.ExternFunc")
        if "struct_info" in a and not _is_none(a["struct_info"]):
            func = rx.ExternFunc(func.global_symbol, self.sinfo_parser.parse(a["struct_info"]),
                                 span=func.span)
        return func

    def _packed_parts(self, node: ast.Call, what: str, callee_is_name: bool
                      ) -> tuple[rx.Expr, list[rx.Expr], tuple[StructInfo, ...], dict]:
        mp = self.mp
        if not node.args:
            raise mp.error(f"{what} needs the packed function's name as first argument", node)
        func = self._extern(node.args[0], what) if callee_is_name else self._callee_arg(node.args[0])
        args = []
        for a in node.args[1:]:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{what}: *args are not supported", a)
            args.append(self._arg(a))
        sinfo_args: tuple[StructInfo, ...] = ()
        attrs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise mp.error(f"{what}: **kwargs are not supported", kw.value)
            if _SINFO_ARGS.get(kw.arg, kw.arg) == "sinfo_args":
                sinfo_args = self._sinfo_list(kw.value)
            else:  # extra keywords are call attributes (as in TVM)
                attrs[kw.arg] = _to_tuple(mp.literal(kw.value))
        return func, args, sinfo_args, attrs

    def _call_packed(self, node: ast.Call) -> rx.Expr:
        func, args, sinfo_args, attrs = self._packed_parts(node, f"{self.mp.R}.call_packed", True)
        call = rx.Call(func, args, attrs, sinfo_args, span=self.mp.span(node))
        return self._with_sinfo(call)

    def _call_pure_packed(self, node: ast.Call) -> rx.Expr:
        func, args, sinfo_args, attrs = self._packed_parts(node, f"{self.mp.R}.call_pure_packed", False)
        if type(func) is rx.ExternFunc and func.global_symbol == STOP_FUSION_PACKED:
            return self._stop_fusion(node, args, sinfo_args, attrs)
        return self._builtin("relax.call_pure_packed", node, [func, *args], sinfo_args, attrs)

    def _stop_fusion(self, node: ast.Call, args: list[rx.Expr], sinfo_args: tuple[StructInfo, ...],
                     attrs: dict) -> rx.Expr:
        """``R.call_pure_packed("phasec.stop_fusion", x, ty_args=...)``: how TVM's
        syntax spells ``R.stop_fusion(x)`` (TVM 0.27 has no such operator)."""
        mp = self.mp
        what = f'{mp.R}.call_pure_packed("{STOP_FUSION_PACKED}", ...)'
        if len(args) != 1 or attrs:
            raise mp.error(f"{what} (phasec's R.stop_fusion) takes exactly one operand and no "
                           f"attributes", node)
        call = self._builtin("relax.stop_fusion", node, args)
        if len(sinfo_args) > 1 or (sinfo_args and call.struct_info is not None
                                   and not structural_equal(sinfo_args[0], call.struct_info)):
            raise mp.error(f"{what} (phasec's R.stop_fusion): ty_args must be the operand's "
                           f"struct info, the identity's result", node)
        return call

    def _call_inplace_packed(self, node: ast.Call) -> rx.Expr:
        what = f"{self.mp.R}.call_inplace_packed"
        func, args, sinfo_args, attrs = self._packed_parts(node, what, False)
        try:
            attrs = normalize_attrs(find_op("relax.call_inplace_packed"), attrs)
        except StructInfoError as exc:
            raise self.mp.error(str(exc), node) from None
        return self._builtin("relax.call_inplace_packed", node, [func, *args], sinfo_args, attrs)

    def _call_builtin_with_ctx(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.call_builtin_with_ctx"
        a = mp.bind_args(node, what, ("func", "args", "sinfo_args"), 2, _SINFO_ARGS)
        func = self._callee_arg(a["func"])
        sinfo_args = self._sinfo_list(a["sinfo_args"]) if "sinfo_args" in a else ()
        return self._builtin("relax.call_builtin_with_ctx", node, [func, self._arg(a["args"])],
                             sinfo_args)

    def _call_make_closure(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.make_closure", ("func", "args"), 2)
        func = self._arg(a["func"])
        return self._builtin("relax.make_closure", node, [func, self._args_tuple(a["args"])])

    def _invoke(self, node: ast.Call, op_name: str) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.{op_name.removeprefix('relax.')}"
        a = mp.bind_args(node, what, ("closure", "args", "sinfo_args"), 2, _SINFO_ARGS)
        closure = self._arg(a["closure"])
        args = self._args_tuple(a["args"])
        sinfo_args = self._sinfo_list(a["sinfo_args"]) if "sinfo_args" in a else ()
        return self._builtin(op_name, node, [closure, args], sinfo_args)

    def _call_invoke_closure(self, node: ast.Call) -> rx.Expr:
        return self._invoke(node, "relax.invoke_closure")

    def _call_invoke_pure_closure(self, node: ast.Call) -> rx.Expr:
        return self._invoke(node, "relax.invoke_pure_closure")


def _flatten(value: Any):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            yield v
