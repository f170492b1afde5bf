"""The Open Inference Protocol over gRPC: ``inference.GRPCInferenceService``, the service Triton
and KServe expose, so ``tritonclient.grpc`` works. It runs beside the REST app (``--grpc-port``),
in the same process and event loop, over the same :class:`~samebits.serve.batcher.Batcher`: one
queue, one calibrated Predictor, the same readiness, metadata and request checks.

The messages are built at import from a descriptor written here (the protocol's package,
message and field names and numbers; no generated code, no protoc), in a pool of their own, so
another copy of the protocol in the same process (tritonclient's) does not collide with it.
Served: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata and ModelInfer (inputs
as typed ``contents`` or ``raw_input_contents``; outputs always as ``raw_output_contents``);
every other RPC of the service is UNIMPLEMENTED."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

# samebits starts its children (the --isolate worker) with fork and exec: gRPC's fork handlers
# have nothing to do, and with calls in flight they only log that they skip themselves. gRPC reads
# this when it is first imported (samebits serve sets it before then too).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc
import torch
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from samebits.errors import UserError
from samebits.serve.service import ModelService, checked, known_outputs, parsed_off_loop, service_error
from samebits.serve.options import ServeOptions
from samebits.serve.protocol import (
    ProtocolError,
    datatype_of,
    from_raw,
    from_values,
    itemsize,
    raw_bytes,
    tensor_header,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from samebits.serve.signature import Signature

SERVICE = "inference.GRPCInferenceService"
STOP_GRACE_S = 5.0  # after the batcher drained: the answers already computed are sent within this

# The protocol's messages, as its specification names and numbers them. A field is (name, number,
# kind): a scalar type, "repeated T", "map<string, T>" or "oneof NAME T"; a message type is named
# without the package; "A.B" is B nested in A (listed after A).
_MAP = "map<string, InferParameter>"
MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    "ServerLiveRequest": [],
    "ServerLiveResponse": [("live", 1, "bool")],
    "ServerReadyRequest": [],
    "ServerReadyResponse": [("ready", 1, "bool")],
    "ModelReadyRequest": [("name", 1, "string"), ("version", 2, "string")],
    "ModelReadyResponse": [("ready", 1, "bool")],
    "ServerMetadataRequest": [],
    "ServerMetadataResponse": [("name", 1, "string"), ("version", 2, "string"), ("extensions", 3, "repeated string")],
    "ModelMetadataRequest": [("name", 1, "string"), ("version", 2, "string")],
    "ModelMetadataResponse": [
        ("name", 1, "string"),
        ("versions", 2, "repeated string"),
        ("platform", 3, "string"),
        ("inputs", 4, "repeated ModelMetadataResponse.TensorMetadata"),
        ("outputs", 5, "repeated ModelMetadataResponse.TensorMetadata"),
    ],
    "ModelMetadataResponse.TensorMetadata": [
        ("name", 1, "string"),
        ("datatype", 2, "string"),
        ("shape", 3, "repeated int64"),
    ],
    "InferParameter": [
        ("bool_param", 1, "oneof parameter_choice bool"),
        ("int64_param", 2, "oneof parameter_choice int64"),
        ("string_param", 3, "oneof parameter_choice string"),
        ("double_param", 4, "oneof parameter_choice double"),
        ("uint64_param", 5, "oneof parameter_choice uint64"),
    ],
    "InferTensorContents": [
        ("bool_contents", 1, "repeated bool"),
        ("int_contents", 2, "repeated int32"),
        ("int64_contents", 3, "repeated int64"),
        ("uint_contents", 4, "repeated uint32"),
        ("uint64_contents", 5, "repeated uint64"),
        ("fp32_contents", 6, "repeated float"),
        ("fp64_contents", 7, "repeated double"),
        ("bytes_contents", 8, "repeated bytes"),
    ],
    "ModelInferRequest": [
        ("model_name", 1, "string"),
        ("model_version", 2, "string"),
        ("id", 3, "string"),
        ("parameters", 4, _MAP),
        ("inputs", 5, "repeated ModelInferRequest.InferInputTensor"),
        ("outputs", 6, "repeated ModelInferRequest.InferRequestedOutputTensor"),
        ("raw_input_contents", 7, "repeated bytes"),
    ],
    "ModelInferRequest.InferInputTensor": [
        ("name", 1, "string"),
        ("datatype", 2, "string"),
        ("shape", 3, "repeated int64"),
        ("parameters", 4, _MAP),
        ("contents", 5, "InferTensorContents"),
    ],
    "ModelInferRequest.InferRequestedOutputTensor": [("name", 1, "string"), ("parameters", 2, _MAP)],
    "ModelInferResponse": [
        ("model_name", 1, "string"),
        ("model_version", 2, "string"),
        ("id", 3, "string"),
        ("parameters", 4, _MAP),
        ("outputs", 5, "repeated ModelInferResponse.InferOutputTensor"),
        ("raw_output_contents", 6, "repeated bytes"),
    ],
    "ModelInferResponse.InferOutputTensor": [
        ("name", 1, "string"),
        ("datatype", 2, "string"),
        ("shape", 3, "repeated int64"),
        ("parameters", 4, _MAP),
        ("contents", 5, "InferTensorContents"),
    ],
}
SERVED = ("ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer")

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "float": _F.TYPE_FLOAT,
    "double": _F.TYPE_DOUBLE,
}


def _set_type(field: Any, type_name: str) -> None:
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    else:
        field.type, field.type_name = _F.TYPE_MESSAGE, f".inference.{type_name}"


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The protocol's messages and service (those served here) as a proto3 file descriptor."""
    file = descriptor_pb2.FileDescriptorProto(name="samebits/serve/inference.proto", package="inference")
    file.syntax = "proto3"
    protos: dict[str, Any] = {}
    for full, fields in MESSAGES.items():
        parent, _, short = full.rpartition(".")
        proto = (protos[parent].nested_type if parent else file.message_type).add(name=short)
        protos[full] = proto
        for name, number, kind in fields:
            field = proto.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
            words = kind.split()
            if kind.startswith("map<"):  # a map is a repeated entry message nested in its message
                entry = proto.nested_type.add(name="".join(w.capitalize() for w in name.split("_")) + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
                _set_type(entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL), kind[12:-1].strip())
                field.label, field.type, field.type_name = (
                    _F.LABEL_REPEATED,
                    _F.TYPE_MESSAGE,
                    f".inference.{full}.{entry.name}",
                )
            elif words[0] == "repeated":
                field.label = _F.LABEL_REPEATED
                _set_type(field, words[1])
            elif words[0] == "oneof":
                names = [o.name for o in proto.oneof_decl]
                if words[1] not in names:
                    proto.oneof_decl.add(name=words[1])
                    names.append(words[1])
                field.oneof_index = names.index(words[1])
                _set_type(field, words[2])
            else:
                _set_type(field, kind)
    service = file.service.add(name=SERVICE.split(".")[1])
    for rpc in SERVED:
        service.method.add(name=rpc, input_type=f".inference.{rpc}Request", output_type=f".inference.{rpc}Response")
    return file


