"""The one child protocol: messages (a JSON header and safetensors) on a byte stream, typed jobs
and replies, and the one entry ``python -m samebits.child TASK`` that answers them."""

from __future__ import annotations

import io
import struct
import textwrap

import pytest
import torch

from samebits.measure.job import ENTRY, Job, Reply
from samebits.measure.processes import ChildJob, ChildRunner
from samebits.measure.spawn import Child, ChildDied
from samebits.measure.wire import HEADER_LIMIT, Message, read_message, write_message
from samebits.models.inputs import ModelInputs


def test_a_message_comes_back_as_it_was_sent_and_two_follow_each_other():
    stream = io.BytesIO()
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3).t()  # not contiguous
    write_message(stream, Message({"a": [1, "two"]}, {"x": x, "i": torch.tensor([7], dtype=torch.int8)}))
    write_message(stream, Message({"b": None}))
    stream.seek(0)
    first, second = read_message(stream), read_message(stream)
    assert first.header == {"a": [1, "two"]} and second == Message({"b": None})
    assert torch.equal(first.tensors["x"], x) and first.tensors["i"].dtype == torch.int8
    with pytest.raises(EOFError):
        read_message(stream)


def test_a_stream_that_ends_mid_message_or_is_not_the_protocol_is_refused():
    stream = io.BytesIO()
    write_message(stream, Message({"a": 1}, {"x": torch.ones(4)}))
    cut = io.BytesIO(stream.getvalue()[:-3])
    with pytest.raises(EOFError, match="mid-message"):
        read_message(cut)
    with pytest.raises(ValueError, match="protocol"):
        read_message(io.BytesIO(struct.pack(">IQ", HEADER_LIMIT + 1, 0)))
    with pytest.raises(ValueError, match="no JSON object"):
        read_message(io.BytesIO(struct.pack(">IQ", 2, 0) + b"[]"))


def test_a_job_and_a_reply_survive_their_message_and_a_stranger_is_no_job():
    job = Job("trace", spec="demo:mlp", keep=("body.0",), ops=("body.0", 1), params={"rounds": 3})
    stream = io.BytesIO()
    write_message(stream, job.message())
    stream.seek(0)
    assert Job.from_message(read_message(stream)) == job
    reply = Reply({"n": 1}, tensors={"t": torch.zeros(2)})
    back = Reply.from_message(reply.message())
    assert back.data == {"n": 1} and back.error is None and torch.equal(back.tensors["t"], torch.zeros(2))
    with pytest.raises(ValueError, match="not a samebits job"):
        Job.from_message(Message({"job": {"task": "trace", "pickle": "x"}}))
    with pytest.raises(ValueError, match="not a samebits reply"):
        Reply.from_message(Message({"ok": True}))


def _ask(task: str, job: Job) -> Reply:
    child = Child(ENTRY, [task], pipes=True)
    try:
        child.send(job.message())
        child.close_input()
        return Reply.from_message(child.receive())
    finally:
        child.kill()


def test_the_entry_answers_an_unknown_task_a_mismatched_one_and_a_failing_one_as_data():
    unknown = _ask("nope", Job("nope"))
    assert unknown.internal and "unknown child task 'nope'" in unknown.error
    mismatched = _ask("probe", Job("trace", spec="demo:mlp"))
    assert mismatched.internal and "started as 'probe'" in mismatched.error
    no_model = _ask("trace", Job("trace"))
    assert no_model.internal and "names no model" in no_model.error
    probe = _ask("probe", Job("probe"))
    assert probe.error is None and "ATen" in probe.data


def test_a_child_whose_stdin_closes_before_a_job_says_so_exits_3_and_then_is_gone():
    child = Child(ENTRY, ["trace"], pipes=True)
    child.close_input()
    reply = Reply.from_message(child.receive())
    assert reply.internal and "EOFError" in reply.error
    assert child.wait(30) == 3
    with pytest.raises(ChildDied):
        child.receive()
    child.kill()


