"""ONNX element types <-> fuel dtypes, and ONNX tensors -> numpy arrays of a fuel dtype."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from frontends.onnx.errors import OnnxImportError
from runtime.dtypes import NUMPY_DTYPES

ONNX_TO_FUEL: dict[int, str] = {
    TensorProto.FLOAT: "f32",
    TensorProto.DOUBLE: "f64",
    TensorProto.FLOAT16: "f16",
    TensorProto.BFLOAT16: "bf16",
    TensorProto.INT64: "i64",
    TensorProto.INT32: "i32",
    TensorProto.INT8: "i8",
    TensorProto.UINT8: "u8",
    TensorProto.BOOL: "i1",
}
"""The ONNX element types fuel represents; every other one is an `unsupported dtype` error."""

FUEL_TO_ONNX: dict[str, int] = {v: k for k, v in ONNX_TO_FUEL.items()}


def onnx_type_name(elem_type: int) -> str:
    """`FLOAT16`, `STRING`, ... (or the number when ONNX does not know it)."""
    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)


def fuel_dtype(elem_type: int, what: str) -> str:
    """The fuel dtype of an ONNX element type; `what` names the tensor in the error."""
    if elem_type in ONNX_TO_FUEL:
        return ONNX_TO_FUEL[elem_type]
    known = ", ".join(onnx_type_name(t) for t in ONNX_TO_FUEL)
    raise OnnxImportError(
        f"{what} has unsupported dtype {onnx_type_name(elem_type)} (fuel supports {known})"
    )


def to_array(t: TensorProto, what: str) -> np.ndarray:
    """An initializer or constant as a C-contiguous numpy array of its fuel dtype."""
    dtype = fuel_dtype(t.data_type, what)
    try:
        arr = numpy_helper.to_array(t)
    except (ValueError, TypeError, OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as e:
        raise OnnxImportError(f"{what}: cannot read tensor data: {e}") from None
    return arr.astype(NUMPY_DTYPES[dtype], order="C")  # (np.ascontiguousarray makes 0-d 1-d)