def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()  # not the default pool: tritonclient's copy may be there
    pool.AddSerializedFile(file_descriptor().SerializeToString())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"inference.{name}"))
        for name in MESSAGES
        if "." not in name
    }


MESSAGE_CLASSES = _classes()

# The typed contents field that carries each datatype (FP16 and BF16 travel only as raw bytes).
CONTENTS = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
}


def failure(exc: BaseException) -> tuple[Any, str]:
    """``exc`` as the gRPC status REST's HTTP status stands for (:func:`service_error`'s one
    table): (code, one line)."""
    failed = service_error(exc)
    return getattr(grpc.StatusCode, failed.grpc_code), str(failed)


def decode_request(request: Any, signature: Signature) -> tuple[dict[str, torch.Tensor], int, list[str]]:
    """A ModelInferRequest's tensors checked as REST checks them (and padded to their bucket),
    the length before padding, and the outputs to answer with. Problems: :class:`ProtocolError`."""
    raw = list(request.raw_input_contents)
    if not request.inputs:
        raise ProtocolError("'inputs' must be a non-empty list")
    if raw and len(raw) != len(request.inputs):
        raise ProtocolError(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs: one per input, in order"
        )
    tensors: dict[str, torch.Tensor] = {}
    for i, given in enumerate(request.inputs):
        name, shape, datatype = tensor_header(
            {"name": given.name, "shape": list(given.shape), "datatype": given.datatype}
        )
        if name in tensors:
            raise ProtocolError(f"input {name} is given twice")
        if "shared_memory_region" in given.parameters:
            raise ProtocolError(f"input {name}: shared memory is not served; send the tensor in raw_input_contents")
        typed = [f.name for f, _ in given.contents.ListFields()]
        if raw:
            if typed:
                raise ProtocolError(f"input {name}: values in contents and in raw_input_contents; send one of them")
            size = math.prod(shape) * itemsize(datatype)
            if len(raw[i]) != size:
                raise ProtocolError(
                    f"input {name}: raw_input_contents[{i}] has {len(raw[i])} bytes; shape {shape} of {datatype} takes {size}"
                )
            tensors[name] = from_raw(raw[i], datatype, shape)
            continue
        field = CONTENTS.get(datatype)
        if field is None:
            raise ProtocolError(f"input {name}: {datatype} values travel only in raw_input_contents")
        other = [f for f in typed if f != field]
        if other:
            raise ProtocolError(f"input {name}: {datatype} values go in contents.{field}, not {', '.join(other)}")
        values = list(getattr(given.contents, field))
        tensors[name] = from_values(name, values, shape, datatype).reshape(shape)
    tensors, length = checked(tensors, signature)
    if request.outputs:
        names = known_outputs([o.name for o in request.outputs], signature)
    else:
        names = [s.name for s in signature.outputs]
    return tensors, length, names


