"""`samebits serve --grpc-port`: the Open Inference Protocol's gRPC service beside REST, on the
same batcher, spoken to by `tritonclient.grpc` (a client nobody here wrote). Every answer must
have the bits of the Predictor's `predict_one` on that sample, and of the REST answer."""

from __future__ import annotations

import concurrent.futures
import re
import signal
import time

import pytest
import torch

pytest.importorskip("fastapi", reason="samebits serve needs its extra: pip install 'samebits[serve]'")
pytest.importorskip("grpc", reason="samebits serve --grpc-port needs its extra: pip install 'samebits[serve]'")
tgrpc = pytest.importorskip("tritonclient.grpc", reason="the gRPC tests use tritonclient[grpc]")

from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from samebits.serve.grpc_service import MESSAGE_CLASSES, decode_request  # noqa: E402
from samebits.serve.protocol import ProtocolError  # noqa: E402
from samebits.serve.signature import Signature, TensorSpec  # noqa: E402

from test_serve import MODELS, Server, as_tensor, row  # noqa: E402

CALLS = 32  # every call loop is bounded in count and in time
TIMEOUT_S = 60  # each call's deadline


def grpc_address(server: Server) -> str:
    found = re.search(r"gRPC on (\S+)$", server.lines[-1].strip())
    assert found, f"no gRPC address announced: {server.lines[-1]!r}"
    return found.group(1)


def client(server: Server) -> tgrpc.InferenceServerClient:
    return tgrpc.InferenceServerClient(grpc_address(server))


def infer(server: Server, x: torch.Tensor, model: str | None = None, datatype: str = "FP32") -> torch.Tensor:
    """One ModelInfer through tritonclient.grpc (raw_input_contents), its output_0 as a tensor."""
    with client(server) as c:
        given = tgrpc.InferInput("x", list(x.shape), datatype)
        given.set_data_from_numpy(x.numpy())
        result = c.infer(model or server.name, [given], client_timeout=TIMEOUT_S)
    return torch.from_numpy(result.as_numpy("output_0").copy())


def failure(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value


@pytest.fixture(scope="module")
def mlp():
    server = Server(f"{MODELS}:mlp", "--max-batch-size", "16", "--grpc-port", "0")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def moody():
    server = Server(
        f"{MODELS}:moody",
        *("--max-batch-size", "4", "--max-queue", "6", "--timeout-s", "0.3", "--max-body-mb", "0.01"),
        *("--grpc-port", "0"),
    )
    yield server
    assert server.stop() == 0


def stub(server: Server):
    """tritonclient's own generated stub, for what its high-level client does not send."""
    import grpc

    channel = grpc.insecure_channel(grpc_address(server))
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def test_the_descriptor_has_the_protocols_names_and_numbers():
    """Wire compatibility: every message served here is field for field tritonclient's."""

    def fields(d, prefix=""):
        out = {}
        for f in d.fields:
            kind = f.message_type.full_name if f.message_type else f.type
            oneof = f.containing_oneof.name if f.containing_oneof else None
            out[f"{prefix}{d.name}.{f.name}"] = (
                f.number,
                kind,
                f.is_repeated if hasattr(f, "is_repeated") else f.label,
                oneof,
            )
        for nested in d.nested_types:
            out.update(fields(nested, f"{prefix}{d.name}."))
        return out

    assert len(MESSAGE_CLASSES) == 14
    for name, cls in MESSAGE_CLASSES.items():
        assert fields(cls.DESCRIPTOR) == fields(service_pb2.DESCRIPTOR.message_types_by_name[name]), name
        assert cls.DESCRIPTOR.full_name == f"inference.{name}"


def test_tritonclient_grpc_answers_equal_rest_bit_for_bit(mlp, reference):
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))
    over_grpc = infer(mlp, x)
    status, answer = mlp.infer(x)
    assert status == 200
    assert over_grpc.dtype == torch.float32 and over_grpc.shape == (5, 10)
    assert torch.equal(over_grpc, as_tensor(answer))
    assert all(torch.equal(over_grpc[i], reference.predict_one(x[i])) for i in range(5))


def test_typed_contents_are_read_and_the_id_echoed(mlp, reference):
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(4))
    request = service_pb2.ModelInferRequest(model_name=mlp.name, id="typed-1")
    given = request.inputs.add(name="x", datatype="FP32", shape=[3, 32])
    given.contents.fp32_contents.extend(x.reshape(-1).tolist())
    channel, rpc = stub(mlp)
    with channel:
        response = rpc.ModelInfer(request, timeout=TIMEOUT_S)
    assert response.id == "typed-1" and response.model_name == mlp.name and response.model_version == "1"
    (out,) = response.outputs
    assert (out.name, out.datatype, list(out.shape)) == ("output_0", "FP32", [3, 10])
    got = torch.frombuffer(bytearray(response.raw_output_contents[0]), dtype=torch.float32).reshape(3, 10)
    assert all(torch.equal(got[i], reference.predict_one(x[i])) for i in range(3))


