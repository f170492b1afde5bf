"""The Open Inference Protocol (KServe v2 REST) tensors: JSON ``{"name", "shape", "datatype",
"data"}`` and the binary tensor extension (a JSON header of ``Inference-Header-Content-Length``
bytes, then each binary tensor's raw little-endian bytes in order). Every problem with a request
is one :class:`ProtocolError` line, answered with status 400."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np
import torch

from samebits.errors import printable
from samebits.files import MAX_JSON_DEPTH, BadJson, check_depth, parse_json

HEADER_LENGTH = "Inference-Header-Content-Length"

DATATYPES: dict[str, torch.dtype] = {
    "BOOL": torch.bool,
    "UINT8": torch.uint8,
    "INT8": torch.int8,
    "INT16": torch.int16,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "FP16": torch.float16,
    "BF16": torch.bfloat16,
    "FP32": torch.float32,
    "FP64": torch.float64,
}
NAMES = {dtype: name for name, dtype in DATATYPES.items()}


class ProtocolError(ValueError):
    """A request that does not follow the protocol or this model's signature (status 400)."""


class TooBig(ProtocolError):
    """A JSON part larger than the server parses (status 413: send the tensors in binary)."""


MAX_ELEMENTS = 2**31  # values one input may hold: a larger shape is refused before anything is allocated


def datatype_of(dtype: torch.dtype) -> str:
    if dtype not in NAMES:
        raise ProtocolError(f"a {dtype} tensor has no datatype in the inference protocol")
    return NAMES[dtype]


def parse_body(body: bytes, header_length: str | None, max_json: int | None = None) -> tuple[dict[str, Any], bytes]:
    """The request's JSON object and the binary part after it (empty without the extension);
    a JSON part over ``max_json`` bytes is :class:`TooBig`."""
    if header_length is not None:
        try:
            n = int(header_length)
        except ValueError:
            raise ProtocolError(f"{HEADER_LENGTH} must be an integer, not {header_length!r}") from None
        if not 0 <= n <= len(body):
            raise ProtocolError(f"{HEADER_LENGTH} is {n}, but the body has {len(body)} bytes")
        head, binary = body[:n], body[n:]
    else:
        head, binary = body, b""
    if max_json is not None and len(head) > max_json:
        raise TooBig(
            f"the JSON part is {len(head)} bytes; the limit is {max_json} (--max-json-mb): send large tensors in binary"
        )
    try:
        request = parse_request_json(head)
    except BadJson as exc:
        raise ProtocolError(f"the request is {exc}") from None
    if not isinstance(request, dict):
        raise ProtocolError("the request must be a JSON object with 'inputs'")
    unknown = sorted(set(request) - {"id", "parameters", "inputs", "outputs"})
    if unknown:
        unknown = [printable(u) for u in unknown]
        raise ProtocolError(f"unknown request field(s) {', '.join(unknown)}; known: id, parameters, inputs, outputs")
    if isinstance(request.get("id"), str) and not is_text(request["id"]):
        raise ProtocolError("the request's 'id' is not UTF-8 text (it holds a lone surrogate)")
    return request, binary


def _orjson_loads() -> Any:
    try:
        import orjson
    except ImportError:
        return None
    return orjson.loads


_FAST_LOADS = _orjson_loads()


def parse_request_json(head: bytes) -> Any:
    """A request's JSON (:func:`~samebits.files.parse_json`), through orjson where installed: 5x
    faster on a request's floats (98 against 19 us for 512 of them). What orjson refuses (NaN and
    Infinity, which Python's json reads, and every error) goes to json, for the same answer; an
    integer beyond 64 bits it reads as a float (a float input's value; refused where integers are
    expected, as json's is)."""
    if _FAST_LOADS is None:
        return parse_json(head)
    try:
        data = _FAST_LOADS(head)
    except ValueError:  # orjson's JSONDecodeError
        return parse_json(head)
    if head.count(b"[") + head.count(b"{") >= MAX_JSON_DEPTH:  # fewer openers cannot nest too deep
        check_depth(data)
    return data


def is_text(value: str) -> bool:
    """Whether ``value`` is text a response can hold (no lone surrogate, which JSON's ``\\ud800``
    gives and UTF-8 cannot encode)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parameters(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``parameters`` object of a request, input or output (``{}`` when absent)."""
    value = obj.get("parameters")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: 'parameters' must be an object")
    return value


def tensor_header(spec: Any) -> tuple[str, list[int], str]:
    """(name, shape, datatype) of one request input, checked: a name, a datatype of the protocol,
    a shape of non-negative integers of at most ``MAX_ELEMENTS`` values."""
    if not isinstance(spec, dict):
        raise ProtocolError("each input must be an object with name, shape, datatype and data")
    name = spec.get("name")
    shape = spec.get("shape")
    datatype = spec.get("datatype")
    if not isinstance(name, str) or not name:
        raise ProtocolError("an input has no 'name'")
    if not is_text(name):
        raise ProtocolError(f"an input's name {printable(name)!r} is not UTF-8 text (it holds a lone surrogate)")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ProtocolError(f"input {name}: 'shape' must be a list of non-negative integers")
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise ProtocolError(f"input {name}: datatype {datatype!r} is not one of {', '.join(DATATYPES)}")
    count = math.prod(shape)
    if count > MAX_ELEMENTS or any(d > MAX_ELEMENTS for d in shape):
        raise ProtocolError(f"input {name}: shape {shape} is larger than the {MAX_ELEMENTS} values one input may hold")
    return name, shape, datatype