class InferenceService:
    """The RPCs over one :class:`~samebits.serve.service.ModelService`: its readiness, metadata,
    metrics and infer pipeline, as REST answers from them."""

    def __init__(self, service: ModelService) -> None:
        self.service = service
        self.messages = MESSAGE_CLASSES

    async def ServerLive(self, request: Any, context: Any) -> Any:
        return self.messages["ServerLiveResponse"](live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        return self.messages["ServerReadyResponse"](ready=self.service.ready())

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        return self.messages["ServerMetadataResponse"](**self.service.server_metadata)

    async def ModelReady(self, request: Any, context: Any) -> Any:
        return await self._answer(context, self._model_ready(request))

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        return await self._answer(context, self._model_metadata(request))

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        return await self._answer(context, self._infer(request), counted=True)

    async def _model_ready(self, request: Any) -> Any:
        self.service.known(request.name, request.version)
        return self.messages["ModelReadyResponse"](ready=self.service.ready())

    async def _model_metadata(self, request: Any) -> Any:
        self.service.known(request.name, request.version)
        meta = self.service.model_metadata
        return self.messages["ModelMetadataResponse"](
            name=meta["name"],
            versions=meta["versions"],
            platform=meta["platform"],
            inputs=meta["inputs"],
            outputs=meta["outputs"],
        )

    async def _answer(self, context: Any, call: Coroutine[Any, Any, Any], counted: bool = False) -> Any:
        """The response, or the call ended with the failure's code and one line (no traceback);
        an infer counted with REST's requests, by the HTTP status REST gives the same answer."""
        try:
            with self.service.counted() if counted else contextlib.nullcontext():
                return await call
        except Exception as exc:
            code, line = failure(exc)
        await context.abort(code, line)  # raises

    async def _infer(self, request: Any) -> Any:
        self.service.known(request.model_name, request.model_version)
        signature = self.service.signature
        tensors, length, names = await parsed_off_loop(decode_request, request.ByteSize(), request, signature)
        named = await self.service.infer(tensors, length)
        response = self.messages["ModelInferResponse"](model_name=self.service.name, model_version="1", id=request.id)
        for name in names:
            t = named[name].detach().cpu().contiguous()
            response.outputs.add(name=name, datatype=datatype_of(t.dtype), shape=list(t.shape))
            response.raw_output_contents.append(raw_bytes(t))
        return response


def _parsed(method: Any, message: Any) -> Any:
    """``method`` over the request's bytes, parsed here: bytes that are no ``message`` end the call
    with INVALID_ARGUMENT and one line (grpc's own deserializer answered UNKNOWN with a Python
    class name)."""

    async def call(raw: bytes, context: Any) -> Any:
        try:
            request = message.FromString(raw)
        except Exception:  # protobuf's DecodeError, and whatever else its parser raises on bytes
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the request is not a {message.DESCRIPTOR.name} message: it does not parse",
            )
        return await method(request, context)

    return call


def handler(app: FastAPI) -> Any:
    """The service's generic RPC handler over ``app``'s model service."""
    service = InferenceService(app.state.service)
    methods = {
        rpc: grpc.unary_unary_rpc_method_handler(
            _parsed(getattr(service, rpc), MESSAGE_CLASSES[f"{rpc}Request"]),
            request_deserializer=None,  # bytes as they came: parsed in _parsed
            response_serializer=MESSAGE_CLASSES[f"{rpc}Response"].SerializeToString,
        )
        for rpc in SERVED
    }
    return grpc.method_handlers_generic_handler(SERVICE, methods)


def create_server(app: FastAPI, options: ServeOptions) -> tuple[Any, int]:
    """A ``grpc.aio`` server of the service, bound to ``options.host:options.grpc_port`` and not
    yet started: (server, bound port). Call it in the event loop that will run it. Messages over
    ``--max-body-mb`` are refused by gRPC itself (RESOURCE_EXHAUSTED)."""
    from grpc import aio

    limit = max(0, min(int(options.max_body_mb * 1024 * 1024), 2**31 - 1))
    server = aio.server(
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", -1),
            ("grpc.so_reuseport", 0),  # a port in use is an error, not a port shared with another server
        ]
    )
    server.add_generic_rpc_handlers((handler(app),))
    host = f"[{options.host}]" if ":" in options.host else options.host
    where = f"{host}:{options.grpc_port}"
    try:
        port = server.add_insecure_port(where)
    except RuntimeError:  # "Failed to bind to address ..."
        port = 0
    if not port:  # older gRPC answers 0 instead of raising
        raise UserError(f"cannot serve gRPC on {where} (is the port in use?)")
    return server, int(port)