def test_a_reply_larger_than_a_pipe_holds_comes_back_whole_while_what_the_model_prints_stays_out(tmp_path):
    (tmp_path / "wide.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class Wide(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.up = nn.Linear(16, 4096)

                def forward(self, x):
                    print("a chatty forward" * 1000)
                    return self.up(x).relu()

            def build():
                torch.manual_seed(0)
                return Wide(), torch.randn(64, 16)
            """
        )
    )
    spec = f"{tmp_path / 'wide.py'}:build"
    from samebits.models import load_model

    loaded = load_model(spec)
    inputs = ModelInputs((loaded.example_inputs.args[0],), {})
    with ChildRunner(loaded.model, inputs, spec=spec, seed=0, device="cpu", dtype=None, timeout=120) as runner:
        (result,) = runner.run([ChildJob("wide", {}, keep=["up#0"])])
    assert result.error is None, result.error
    expected = loaded.model(inputs.args[0])
    (out,) = result.kept["<output>"].values()
    assert out.shape == (64, 4096) and torch.equal(out, expected)  # 1 MiB: far past a 64 KiB pipe
    assert torch.equal(next(iter(result.kept["up#0"].values())), loaded.model.up(inputs.args[0]))


def test_a_child_that_dies_before_answering_is_named_with_its_exit_and_released(tmp_path):
    from samebits.measure import spawn

    (tmp_path / "dies.py").write_text(
        "import os, signal, sys\n\ndef build():\n    print('going down', file=sys.stderr, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    model = torch.nn.Linear(2, 2)
    inputs = ModelInputs((torch.ones(1, 2),), {})
    spec = f"{tmp_path / 'dies.py'}:build"
    with ChildRunner(model, inputs, spec=spec, seed=0, device="cpu", dtype=None, timeout=120) as runner:
        (result,) = runner.run([ChildJob("dies", {})])
    assert result.trace is None and "was killed by signal 9: going down" in result.error
    assert not spawn._LIVE  # its pipes and stderr file released


def _spec(tmp_path, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return f"{tmp_path / name}.py:build"


def test_outputs_that_share_memory_come_back_each_whole(tmp_path):
    spec = _spec(
        tmp_path,
        "shared",
        """
        import torch
        from torch import nn

        class Shared(nn.Module):  # as transformers with output_hidden_states: the last state twice
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                y = self.fc(x)
                return {"last": y, "hidden": (x, y), "head": y[:, :2]}

        def build():
            torch.manual_seed(0)
            return Shared(), torch.randn(3, 4)
        """,
    )
    from samebits.models import load_model

    loaded = load_model(spec)
    inputs = ModelInputs((loaded.example_inputs.args[0],), {})
    with ChildRunner(loaded.model, inputs, spec=spec, seed=0, device="cpu", dtype=None, timeout=120) as runner:
        (result,) = runner.run([ChildJob("shared", {})])
    assert result.error is None, result.error
    out = result.kept["<output>"]
    y = loaded.model.fc(inputs.args[0])
    assert torch.equal(out[".last"], y) and torch.equal(out[".hidden[1]"], y) and torch.equal(out[".head"], y[:, :2])


def test_a_child_that_dies_while_a_process_it_forked_holds_its_pipe_is_collected_at_once(tmp_path):
    import time

    spec = _spec(
        tmp_path,
        "forks",
        f"""
        import os, signal, time
        import torch
        from torch import nn

        class Forks(nn.Module):
            def forward(self, x):
                pid = os.fork()
                if pid == 0:  # a helper that keeps the inherited protocol pipe open
                    time.sleep(60)
                    os._exit(0)
                open({str(tmp_path / "helper.pid")!r}, "w").write(str(pid))
                os.kill(os.getpid(), signal.SIGKILL)

        def build():
            return Forks(), torch.ones(1, 2)
        """,
    )
    inputs = ModelInputs((torch.ones(1, 2),), {})
    start = time.monotonic()
    with ChildRunner(torch.nn.Identity(), inputs, spec=spec, seed=0, device="cpu", dtype=None, timeout=50) as runner:
        (result,) = runner.run([ChildJob("forks", {})])
    assert "was killed by signal 9" in result.error, result.error
    assert time.monotonic() - start < 30  # not the timeout: the child's exit is what counts
    helper = int((tmp_path / "helper.pid").read_text())
    time.sleep(0.5)
    try:
        state = next(line for line in open(f"/proc/{helper}/status") if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        state = "gone"
    assert "S (" not in state and "R (" not in state, state  # its group was killed with it


@pytest.mark.parametrize(
    "written",
    [b"\0" * 12, struct.pack(">IQ", 8, 0) + b'{"x": 1}', struct.pack(">IQ", 2, 5) + b"{}" + b"junk!"],
    ids=["no-json", "no-reply", "no-safetensors"],
)
def test_an_answer_outside_the_protocol_is_a_protocol_error_not_a_crash(written):
    import sys

    from samebits.measure.spawn import ProtocolError

    child = Child.program(
        [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({written!r}); sys.stdout.flush()"], pipes=True
    )
    try:
        with pytest.raises(ProtocolError, match="outside samebits' protocol"):
            child.reply()
    finally:
        child.kill()
