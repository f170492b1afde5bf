"""``POST /v2/models/{name}/generate``: batched greedy generation whose answer for a prompt is
the tokens it gets alone, whatever the load; bad requests get 400 and one line."""

from __future__ import annotations

import concurrent.futures
import json

import pytest
import torch

pytest.importorskip("fastapi", reason="samebits serve needs its extra: pip install 'samebits[serve]'")
pytest.importorskip("transformers", reason="the generation tests build tiny transformers models from configs")

import real_models  # noqa: E402
import samebits  # noqa: E402
from samebits.serve.options import ServeOptions  # noqa: E402
from samebits.serve.server import build  # noqa: E402

N = 6


def prompts(count=16, seed=4):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randint(3, 512, (int(n),), generator=gen).tolist() for n in torch.randint(3, 20, (count,), generator=gen)
    ]


@pytest.fixture(scope="module")
def served():
    from fastapi.testclient import TestClient

    model, example = real_models.gpt2_twins()
    app, predictor, _ = build(model, example, ServeOptions(max_batch_size=8, max_wait_ms=5))
    with TestClient(app) as client:
        yield client, app.state.model_name, predictor
    predictor.close()


def ask(client, name, body):
    reply = client.post(f"/v2/models/{name}/generate", content=json.dumps(body))
    return reply.status_code, reply.json()


def test_concurrent_generate_requests_get_the_tokens_of_the_prompt_alone(served):
    client, name, predictor = served
    ps = prompts()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:  # 32 requests, bounded
        answers = list(
            pool.map(
                lambda i: ask(
                    client, name, {"input_ids": ps[i % 16], "parameters": {"max_new_tokens": N}, "id": str(i)}
                ),
                range(32),
            )
        )
    alone = [predictor.generate([torch.tensor(p)], N)[0].tokens.tolist() for p in ps]
    for i, (status, body) in enumerate(answers):
        assert status == 200, body
        assert body["output_ids"] == alone[i % 16] and body["id"] == str(i) and body["model_name"] == name
    # another length in the same load is batched apart and still answered alone's way
    status, body = ask(client, name, {"input_ids": ps[0], "parameters": {"max_new_tokens": 3}})
    assert status == 200 and body["output_ids"] == alone[0][:3]
    meta = client.get(f"/v2/models/{name}").json()
    assert meta["parameters"]["samebits"]["generate"] is True
    assert "generate" in client.get("/v2").json()["extensions"]


@pytest.mark.parametrize(
    "body, says",
    [
        ("not json", "not JSON"),
        ([1, 2], "JSON object"),
        ({"input_ids": [1, 2], "text_input": "hi"}, "unknown field(s) text_input"),
        ({"input_ids": []}, "non-empty list of integer"),
        ({"input_ids": [1, 2.5]}, "non-empty list of integer"),
        ({"input_ids": [1, True]}, "non-empty list of integer"),
        ({"input_ids": [1, 512]}, "outside this model's vocabulary [0, 512)"),
        ({"input_ids": [1], "parameters": {"max_new_tokens": 0}}, "max_new_tokens must be"),
        ({"input_ids": [1], "parameters": {"temperature": 0.7}}, "max_new_tokens only"),
        ({"input_ids": [1], "id": 5}, "'id' must be a string"),
        ({"input_ids": [1] * 40, "parameters": {"max_new_tokens": 4}}, "over this model's 64 positions"),
    ],
)
def test_bad_generate_requests_get_400_and_one_line(served, body, says):
    client, name, _ = served
    raw = body if isinstance(body, str) else json.dumps(body)
    reply = client.post(f"/v2/models/{name}/generate", content=raw)
    assert reply.status_code == 400 and says in reply.json()["error"] and "\n" not in reply.json()["error"]


def test_a_model_without_generate_serves_infer_only(tmp_path):
    from fastapi.testclient import TestClient

    app, predictor, _ = build("demo:mlp")
    try:
        with TestClient(app) as client:
            reply = client.post(f"/v2/models/{app.state.model_name}/generate", json={"input_ids": [1]})
            assert reply.status_code == 404 and "no transformers-style generate" in reply.json()["error"]
            assert (
                client.get(f"/v2/models/{app.state.model_name}").json()["parameters"]["samebits"]["generate"] is False
            )
    finally:
        predictor.close()
    assert isinstance(predictor, samebits.Predictor)


def test_the_endpoint_batches_through_the_invariant_path(served):
    # seed 1's prompts 8-15 in one batch: on the model's own sdpa attention, prompt 12's tokens
    # part from its alone run (found by a search over 30 prompt sets); the endpoint's batches must not
    from samebits.models.inputs import ModelInputs
    from samebits.serve.generate import generate_batcher

    _, _, predictor = served
    ps = [torch.tensor(p) for p in prompts(seed=1)][8:]
    run = generate_batcher(predictor, ServeOptions(max_batch_size=8)).predict
    batched = run(ModelInputs((ps,), {"max_new_tokens": N}))
    alone = [run(ModelInputs(([p],), {"max_new_tokens": N}))[0] for p in ps]
    assert all(torch.equal(b, a) for b, a in zip(batched, alone))


def test_threads_option_sets_the_model_threads_before_calibration():
    import serve_models

    before = torch.get_num_threads()
    model, example = serve_models.mlp()
    try:
        app, predictor, _ = build(model, example, ServeOptions(threads=1))
        assert torch.get_num_threads() == 1
        assert predictor.fingerprint["threads"]["intra_op"] == 1  # calibrated at that count
        predictor.close()
    finally:
        torch.set_num_threads(before)


def test_a_generate_that_raises_is_the_models_error_in_one_line(tmp_path):
    # a GPT-2 config whose eos id lies outside its vocabulary: its generate raises IndexError
    from fastapi.testclient import TestClient

    import check_models

    model, example = check_models.generate_raises()
    app, predictor, _ = build(model, example, ServeOptions(max_batch_size=4, max_wait_ms=1))
    try:
        with TestClient(app) as client:
            status, body = ask(client, app.state.model_name, {"input_ids": [5, 6, 7]})
    finally:
        predictor.close()
    assert status == 500 and "\n" not in body["error"]
    assert "the model's generate raised IndexError" in body["error"] and "internal error" not in body["error"]
