"""The ONNX frontend: ONNX models into phasec's ingestion phase.

::

    from phasec.frontend.onnx import from_onnx

    mod = from_onnx("resnet50.onnx")                 # verified, phase ingestion
    mod = from_onnx(model_proto, shapes={"x": ("batch", 3, 224, 224)})
    exe = phasec.build(mod)
    y = phasec.VirtualMachine(exe)["main"](x)

``from_onnx`` returns a module with one Relax function ``main``: graph
inputs are its parameters (symbolic dimensions for dynamic ONNX
dimensions), initializers are constants, nodes become phasec operator calls
in one dataflow block, each binding's span naming the ONNX node it came
from. Composite ONNX operators (Gemm, LRN, LayerNormalization,
BatchNormalization, ...) are decomposed into phasec operators; shape
computations on known values (``Shape -> Gather -> Concat -> Reshape``) are
evaluated at import. A model using anything the frontend does not support
raises one :class:`~phasec.frontend.UnsupportedModelError` listing every
unsupported node (name, op_type, opset, reason).

The ``onnx`` package (``pip install phasec[onnx]``) is imported only when a
model is imported; ``import phasec`` never imports it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from phasec.frontend.errors import FrontendError, UnsupportedModelError, UnsupportedNode
from phasec.frontend.onnx._importer import import_model, sanitize, supported_ops

if TYPE_CHECKING:
    import numpy as np

    from phasec.ir import IRModule

__all__ = ["from_onnx", "from_onnx_with_params", "supported_ops", "parameter_name",
           "FrontendError", "UnsupportedModelError", "UnsupportedNode"]


def _need_onnx() -> None:
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise FrontendError("the ONNX frontend needs the 'onnx' package: "
                            "pip install 'phasec[onnx]'") from None


def from_onnx(model_or_path: "Any | str | os.PathLike | bytes",
              shapes: Mapping[str, Sequence[int | str]] | None = None,
              keep_params_in_input: bool = False) -> "IRModule":
    """Import an ONNX model as a verified ingestion-phase IRModule.

    Args:
        model_or_path: an ``onnx.ModelProto``, a path to a ``.onnx`` file, or
            the serialized model as bytes.
        shapes: input name -> shape, overriding the model's declared input
            shapes; a dimension is an int or a name (a symbolic dimension,
            shared by every input that uses the name).
        keep_params_in_input: initializers become trailing parameters of
            ``main`` (after the graph inputs) instead of constants; the
            function attribute ``num_input`` counts the graph inputs. Use
            :func:`from_onnx_with_params` to get their values too.

    Raises:
        UnsupportedModelError: operators, attributes or dtypes the frontend
            does not support (all of them, listed at once).
        FrontendError: a file that is not a readable ONNX model, or a model
            that is inconsistent (undefined tensor names, bad shapes).
    """
    return from_onnx_with_params(model_or_path, shapes, keep_params_in_input)[0]


def from_onnx_with_params(model_or_path: Any,
                          shapes: Mapping[str, Sequence[int | str]] | None = None,
                          keep_params_in_input: bool = False,
                          ) -> "tuple[IRModule, dict[str, np.ndarray]]":
    """:func:`from_onnx`, also returning the values of the parameters that
    ``keep_params_in_input`` made (name -> array, in parameter order)."""
    _need_onnx()
    return import_model(model_or_path, shapes, keep_params_in_input)


def parameter_name(onnx_name: str) -> str:
    """The name ``main``'s parameter (or a binding) gets for an ONNX tensor
    name: the name made an identifier (``gpu_0/data_0`` -> ``gpu_0_data_0``).
    Two names that become the same identifier get ``_1``, ``_2``... suffixes."""
    return sanitize(onnx_name)

