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


# -- inference through a method


def test_a_models_generate_method_is_its_forward():
    source = """
    import torch
    from torch import nn
    class Tacotron(nn.Module):
        def forward(self, x):
            return x
        def generate(self, seq):
            return self.forward(seq)
    class Synthesizer:
        def __init__(self, path):
            self._model = Tacotron()
            self._model.load_state_dict(torch.load(path, weights_only=True))
            self._model.eval()
        def synthesize(self, seq):
            return self._model.generate(seq)
    """
    assert ("SB301", 15) in found(source)


def test_a_decoders_sample_method_is_its_forward():
    source = """
    import torch
    from torch import nn
    class DecoderRNN(nn.Module):
        pass
    decoder = DecoderRNN()
    decoder.load_state_dict(torch.load("decoder.pt", weights_only=True))
    ids = decoder.sample(features)
    """
    assert {("SB107", 8), ("SB301", 8)} <= set(found(source))


def test_a_library_objects_encode_is_not_a_forward():
    source = """
    import torch
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer("all-MiniLM-L6-v2")
    model.eval()
    emb = model.encode(sentences)
    """
    assert found(source) == []


# -- wrappers keep the wrapped model's mode


@pytest.mark.parametrize(
    "wrap",
    [
        "model = nn.DataParallel(model)",
        "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])",
        "model = torch.compile(model)",
        "model = torch.jit.trace(model, example)",
        "model = torch.jit.script(model)",
    ],
)
def test_a_wrapped_eval_model_is_not_missing_eval(wrap):
    source = f"""
    import torch
    from torch import nn
    from torchvision.models import resnet50
    model = resnet50(weights="DEFAULT")
    model.eval()
    {wrap}
    with torch.no_grad():
        out = model(x)
    """
    assert found(source) == []


def test_models_collected_in_a_list_keep_their_mode():
    source = """
    import torch
    from torchvision.models import resnet50
    models = []
    for path in paths:
        model = resnet50()
        model.load_state_dict(torch.load(path, weights_only=True))
        model.eval()
        models.append(model)
    with torch.no_grad():
        for model in models:
            out = model(x)
        first = models[0]
        out = first(x)
    """
    assert found(source) == []


# -- benchmark-with-determinism


@pytest.mark.parametrize(
    "asks",
    [
        "torch.backends.cudnn.deterministc = True",
        "cudnn.determinism = args.deterministic",
        "cudnn.benchmark, cudnn.determinstic = True, True",
    ],
)
def test_benchmark_beside_any_determinism_attribute_in_a_seeded_file(asks):
    source = f"""
    import random
    import numpy as np
    import torch
    import torch.backends.cudnn as cudnn
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    {asks}
    cudnn.benchmark = True
    """
    assert "SB103" in [c for c, _ in found(source)]


def test_a_determinism_attribute_set_false_asks_for_nothing():
    source = """
    import torch
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = False
    torch.backends.cudnn.benchmark = True
    """
    assert found(source) == []


# -- per-sample loop


def test_a_batch_of_one_from_numpy_over_pil_resized_images():
    source = """
    import numpy as np
    import torch
    from PIL import Image
    model = torch.jit.load("model.pt").eval()
    with torch.no_grad():
        for path in paths:
            img = np.asarray(Image.open(path).resize((224, 224)), dtype=np.float32)
            x = torch.from_numpy(img).permute(2, 0, 1).unsqueeze(dim=0)
            y = model(x)
    """
    assert found(source) == [("SB201", 10)]


def test_a_fixed_size_only_in_an_optional_branch_is_no_fixed_size():
    source = """
    import torch
    from torch.utils.data import DataLoader
    from torchvision import transforms as T
    def main(args, model):
        tfs = [T.ToTensor()]
        if args.crop_val:
            tfs.insert(0, T.CenterCrop(args.crop_size))
        loader = DataLoader(Dataset(T.Compose(tfs)), batch_size=1)
        model.eval()
        with torch.no_grad():
            for images, labels in loader:
                outputs = model(images)
    """
    assert found(source) == [("SB203", 9)]  # no SB201: sizes vary; the loader loads in the main process (issue #44)


def test_a_library_loaders_decode_is_not_a_forward():
    source = """
    import torch
    import whisper
    model = whisper.load_model("base").eval()
    result = model.decode(mel, options)
    """
    assert found(source) == []


# -- second unseen corpus (tests/lint_corpus_unseen): false alarms and misses, as general rules


def test_seeding_after_pretrained_models_only_is_not_seed_after_model():
    source = """
    import torch
    from transformers import AutoModel
    def main(seed):
        encoder = AutoModel.from_pretrained("bert-base-uncased").to("cuda")
        gen = torch.manual_seed(seed)
        noise = torch.randn(4, 8, generator=gen)
    """
    assert [c for c, _ in found(source) if c == "SB106"] == []