def test_concurrent_grpc_calls_have_the_bits_of_the_sample_alone(mlp, reference):
    gen = torch.Generator().manual_seed(1)
    requests = [torch.randn(1 + i % 3, 32, generator=gen) for i in range(CALLS)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda x: infer(mlp, x), requests, timeout=120))
    for x, got in zip(requests, answers):
        assert got.shape == (x.shape[0], 10)
        for i in range(x.shape[0]):
            assert torch.equal(got[i], reference.predict_one(x[i])), "an answer depends on its batch"


def test_health_and_metadata_say_what_rest_says(mlp):
    import json

    with client(mlp) as c:
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready(mlp.name)
        assert c.is_model_ready(mlp.name, "1")
        meta = c.get_model_metadata(mlp.name, as_json=True)
        server = c.get_server_metadata(as_json=True)
    rest = json.loads(mlp.request(f"/v2/models/{mlp.name}")[2])
    assert meta["name"] == rest["name"] == mlp.name and meta["versions"] == ["1"] and meta["platform"] == "pytorch"
    as_ints = lambda tensors: [{**t, "shape": [int(d) for d in t["shape"]]} for t in tensors]  # JSON int64 are text
    assert as_ints(meta["inputs"]) == rest["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 32]}]
    assert as_ints(meta["outputs"]) == rest["outputs"] == [{"name": "output_0", "datatype": "FP32", "shape": [-1, 10]}]
    assert server["name"] == "samebits" and server["extensions"] == json.loads(mlp.request("/v2")[2])["extensions"]


def test_errors_have_the_status_rest_would_and_one_line(mlp):
    x = torch.zeros(2, 32)
    with client(mlp) as c:
        cases = [
            (lambda: infer(mlp, x, model="other"), "StatusCode.NOT_FOUND", "unknown model 'other'"),
            (lambda: c.is_model_ready("other"), "StatusCode.NOT_FOUND", "unknown model"),
            (lambda: c.get_model_metadata(mlp.name, "2"), "StatusCode.NOT_FOUND", "unknown version '2'"),
            (lambda: infer(mlp, torch.zeros(2, 31)), "StatusCode.INVALID_ARGUMENT", "shape [-1, 32]"),
            (lambda: infer(mlp, x.double(), datatype="FP64"), "StatusCode.INVALID_ARGUMENT", "must be FP32"),
            (lambda: c.get_model_config(mlp.name), "StatusCode.UNIMPLEMENTED", ""),
        ]
        for call, code, says in cases:
            error = failure(call)
            assert error.status() == code and says in error.message() and "\n" not in error.message()
    assert infer(mlp, x).shape == (2, 10)  # the server is still up


def both(r):
    r.inputs[0].contents.fp32_contents.extend([0.0] * 32)
    r.raw_input_contents.append(b"\0" * 4 * 32)


@pytest.mark.parametrize(
    ("fill", "says"),
    [
        (both, "in contents and in raw_input_contents"),
        (lambda r: r.inputs[0].contents.int_contents.extend([0] * 32), "go in contents.fp32_contents"),
        (lambda r: r.inputs[0].contents.fp32_contents.extend([0.0] * 31), "holds 32 values"),
        (lambda r: r.raw_input_contents.extend([b"\0" * 128, b""]), "2 entries for 1 inputs"),
        (lambda r: r.raw_input_contents.append(b"\0" * 124), "has 124 bytes; shape [1, 32] of FP32 takes 128"),
        (lambda r: r.outputs.add(name="nope"), "unknown output(s) nope"),
    ],
)
def test_malformed_requests_are_invalid_argument(mlp, fill, says):
    import grpc

    request = service_pb2.ModelInferRequest(model_name=mlp.name)
    request.inputs.add(name="x", datatype="FP32", shape=[1, 32])
    fill(request)
    if not request.raw_input_contents and not request.inputs[0].contents.ListFields():
        request.inputs[0].contents.fp32_contents.extend([0.0] * 32)
    channel, rpc = stub(mlp)
    with channel, pytest.raises(grpc.RpcError) as caught:
        rpc.ModelInfer(request, timeout=TIMEOUT_S)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert says in caught.value.details() and "\n" not in caught.value.details()


def test_overload_failures_and_the_size_limit_map_to_grpc_codes(moody):
    error = failure(lambda: infer(moody, row(13.0)))
    assert error.status() == "StatusCode.INTERNAL" and "row marked to fail" in error.message()
    assert "\n" not in error.message() and "Traceback" not in error.message()
    big = failure(lambda: infer(moody, torch.zeros(400, 8)))  # 12.8 kB over --max-body-mb 0.01
    assert big.status() == "StatusCode.RESOURCE_EXHAUSTED"
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        first = pool.submit(infer, moody, row(7.0))  # keeps the worker busy for 0.5 s
        time.sleep(0.1)
        rest = [pool.submit(failure, lambda: infer(moody, row(0.5))) for _ in range(10)]
        codes = [f.result(timeout=60).status() for f in rest]
        assert first.result(timeout=60).shape == (1, 4)
    assert "StatusCode.RESOURCE_EXHAUSTED" in codes  # more rows than --max-queue 6
    assert "StatusCode.DEADLINE_EXCEEDED" in codes  # queued behind 0.5 s of work with --timeout-s 0.3
    assert set(codes) <= {"StatusCode.RESOURCE_EXHAUSTED", "StatusCode.DEADLINE_EXCEEDED"}
    assert infer(moody, row(0.5)).shape == (1, 4)


def test_sigterm_answers_grpc_calls_in_flight_and_exits_0():
    server = Server(f"{MODELS}:moody", "--max-batch-size", "4", "--grpc-port", "0")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [pool.submit(infer, server, row(7.0)) for _ in range(3)]  # 0.5 s per forward
        time.sleep(0.2)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        late = failure(lambda: infer(server, row(0.5)))  # draining, or stopped: refused either way
        answers = [f.result(timeout=60) for f in slow]
    assert all(a.shape == (1, 4) for a in answers)
    assert late.status() == "StatusCode.UNAVAILABLE"
    assert server.proc.wait(timeout=60) == 0


def test_golden_readiness_is_the_same_over_grpc(tmp_path):
    from conftest import run_cli

    golden = tmp_path / "mlp.safetensors"
    recorded = run_cli("record", f"{MODELS}:mlp", "-o", str(golden), "--runtime", "predictor")
    assert recorded.returncode == 0, recorded.stderr
    other = Server(f"{MODELS}:mlp_retrained", "--golden", str(golden), "--name", "mlp", "--grpc-port", "0")
    try:
        with client(other) as c:
            assert c.is_server_live() and not c.is_server_ready() and not c.is_model_ready("mlp")
        assert other.request("/v2/health/ready")[0] == 503
        assert infer(other, torch.zeros(1, 32)).shape == (1, 10)  # not ready, but it answers, to inspect
    finally:
        assert other.stop() == 0


def test_an_isolated_worker_that_hangs_is_replaced_and_grpc_readiness_follows():
    server = Server(
        f"{MODELS}:stuck", "--isolate", "--max-batch-size", "4", "--forward-timeout-s", "0.3", "--grpc-port", "0"
    )
    try:
        before = infer(server, row(0.5))
        assert torch.equal(before, as_tensor(server.infer(row(0.5))[1], "output_0"))  # REST's bits
        stuck = failure(lambda: infer(server, row(7.0)))  # never returns in the worker: killed
        assert stuck.status() == "StatusCode.UNAVAILABLE" and "--forward-timeout-s" in stuck.message()
        with client(server) as c:
            assert not c.is_server_ready() and not c.is_model_ready(server.name)  # restarting
            deadline = time.monotonic() + 60
            while not c.is_server_ready() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert c.is_server_ready() and c.is_model_ready(server.name)
        assert torch.equal(infer(server, row(0.5)), before)  # the new worker has the first one's plan
    finally:
        assert server.stop() == 0


def signature(dtype: torch.dtype) -> Signature:
    return Signature([TensorSpec("x", dtype, (3,))], 1, [TensorSpec("y", torch.float32, (1,))], {"y": ""})


@pytest.mark.parametrize(
    ("datatype", "dtype", "field", "values"),
    [
        ("BOOL", torch.bool, "bool_contents", [True, False, True]),
        ("UINT8", torch.uint8, "uint_contents", [0, 7, 255]),
        ("INT8", torch.int8, "int_contents", [-128, 0, 127]),
        ("INT16", torch.int16, "int_contents", [-300, 0, 300]),
        ("INT32", torch.int32, "int_contents", [-(2**31), 0, 2**31 - 1]),
        ("INT64", torch.int64, "int64_contents", [-(2**63), 0, 2**63 - 1]),
        ("FP32", torch.float32, "fp32_contents", [0.1, -2.5, 3.0e38]),
        ("FP64", torch.float64, "fp64_contents", [0.1, -2.5, 1e300]),
    ],
)
def test_typed_contents_and_raw_bytes_decode_to_the_same_tensor(datatype, dtype, field, values):
    expected = torch.tensor([values], dtype=dtype)
    typed = MESSAGE_CLASSES["ModelInferRequest"]()
    getattr(typed.inputs.add(name="x", datatype=datatype, shape=[1, 3]).contents, field).extend(values)
    raw = MESSAGE_CLASSES["ModelInferRequest"]()
    raw.inputs.add(name="x", datatype=datatype, shape=[1, 3])
    raw.raw_input_contents.append(expected.numpy().tobytes())
    for request in (typed, raw):
        tensors, length, names = decode_request(request, signature(dtype))
        assert torch.equal(tensors["x"], expected) and tensors["x"].dtype == dtype and names == ["y"]


@pytest.mark.parametrize(
    ("datatype", "field", "values", "says"),
    [
        ("INT8", "int_contents", [0, 300, 0], "outside INT8"),
        ("FP16", "fp32_contents", [0.0, 0.0, 0.0], "only in raw_input_contents"),
        ("FP32", "int_contents", [0, 0, 0], "go in contents.fp32_contents"),
        ("BF16", None, [], "only in raw_input_contents"),
    ],
)
def test_typed_contents_are_checked(datatype, field, values, says):
    request = MESSAGE_CLASSES["ModelInferRequest"]()
    given = request.inputs.add(name="x", datatype=datatype, shape=[1, 3])
    if field:
        getattr(given.contents, field).extend(values)
    with pytest.raises(ProtocolError, match=re.escape(says)):
        decode_request(request, signature(torch.int8 if datatype == "INT8" else torch.float32))


def test_padded_variable_length_inputs_over_grpc_equal_rest():
    """`--pad` beside `--grpc-port`: requests of mixed lengths at once, over gRPC, are padded to
    their bucket, batched per bucket, cut back, and carry the bits of the same request over REST."""
    pytest.importorskip("transformers", reason="the padded-input test serves a tiny BERT (extra 'real')")
    import json

    from test_serve import HERE

    pads = ("--pad", "input_ids:1", "--pad", "attention_mask:1", "--pad-lengths", "8,16")
    server = Server(f"{HERE / 'real_models.py'}:bert", "--max-batch-size", "8", *pads, "--grpc-port", "0")

    def over_grpc(ids: list[int]) -> dict[str, torch.Tensor]:
        x = torch.tensor([ids])
        given = [tgrpc.InferInput(n, [1, len(ids)], "INT64") for n in ("input_ids", "attention_mask")]
        given[0].set_data_from_numpy(x.numpy())
        given[1].set_data_from_numpy(torch.ones_like(x).numpy())
        with client(server) as c:
            result = c.infer(server.name, given, client_timeout=TIMEOUT_S)
        names = ("last_hidden_state", "pooler_output")
        return {n: torch.from_numpy(result.as_numpy(n).copy()) for n in names}

    def over_rest(ids: list[int]) -> dict[str, torch.Tensor]:
        inputs = [
            {"name": n, "shape": [1, len(ids)], "datatype": "INT64", "data": d}
            for n, d in (("input_ids", ids), ("attention_mask", [1] * len(ids)))
        ]
        status, _, raw = server.request(
            f"/v2/models/{server.name}/infer",
            json.dumps({"inputs": inputs}).encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 200, raw
        return {
            o["name"]: torch.tensor(o["data"], dtype=torch.float32).reshape(o["shape"])
            for o in json.loads(raw)["outputs"]
        }

    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(1, 512, (n,), generator=gen).tolist() for n in (5, 8, 11, 16, 3, 9) * 2]
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(over_grpc, prompts, timeout=120))
        for ids, got in zip(prompts, answers):
            assert got["last_hidden_state"].shape == (1, len(ids), 64)  # cut back from its bucket
            rest = over_rest(ids)
            assert all(torch.equal(got[n], rest[n]) for n in rest), "gRPC and REST differ on a padded request"
        error = failure(lambda: over_grpc(list(range(1, 18))))
        assert "INVALID_ARGUMENT" in str(error.status()) and "outside 1..16" in error.message()
    finally:
        assert server.stop() == 0
