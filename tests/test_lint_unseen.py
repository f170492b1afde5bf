"""Issue #29, lint on code it has never seen: each miss and false alarm class of the issue, as a
minimal snippet shaped like the real code it came from (one file here; projects of several files
in tests/test_lint_project.py)."""

from __future__ import annotations

import textwrap

import pytest

from samebits.linter import lint_source


def found(source: str) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in lint_source(textwrap.dedent(source))]


# -- grad state


@pytest.mark.parametrize(
    "off",
    [
        "torch.set_grad_enabled(False)",
        "torch.no_grad().__enter__()",
        "torch.inference_mode(True).__enter__()",
        "torch.autograd.set_grad_enabled(False)",
    ],
)
def test_grad_turned_off_by_a_bare_statement(off):
    source = f"""
    import torch
    model = torch.load("model.pt")
    model.eval()
    {off}
    for batch in loader:
        preds = model(batch)
    """
    assert [c for c, _ in found(source) if c == "SB301"] == []


def test_a_bare_no_grad_call_does_nothing_and_is_still_found():
    source = """
    import torch
    model = torch.load("model.pt")
    model.eval()
    torch.no_grad()
    out = model(x)
    """
    assert ("SB301", 6) in found(source)


def test_inference_mode_false_is_not_grad_off():
    source = """
    import torch
    model = torch.load("model.pt")
    model.eval()
    with torch.inference_mode(False):
        out = model(x)
    """
    assert ("SB301", 6) in found(source)


def test_a_decorator_on_any_enclosing_function_or_method_turns_grad_off():
    source = """
    import torch
    class Runner:
        def __init__(self):
            self.model = torch.jit.load("m.pt")
            self.model.eval()
        @torch.inference_mode()
        def run(self, frames):
            def one(f):
                return self.model(f)
            return [one(f) for f in frames]
    @torch.no_grad()
    def main(model):
        def step(x):
            return model(x)
        return step
    """
    assert [c for c, _ in found(source) if c == "SB301"] == []


def test_enable_grad_for_guidance_is_deliberate():
    source = """
    import torch
    classifier = torch.load("classifier.pt")
    classifier.eval()
    def cond_fn(x, t, y):
        with torch.enable_grad():
            x_in = x.detach().requires_grad_(True)
            logits = classifier(x_in, t)
            selected = logits.log_softmax(-1)[range(len(logits)), y]
            return torch.autograd.grad(selected.sum(), x_in)[0]
    """
    assert found(source) == []


# -- training detection


def test_a_profiler_step_and_a_scheduler_do_not_make_a_file_training():
    source = """
    import torch
    from torch.profiler import profile
    model = torch.hub.load("pytorch/vision", "resnet18")
    scheduler = torch.optim.lr_scheduler.LambdaLR
    with profile() as p:
        for batch in loader:
            out = model(batch)
            p.step()
    """
    assert ("SB107", 8) in found(source) and ("SB301", 8) in found(source)


@pytest.mark.parametrize(
    "evidence",
    [
        "optimizer = torch.optim.AdamW(model.parameters())",
        "opt = Lion(model.parameters())",
        "loss.backward()",
        "scaler.scale(loss).backward()",
        "accelerator.backward(loss)",
        "optim.zero_grad()",
    ],
)
def test_optimizer_evidence_makes_a_file_training(evidence):
    source = f"""
    import torch
    model = torch.hub.load("pytorch/vision", "resnet18")
    out = model(batch)
    {evidence}
    """
    assert found(source) == []


def test_a_saliency_backward_is_not_training():
    source = """
    import torch
    model = torch.hub.load("pytorch/vision", "resnet18")
    x.requires_grad_(True)
    score = model(x)[0, 3]
    score.backward()
    """
    assert ("SB107", 5) in found(source)