def test_seeding_after_a_fresh_model_is_still_seed_after_model():
    source = """
    import torch
    from torch import nn
    def main(seed):
        head = nn.Linear(8, 2)
        torch.manual_seed(seed)
    """
    assert ("SB106", 6) in found(source)


def test_a_comprehension_target_is_an_element_of_unknown_mode():
    # the loop variable ``net`` made the models above is not the comprehension's ``net``
    source = """
    import timm
    import torch
    nets = []
    for path in paths:
        net = timm.create_model("resnet18")
        net.load_state_dict(torch.load(path, weights_only=True))
        net.eval()
        nets.append(net)
    with torch.no_grad():
        scores = [net(batch) for net in nets]
    """
    assert [c for c, _ in found(source) if c == "SB107"] == []


def test_a_loss_module_is_no_model():
    source = """
    import torch
    from torch import nn
    def score(model, loader):
        loss_fn = nn.BCEWithLogitsLoss()
        with torch.no_grad():
            for x, y in loader:
                total = loss_fn(model(x), y).item()
    model = load()
    model.eval()
    """
    assert found(source) == []


def test_a_function_that_back_propagates_on_purpose_needs_grad():
    # an input-gradient map in an inference file: grad mode is the point
    source = """
    import torch
    def input_gradients(model, batch):
        batch = batch.clone().requires_grad_(True)
        out = model(batch)
        out.max(1).values.sum().backward()
        return batch.grad
    def main():
        model = torch.load("classifier.pt", weights_only=False)
        model.eval()
        grads = input_gradients(model, images)
    """
    assert [c for c, _ in found(source) if c in ("SB301", "SB107")] == []


def test_a_method_that_turns_grad_off_itself_is_no_grad_finding():
    source = """
    import torch
    from torch import nn
    class Captioner(nn.Module):
        def forward(self, x):
            return self.proj(x)
        @torch.inference_mode()
        def generate(self, x, steps):
            return [self(x) for _ in range(steps)]
    model = Captioner()
    model.load_state_dict(torch.load("cap.pt", weights_only=True))
    model.eval()
    caption = model.generate(img, 20)
    logits = model(img)
    """
    assert [(c, n) for c, n in found(source) if c == "SB301"] == [("SB301", 14)]


def test_a_scripted_transform_is_no_model():
    source = """
    import torch
    net = torch.jit.load("net.pt").eval()
    preprocess = torch.jit.load("preprocess.pt")
    def handler(img):
        return net(preprocess(img))
    """
    assert found(source) == [("SB301", 6)]


def test_a_compiled_wrapper_keeps_the_training_mode_of_the_model_it_wraps():
    source = """
    import torch
    from torchvision.models import resnet50
    def build():
        return resnet50(weights="DEFAULT").cuda()
    def main():
        net = build()
        fast = torch.compile(net)
        with torch.no_grad():
            y = fast(x)
    """
    assert found(source) == [("SB107", 10)]


@pytest.mark.parametrize(
    "order",
    [
        "net.eval()\nfast = torch.compile(net)",  # eval'd, then wrapped
        "fast = torch.compile(net)\nnet.eval()",  # wrapped, then the wrapped model eval'd: same module
        "fast = torch.compile(net).eval()",
    ],
)
def test_a_compiled_wrapper_of_an_evaluated_model_is_evaluated(order):
    lines = textwrap.indent(order, "    ")
    source = f"""
import torch
from torchvision.models import resnet50
def main():
    net = resnet50(weights="DEFAULT")
{lines}
    with torch.no_grad():
        y = fast(x)
"""
    assert found(source) == []


def test_a_module_level_wrapper_of_a_model_evaluated_later_is_evaluated():
    source = """
    import torch
    from torchvision.models import resnet50
    net = resnet50(weights="DEFAULT")
    fast = torch.compile(net)
    def serve(x):
        with torch.inference_mode():
            return fast(x)
    net.eval()
    """
    assert found(source) == []


# -- discarded .to() (the second blind corpus)


def test_a_processors_output_moved_in_place_is_no_discarded_to():
    """transformers' BatchFeature/BatchEncoding.to() moves in place and returns itself; a tensor
    taken out of it is a tensor again."""
    source = """
        import torch
        def run(processor, speech, device):
            inputs = processor(speech, sampling_rate=16000, return_tensors="pt")
            inputs.to(device)
            batch = self.tokenizer(texts, return_tensors="pt")
            batch.to(device)
            inputs = inputs["input_features"]
            inputs.to(device)
        """
    assert [f for f in found(source) if f[0] == "SB202"] == [("SB202", 9)]
