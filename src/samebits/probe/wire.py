"""What crosses the wire, client side: a tensor as its datatype, shape and raw little-endian bytes
(what probe answers are compared by), the Open Inference Protocol's request bodies (JSON and the
binary tensor extension) and the answers read back into raw bytes. numpy only, no torch: a JSON
float is read as a float64 and cast to the output's datatype, which gives back the value's exact
bits when the server wrote it as a round-trip repr (every v2 server does)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

HEADER_LENGTH = "Inference-Header-Content-Length"

NUMPY: dict[str, Any] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BF16": np.dtype("<u2"),  # numpy has no bfloat16: its 16 bits, the top half of a float32
}
TEXT = "BYTES"  # text and token strings (OpenAI answers; v2's BYTES tensors)


class WireError(ValueError):
    """An answer that is not what the protocol says (a protocol mismatch, a broken server)."""


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One input or output: name, datatype, shape and the exact bytes compared (for ``BYTES``:
    its strings as a JSON list)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    raw: bytes

    def values(self) -> np.ndarray:
        """The values as an array (``BF16`` widened to float32 exactly; ``BYTES`` as strings)."""
        if self.datatype == TEXT:
            return np.array(json.loads(self.raw), dtype=object).reshape(self.shape)
        array = np.frombuffer(self.raw, dtype=NUMPY[self.datatype])
        if self.datatype == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array.reshape(self.shape)

    def json_data(self) -> list[Any]:
        """The flat JSON ``data`` of this tensor in a v2 request."""
        values = self.values().reshape(-1)
        return [str(v) for v in values] if self.datatype == TEXT else values.tolist()


Answer = tuple[Tensor, ...]  # the outputs of one answer, as the server ordered them


def from_array(name: str, array: np.ndarray, datatype: str) -> Tensor:
    """A tensor of ``datatype`` holding ``array``'s values."""
    if datatype == "BF16":
        raw = (np.ascontiguousarray(array, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    else:
        raw = np.ascontiguousarray(array, dtype=NUMPY[datatype]).tobytes()
    return Tensor(name, datatype, tuple(int(d) for d in array.shape), raw)


def text(name: str, items: list[str]) -> Tensor:
    """Strings (a completion's text, its tokens) as a ``BYTES`` tensor."""
    return Tensor(name, TEXT, (len(items),), json.dumps(items, ensure_ascii=False).encode())


def datatype_of(dtype: Any) -> str:
    """The v2 datatype of a numpy dtype (or of a torch dtype's name: ``torch.float32``)."""
    name = str(dtype).replace("torch.", "")
    table = {
        "bool": "BOOL",
        "uint8": "UINT8",
        "int8": "INT8",
        "int16": "INT16",
        "int32": "INT32",
        "int64": "INT64",
        "float16": "FP16",
        "bfloat16": "BF16",
        "float32": "FP32",
        "float64": "FP64",
    }
    if name not in table:
        raise WireError(f"a {name} tensor has no datatype in the inference protocol")
    return table[name]


def request(inputs: tuple[Tensor, ...], binary: bool, request_id: str | None = None) -> tuple[bytes, dict[str, str]]:
    """A v2 infer request's body and headers: JSON ``data``, or (``binary``) the binary tensor
    extension both ways (raw inputs after the JSON head, raw outputs asked for)."""
    head: dict[str, Any] = {"id": request_id} if request_id else {}
    specs = []
    for t in inputs:
        spec: dict[str, Any] = {"name": t.name, "shape": list(t.shape), "datatype": t.datatype}
        if binary and t.datatype != TEXT:
            spec["parameters"] = {"binary_data_size": len(t.raw)}
        else:
            spec["data"] = t.json_data()
        specs.append(spec)
    head["inputs"] = specs
    if not binary:
        return json.dumps(head).encode(), {"Content-Type": "application/json"}
    head["parameters"] = {"binary_data_output": True}
    text_head = json.dumps(head).encode()
    raw = b"".join(t.raw for t in inputs if t.datatype != TEXT)
    return text_head + raw, {"Content-Type": "application/octet-stream", HEADER_LENGTH: str(len(text_head))}


def answer(body: bytes, header_length: str | None) -> Answer:
    """The outputs of a v2 infer answer (JSON, or the binary extension's head and raw parts)."""
    if header_length is not None:
        try:
            n = int(header_length)
        except ValueError:
            raise WireError(f"{HEADER_LENGTH} is {header_length!r}, not an integer") from None
        head, binary = body[:n], body[n:]
    else:
        head, binary = body, b""
    try:
        data = json.loads(head)
    except ValueError:
        raise WireError(f"the answer is not JSON: {_shown(head)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("outputs"), list):
        raise WireError(f"the answer has no 'outputs' list: {_shown(head)}")
    outputs, offset = [], 0
    for spec in data["outputs"]:
        tensor, offset = _output(spec, binary, offset)
        outputs.append(tensor)
    return tuple(outputs)


def _output(spec: Any, binary: bytes, offset: int) -> tuple[Tensor, int]:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise WireError("an output is not an object with a name")
    name, datatype, shape = spec["name"], spec.get("datatype"), spec.get("shape")
    if datatype not in NUMPY and datatype != TEXT:
        raise WireError(f"output {name}: datatype {datatype!r} is not one of the protocol's")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise WireError(f"output {name}: 'shape' is not a list of sizes")
    count = int(np.prod(shape, dtype=np.int64))
    size = (spec.get("parameters") or {}).get("binary_data_size")
    if size is not None:
        if datatype == TEXT or size != count * NUMPY[datatype].itemsize or offset + size > len(binary):
            raise WireError(f"output {name}: binary_data_size {size!r} does not match its shape or the body")
        return Tensor(name, datatype, tuple(shape), binary[offset : offset + size]), offset + size
    if "data" not in spec:
        raise WireError(f"output {name} has neither 'data' nor binary_data_size")
    if datatype == TEXT:
        items = [str(v) for v in np.asarray(spec["data"], dtype=object).reshape(-1)]
        return Tensor(name, TEXT, tuple(shape), json.dumps(items, ensure_ascii=False).encode()), offset
    try:
        wide = np.asarray(spec["data"], dtype=np.float64 if datatype in ("FP16", "BF16", "FP32", "FP64") else None)
        values = wide.reshape(-1)
    except (ValueError, TypeError):
        raise WireError(f"output {name}: 'data' is not a list of {datatype} values") from None
    if values.size != count:
        raise WireError(f"output {name}: shape {shape} holds {count} values, 'data' has {values.size}")
    return from_array(name, values.reshape(shape), datatype), offset


def _shown(data: bytes, limit: int = 80) -> str:
    text_ = data[:limit].decode("utf-8", errors="replace").replace("\n", " ")
    return repr(text_ + ("..." if len(data) > limit else ""))