ITEMSIZE = {name: dtype.itemsize for name, dtype in DATATYPES.items()}
_NUMPY = {
    name: torch.empty(0, dtype=dtype).numpy().dtype.newbyteorder("<")
    for name, dtype in DATATYPES.items()
    if name != "BF16"
}


def itemsize(datatype: str) -> int:
    """Bytes per value of ``datatype`` in the raw (binary) encoding."""
    return ITEMSIZE[datatype]


def from_raw(raw: bytes, datatype: str, shape: list[int]) -> torch.Tensor:
    """A tensor from its raw little-endian bytes (already checked to be ``prod(shape)`` values),
    copied: the request's buffer is not kept."""
    if datatype == "BF16":  # numpy has no bfloat16: its raw 16 bits, viewed
        return torch.from_numpy(np.frombuffer(raw, dtype=np.int16).copy()).view(torch.bfloat16).reshape(shape)
    return torch.from_numpy(np.frombuffer(raw, dtype=_NUMPY[datatype]).reshape(shape).copy())


def decode_tensor(spec: Any, binary: bytes, offset: int) -> tuple[str, torch.Tensor, int]:
    """One request input: (name, tensor, the binary offset after it)."""
    name, shape, datatype = tensor_header(spec)
    count = math.prod(shape)
    size = parameters(spec, f"input {name}").get("binary_data_size")
    if size is not None:
        width = itemsize(datatype)
        if not isinstance(size, int) or size != count * width:
            raise ProtocolError(f"input {name}: binary_data_size {size!r} is not {count} x {width} bytes")
        if offset + size > len(binary):
            raise ProtocolError(f"input {name}: the body ends before its {size} binary bytes")
        return name, from_raw(binary[offset : offset + size], datatype, shape), offset + size
    if "data" not in spec:
        raise ProtocolError(f"input {name}: no 'data' (and no binary_data_size)")
    return name, from_values(name, spec["data"], shape, datatype).reshape(shape), offset


_KINDS = {"BOOL": "b", "UINT8": "iu", "INT8": "iu", "INT16": "iu", "INT32": "iu", "INT64": "iu"}


def from_values(name: str, data: Any, shape: list[int], datatype: str) -> torch.Tensor:
    """JSON ``data`` (flat or nested, row-major; or a gRPC request's typed contents) as a tensor
    of ``datatype``, checked in one vectorised pass: every value of the datatype's kind, in its
    range, ``prod(shape)`` of them."""
    count = math.prod(shape)
    try:
        array = np.asarray(data if isinstance(data, list) else [data])
    except (ValueError, OverflowError):
        raise ProtocolError(f"input {name}: data is not a (nested) list of {datatype} values") from None
    if array.size != count:
        raise ProtocolError(f"input {name}: shape {shape} holds {count} values, data has {array.size}")
    if count == 0:
        return torch.empty(0, dtype=DATATYPES[datatype])
    allowed = _KINDS.get(datatype, "iuf")
    if array.dtype.kind == "O" and "f" in allowed:  # integers past 64 bits among floats: the floats they are
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            array = np.asarray(data if isinstance(data, list) else [data], dtype=np.float64)
    if array.dtype.kind not in allowed or (datatype != "BOOL" and array.dtype.kind == "b"):
        raise ProtocolError(f"input {name}: data holds values that are not {datatype}")
    dtype = DATATYPES[datatype]
    if datatype in _KINDS and datatype != "BOOL":
        info = torch.iinfo(dtype)
        if array.min() < info.min or array.max() > info.max:
            raise ProtocolError(f"input {name}: data holds values outside {datatype}")
    if datatype == "BF16":
        return torch.from_numpy(array.astype(np.float32)).to(dtype)
    return torch.from_numpy(array.astype(torch.empty(0, dtype=dtype).numpy().dtype))


def encode_outputs(outputs: dict[str, torch.Tensor], binary: set[str]) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Response outputs as protocol objects, and the raw bytes of those sent in binary, in order."""
    entries, chunks = [], []
    for name, tensor in outputs.items():
        t = tensor.detach().cpu().contiguous()
        entry: dict[str, Any] = {"name": name, "datatype": datatype_of(t.dtype), "shape": list(t.shape)}
        if name in binary:
            raw = raw_bytes(t)
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = t.float().reshape(-1).tolist() if t.dtype == torch.bfloat16 else t.reshape(-1).tolist()
        entries.append(entry)
    return entries, chunks


def raw_bytes(tensor: torch.Tensor) -> bytes:
    """A tensor's values as the protocol's raw little-endian bytes, row-major."""
    t = tensor.detach().cpu().contiguous()
    return t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
