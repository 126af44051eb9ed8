"""Registered operators in ``@R.function`` bodies: ``R.<name>(operands...,
attributes...)`` matched to the operator registry's operands and attributes
(a mixin of the Relax function parser, :mod:`phasec.script.parser.relax_level`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from phasec.errors import counted
from phasec.arith import simplify
from phasec.ir import expr as rx
from phasec.ir import tir
from phasec.ir.struct_info import PrimStructInfo
from phasec.op.calls import (
    OPERAND_DEFAULTS, OPTIONAL_OPERANDS, PRIM_OPERANDS, SHAPE_OPERANDS, SYMBOLIC_ATTRS,
    finish_with_operands, normalize_attrs,
)
from phasec.op.index_map import MapError, index_map_text
from phasec.op.registry import REQUIRED, OpDef, find_op
from phasec.script.parser.common import _SINFO_KINDS, _dotted, _is_none, _to_tuple
from phasec.script.parser.global_infos import resolve_vdevice
from phasec.script.parser.relax_calls import _RELAX_CALLS, _RELAX_STATEMENT_ONLY

if TYPE_CHECKING:
    from phasec.script.parser.driver import ModuleParser


class _OperatorCalls:
    """``R.<operator>(...)`` calls (mixed into the Relax function parser)."""

    mp: ModuleParser

    def _relax_call(self, name: str, node: ast.Call) -> rx.Expr:
        mp = self.mp
        handler = _RELAX_CALLS.get(name)
        if handler is not None:
            return getattr(self, handler)(node)
        if name in _RELAX_STATEMENT_ONLY:
            raise mp.error(f"{mp.R}.{name} {_RELAX_STATEMENT_ONLY[name]}", node)
        if name in _SINFO_KINDS:
            raise mp.error(f"{mp.R}.{name} is a struct info annotation, not a value", node)
        if name == "nn.attention":
            node = _attention_with_bias(node)
            if _dotted(node.func)[-1] == "attention_bias":
                name = "nn.attention_bias"
        if name == "hint_on_device":
            node = _hint_on_device_flat(mp, node)
        elif name == "to_vdevice":
            node = _to_vdevice_resolved(mp, node)
        opdef = find_op("relax." + name)
        if opdef is None:
            hint = mp.op_suggestion("R." + name).replace("R.", mp.R + ".")
            raise mp.error(f"unknown operator {mp.R}.{name}{hint}", node.func)
        return self._op_call(opdef, node)

    def _op_call(self, opdef: OpDef, node: ast.Call) -> rx.Expr:
        """A registered operator: operands by ``OpDef.args``, attributes by ``OpDef.attrs``."""
        mp = self.mp
        what = f"{mp.R}.{opdef.name.removeprefix('relax.')}"
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{what}: *args are not supported", a)
        n_fixed = len(opdef.args) - (1 if opdef.variadic else 0)
        attr_names = list(opdef.attrs)
        operand_nodes: list[ast.AST | None] = list(node.args[:n_fixed])
        operand_nodes += [None] * (n_fixed - len(operand_nodes))
        attr_nodes: dict[str, ast.AST] = {}
        rest = node.args[n_fixed:]
        if opdef.variadic:
            operand_nodes += rest
        else:
            if len(rest) > len(attr_names):
                raise mp.error(
                    f"{what} takes {counted(len(opdef.args), 'operand')} "
                    f"({', '.join(opdef.args) or 'none'})"
                    + (f" and {counted(len(attr_names), 'attribute')} ({', '.join(attr_names)})"
                       if attr_names else "")
                    + f", got {counted(len(node.args), 'positional argument')}", node)
            attr_nodes.update(zip(attr_names, rest))
        sinfo_node: ast.AST | None = None
        for kw in node.keywords:
            if kw.arg is None:
                raise mp.error(f"{what}: **kwargs are not supported", kw.value)
            if kw.arg in opdef.args[:n_fixed]:
                i = opdef.args.index(kw.arg)
                if operand_nodes[i] is not None:
                    raise mp.error(f"{what}: operand {kw.arg!r} given twice", kw.value)
                operand_nodes[i] = kw.value
            elif kw.arg in opdef.attrs:
                if kw.arg in attr_nodes:
                    raise mp.error(f"{what}: attribute {kw.arg!r} given twice", kw.value)
                attr_nodes[kw.arg] = kw.value
            elif kw.arg in ("sinfo_args", "ty_args"):
                sinfo_node = kw.value
            else:
                expected = ", ".join(attr_names) or "none"
                raise mp.error(f"unknown keyword attribute {kw.arg!r} for {what} (its attributes: "
                               f"{expected})", kw.value)
        defaults = OPERAND_DEFAULTS.get(opdef.name, {})
        operand_nodes = [ast.copy_location(ast.Constant(defaults[opdef.args[i]]), node)
                         if n is None and i < n_fixed and opdef.args[i] in defaults else n
                         for i, n in enumerate(operand_nodes)]  # R.tril(x): R.tril(x, 0)
        missing = [opdef.args[i] for i, n in enumerate(operand_nodes[:n_fixed]) if n is None]
        optional = OPTIONAL_OPERANDS.get(opdef.name, ())
        if missing and all(m in optional for m in missing):
            # TVM's "void" for an omitted operand (R.memory.view's shape, dtype, offset)
            empty = ast.copy_location(ast.Call(ast.Attribute(ast.Name(mp.R, ast.Load()), "tuple",
                                                             ast.Load()), [], []), node)
            for n in ast.walk(empty):
                ast.copy_location(n, node)
            operand_nodes = [empty if n is None and i < n_fixed else n
                             for i, n in enumerate(operand_nodes)]
            missing = []
        if missing:
            given = sum(n is not None for n in operand_nodes)
            raise mp.error(f"{what} expects {counted(len(opdef.args), 'operand')} "
                           f"({', '.join(opdef.args)}), got {given}; missing {', '.join(missing)}",
                           node)
        attrs: dict[str, Any] = {}
        for key, default in opdef.attrs.items():
            if key in attr_nodes:
                attrs[key] = self._attr_value(key, attr_nodes[key], opdef)
            elif default is REQUIRED:
                raise mp.error(f"{what} requires the attribute {key!r}", node)
            else:
                attrs[key] = _to_tuple(default)
        attrs = _normalize_attrs(opdef, attrs)
        operands = []
        for i, n in enumerate(operand_nodes):
            operands.append(self._operand(opdef, i, n))
        attrs = finish_with_operands(opdef.name, attrs, operands)
        sinfo_args = self._sinfo_list(sinfo_node) if sinfo_node is not None else ()
        call = rx.Call(rx.Op(opdef.name, span=mp.span(node.func)), operands, attrs, sinfo_args,
                       span=mp.span(node))
        return self._with_sinfo(call)

    def _attr_value(self, key: str, node: ast.AST, opdef: OpDef | None = None) -> Any:
        """An operator attribute: a literal, an index map (``T.index_map(lambda
        ...)`` or a bare lambda, read structurally, never run), a typed
        scalar (``pad_value=T.float32(1.5)``) or, where the registry allows
        it (:data:`phasec.op.SYMBOLIC_ATTRS`), a tuple of symbolic integer
        expressions (strided_slice's ``(index, index + 1)``)."""
        if opdef is not None and isinstance(node, (ast.List, ast.Tuple)) \
                and key in SYMBOLIC_ATTRS.get(opdef.name, ()):
            return tuple(self._symbolic_entry(opdef, key, e) for e in node.elts)
        if isinstance(node, ast.Lambda) or (
                isinstance(node, ast.Call) and _dotted(node.func) == (self.mp.T, "index_map")):
            try:
                return index_map_text(node)
            except MapError as exc:
                raise self.mp.error(f"{key}: {exc}", node) from None
        if isinstance(node, ast.Call) and _dotted(node.func) is not None \
                and _dotted(node.func)[0] == self.mp.T:
            return self.prim.parse(node)
        return _to_tuple(self.mp.literal(node))

    def _symbolic_entry(self, opdef: OpDef, key: str, node: ast.AST) -> Any:
        """One entry of a symbolic attribute: an integer, or an int64 expression
        over the function's symbolic variables (``R.prim_value(e)`` is ``e``)."""
        mp = self.mp
        what = f"{mp.R}.{opdef.name.removeprefix('relax.')} {key}"
        if isinstance(node, ast.Starred):
            raise mp.error(f"{what}: *args are not supported", node)
        if isinstance(node, ast.Call) and _dotted(node.func) == (mp.R, "prim_value"):
            if len(node.args) != 1 or node.keywords:
                raise mp.error(f"{mp.R}.prim_value takes one value", node)
            node = node.args[0]
        number = mp.number(node)
        if isinstance(number, int) and not isinstance(number, bool):
            return number
        if number is not None:
            raise mp.error(f"{what}: expected an integer or a symbolic integer expression, "
                           f"got {mp.src(node)}", node)
        known: dict[str, tir.PrimExpr] = {}
        for n in ast.walk(node):
            var = self._lookup(n.id) if isinstance(n, ast.Name) else None
            if var is None:
                continue
            sinfo = getattr(var, "struct_info", None)
            if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None \
                    and tir.is_int(sinfo.value.dtype):
                # an R.Prim variable of known value (LambdaLifting's captured n_value:
                # R.Prim(value=n)) stands for that value, as TVM reads it
                known[n.id] = sinfo.value
                continue
            raise mp.error(
                f"{what}: {n.id!r} is a Relax variable whose value is not known; phasec "
                f"takes integers and expressions of symbolic shape variables here (declare "
                f"one, k = {mp.T}.int64(), bound by a parameter's {mp.R}.Shape([k]) or an "
                f"{mp.R}.match_cast, and use k)", n)
        if known:
            resolve = self.prim.resolve
            self.prim.resolve = lambda name, n, declare: (
                known[name] if name in known else resolve(name, n, declare))
            try:
                value = self.prim.parse(node, "int64")
            finally:
                self.prim.resolve = resolve
        else:
            value = self.prim.parse(node, "int64")
        if not tir.is_int(value.dtype):
            raise mp.error(f"{what}: expected an integer expression, got {mp.src(node)} of "
                           f"dtype {value.dtype}", node)
        return value.value if type(value) is tir.IntImm else value

    def _operand(self, opdef: OpDef, index: int, node: ast.AST) -> rx.Expr:
        """An operator operand. As for :func:`phasec.op.call_op`, a Python
        tuple of dims for a shape operand is an R.shape and an integer for a
        scalar operand (``offset``) an R.prim_value."""
        name = opdef.args[min(index, len(opdef.args) - 1)]
        shape_operands, prim_operands = SHAPE_OPERANDS, PRIM_OPERANDS
        if name in prim_operands:
            number = self.mp.number(node)
            if isinstance(number, int) and not isinstance(number, bool):
                return rx.PrimValue(tir.IntImm(number, "int64", span=self.mp.span(node)),
                                    span=self.mp.span(node))
            if isinstance(node, ast.BinOp) and _int_literals_only(node):
                # integer arithmetic on literals (relative_byte_offset=32 * 64 * 4), which
                # TVM's parser evaluates as Python: folded here, nothing executed
                value = simplify(self.prim.parse(node, "int64"))
                if isinstance(value, tir.IntImm):
                    return rx.PrimValue(tir.IntImm(value.value, "int64", span=self.mp.span(node)),
                                        span=self.mp.span(node))
        if name in shape_operands and isinstance(node, (ast.Tuple, ast.List)) \
                and all(self._looks_like_dim(e) for e in node.elts):
            return rx.ShapeExpr(self.mp.dims(self.prim, node.elts, f"shape operand {name!r}",
                                             allow_negative=True), span=self.mp.span(node))
        return self._arg(node)

    def _looks_like_dim(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return self._lookup(node.id) is None and node.id in self.sig.syms
        return not isinstance(node, (ast.Tuple, ast.List, ast.Subscript)) and not (
            isinstance(node, ast.Call) and _dotted(node.func) is not None
            and _dotted(node.func)[0] != self.mp.T)


def _int_literals_only(node: ast.AST) -> bool:
    """An expression of integer literals and + - * // (nothing else)."""
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp):
            if not isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
                return False
        elif isinstance(n, ast.UnaryOp):
            if not isinstance(n.op, ast.USub):
                return False
        elif isinstance(n, ast.Constant):
            if type(n.value) is not int:
                return False
        elif not isinstance(n, (ast.operator, ast.unaryop)):
            return False
    return True


def _normalize_attrs(opdef: OpDef, attrs: dict[str, Any]) -> dict[str, Any]:
    """The registry's canonical attribute values; a value the registry rejects
    is kept as written (a semantic problem the verifier reports)."""
    try:
        return normalize_attrs(opdef, attrs)
    except Exception:  # noqa: BLE001
        return attrs


def _attention_with_bias(node: ast.Call) -> ast.Call:
    """``R.nn.attention(q, k, v, bias, ...)`` / ``bias=...``: TVM's Python
    function makes ``R.nn.attention_bias`` when a bias is given (its 4th
    parameter); the call respelt so (a None bias: plain attention)."""
    args, keywords = list(node.args), list(node.keywords)
    bias = None
    if len(args) >= 4:
        bias = args.pop(3)
    for kw in keywords:
        if kw.arg == "bias":
            bias = kw.value
    keywords = [kw for kw in keywords if kw.arg != "bias"]
    if bias is None or _is_none(bias):
        if len(args) == len(node.args) and len(keywords) == len(node.keywords):
            return node
        return ast.copy_location(ast.Call(node.func, args, keywords), node)
    func = ast.copy_location(ast.Attribute(node.func.value, "attention_bias", ast.Load()),
                             node.func)
    return ast.copy_location(ast.Call(func, [*args[:3], bias, *args[3:]], keywords), node)


def _to_vdevice_resolved(mp: ModuleParser, node: ast.Call) -> ast.Call:
    """``R.to_vdevice(x, dst_vdevice="llvm:0")``: the device named as in a
    tensor's ``vdevice`` (``"kind[:index]"`` among the module's virtual
    devices, as TVM's parser looks it up), made its canonical
    ``"kind:index:scope"``."""
    args, keywords = list(node.args), list(node.keywords)
    if len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
        args[1] = ast.copy_location(
            ast.Constant(resolve_vdevice(mp, args[1], f"{mp.R}.to_vdevice dst_vdevice")), args[1])
    for i, kw in enumerate(keywords):
        if kw.arg == "dst_vdevice" and isinstance(kw.value, ast.Constant) \
                and isinstance(kw.value.value, str):
            text = resolve_vdevice(mp, kw.value, f"{mp.R}.to_vdevice dst_vdevice")
            keywords[i] = ast.copy_location(
                ast.keyword("dst_vdevice", ast.copy_location(ast.Constant(text), kw.value)), kw)
    return ast.copy_location(ast.Call(node.func, args, keywords), node)


#: DLPack device types of TVM's device constructors (tvm.cpu() is type 1)
_DLPACK_DEVICE_TYPES = {"cpu": 1, "cuda": 2, "opencl": 4, "vulkan": 7, "metal": 8, "rocm": 10,
                        "ext_dev": 12, "hexagon": 16}


def _hint_on_device_flat(mp: ModuleParser, node: ast.Call) -> ast.Call:
    """``R.hint_on_device(x, R.device(device_type=1, index=0), "global")``, as
    TVM writes it, respelt with the operator's attributes as keywords
    (``device_type=1, index=0, memory_scope="global"``)."""
    args, keywords = list(node.args), list(node.keywords)
    device = args.pop(1) if len(args) >= 2 else None
    for kw in keywords:
        if kw.arg == "dst_vdevice":
            device = kw.value
    keywords = [kw for kw in keywords if kw.arg != "dst_vdevice"]
    if len(args) >= 2:
        keywords.append(ast.copy_location(ast.keyword("memory_scope", args.pop(1)), node))
    if device is None:
        return ast.copy_location(ast.Call(node.func, args, keywords), node)
    name = _dotted(device.func) if isinstance(device, ast.Call) else None
    if name is not None and len(name) == 2 and name[0] == "tvm":
        # the Python spelling TVM's parser evaluates: tvm.cpu(), tvm.cuda(1)...
        if name[1] not in _DLPACK_DEVICE_TYPES or device.keywords or len(device.args) > 1:
            raise mp.error(f"{mp.R}.hint_on_device: expected tvm.<device>(index) with a device of "
                           f"{', '.join(_DLPACK_DEVICE_TYPES)}, got {mp.src(device)}", device)
        type_node = ast.copy_location(ast.Constant(_DLPACK_DEVICE_TYPES[name[1]]), device)
        index = device.args[0] if device.args else ast.copy_location(ast.Constant(0), device)
        keywords += [ast.copy_location(ast.keyword("device_type", type_node), device),
                     ast.copy_location(ast.keyword("index", index), device)]
    elif name == (mp.R, "device"):
        fields = ("device_type", "index")
        if len(device.args) > 2:
            raise mp.error(f"{mp.R}.device takes device_type and index", device)
        keywords += [ast.copy_location(ast.keyword(k, v), v) for k, v in zip(fields, device.args)]
        for kw in device.keywords:
            if kw.arg not in fields:
                raise mp.error(f"{mp.R}.device: unknown argument {kw.arg!r} (it takes "
                               f"device_type and index)", kw.value)
            keywords.append(kw)
    else:
        raise mp.error(f"{mp.R}.hint_on_device expects a device "
                       f"{mp.R}.device(device_type=..., index=...), got {mp.src(device)}", device)
    return ast.copy_location(ast.Call(node.func, args, keywords), node)
