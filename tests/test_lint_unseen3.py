"""Issue #44, lint on a third blind corpus (real inference files): each false alarm and miss class
the issue lists, as a minimal snippet shaped like the code it came from, and the rule it led to
(SB203, a per-sample loop over a DataLoader without workers)."""

from __future__ import annotations

import textwrap

from samebits.linter import lint_source


def found(source: str, code: str) -> list[int]:
    """The lines where ``code`` is found in ``source``."""
    return [f.line for f in lint_source(textwrap.dedent(source)) if f.code == code]


# -- false alarms


def test_a_sequential_rebuilt_from_an_evaluated_models_children_keeps_eval_mode():
    source = """
    import torch
    import torchvision
    from torch import nn
    vgg = torchvision.models.vgg19(weights="DEFAULT")
    vgg.eval()
    vgg = nn.Sequential(*list(vgg.children())[:31])
    with torch.no_grad():
        features = vgg(x)
    """
    assert found(source, "SB107") == []


def test_a_sequential_rebuilt_from_a_model_never_evaluated_is_still_found():
    source = """
    import torch
    import torchvision
    from torch import nn
    vgg = torchvision.models.vgg19(weights="DEFAULT")
    features = nn.Sequential(*list(vgg.children())[:31])
    with torch.no_grad():
        out = features(x)
    """
    assert found(source, "SB107") == [8]


def test_a_sequential_with_a_fresh_layer_does_not_take_the_models_mode():
    source = """
    import torch
    import torchvision
    from torch import nn
    vgg = torchvision.models.vgg19(weights="DEFAULT")
    vgg.eval()
    head = nn.Sequential(*list(vgg.children())[:31], nn.Dropout(0.5))
    with torch.no_grad():
        out = head(x)
    """
    assert found(source, "SB107") == [9]


def test_a_value_an_inference_method_returns_under_a_string_key_is_not_kept_with_grad():
    source = """
    import torch
    model = torch.jit.load("model.pt")
    model.eval()
    out = []
    for f in files:
        out.append(model.inference(f)["predictions"][0])
    """
    assert found(source, "SB302") == []


def test_a_forward_output_under_a_string_key_is_still_kept_with_grad():
    source = """
    import torch
    model = torch.jit.load("model.pt")
    model.eval()
    out = []
    for x in batches:
        out.append(model(x)["logits"])
    """
    assert found(source, "SB302") == [7]


# -- misses


def test_a_pil_resize_with_a_positional_resample_argument_fixes_the_size():
    source = """
    import torch
    from PIL import Image
    model = torch.jit.load("model.pt").eval()
    with torch.no_grad():
        for path in paths:
            img = Image.open(path).resize((224, 224), Image.BILINEAR)
            x = to_tensor(img).unsqueeze(0)
            y = model(x)
    """
    assert found(source, "SB201") == [9]


def test_benchmark_inside_a_function_that_seeds_every_rng_is_found():
    source = """
    import random
    import numpy as np
    import torch
    def seed_everything(seed):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.benchmark = True
    """
    assert found(source, "SB103") == [10]


def test_benchmark_beside_seeds_at_the_top_level_is_a_trade_off_not_a_finding():
    """Seeded training scripts turn benchmark on for speed on purpose (two labelled corpus files do)."""
    source = """
    import random
    import numpy as np
    import torch
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    torch.backends.cudnn.benchmark = True
    """
    assert found(source, "SB103") == []


def test_outputs_kept_inside_a_tuple_are_kept_with_grad():
    source = """
    import torch
    model = torch.load("model.pt")
    model.eval()
    results = []
    for x, name in data:
        results.append((name, model(x)))
    """
    assert found(source, "SB302") == [7]


def test_outputs_added_as_a_list_are_kept_with_grad():
    source = """
    import torch
    model = torch.load("model.pt")
    model.eval()
    results = []
    for x in data:
        results += [model(x)]
    """
    assert found(source, "SB302") == [7]


def test_each_name_unpacked_from_an_output_carries_its_graph():
    source = """
    import torch
    model = torch.load("model.pt")
    model.eval()
    feats = []
    for x in data:
        logits, feat = model(x)
        feats.append(feat)
    """
    assert found(source, "SB302") == [8]


def test_a_name_unpacked_beside_an_output_from_a_tuple_carries_no_graph():
    source = """
    import torch
    model = torch.load("model.pt")
    model.eval()
    names = []
    for x, path in data:
        name, out = path, model(x)
        names.append(name)
    """
    assert found(source, "SB302") == []


# -- SB203 dataloader-main-process

LOADER = """
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
model = torch.jit.load("model.pt").eval()
loader = DataLoader(datasets.ImageFolder(root, transform=transforms.ToTensor()){args})
preds = []
with torch.inference_mode():
    for image, _ in loader:
        preds.append(model(image))
"""


def test_a_per_sample_loop_over_a_loader_without_workers_is_found_at_the_loader():
    assert found(LOADER.format(args=", batch_size=1, num_workers=0"), "SB203") == [6]


def test_a_loader_without_workers_given_loads_in_the_main_process_too():
    assert found(LOADER.format(args=""), "SB203") == [6]


def test_a_loader_with_workers_is_no_sb203():
    assert found(LOADER.format(args=", num_workers=4"), "SB203") == []


def test_a_batched_loader_is_no_sb203():
    assert found(LOADER.format(args=", batch_size=32"), "SB203") == []


def test_a_per_sample_loader_over_fixed_size_inputs_is_sb201_not_sb203():
    resized = "transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])"
    source = LOADER.format(args="").replace("transforms.ToTensor()", resized)
    assert found(source, "SB203") == [] and found(source, "SB201") == [10]


def test_a_training_file_is_no_sb203():
    source = LOADER.format(args="") + "loss = criterion(preds[0], y)\nloss.backward()\n"
    assert found(source, "SB203") == []


def test_noqa_tor401_silences_sb203():
    source = LOADER.format(args="").replace("ToTensor()))\n", "ToTensor()))  # noqa: TOR401\n")
    assert "# noqa: TOR401" in source and found(source, "SB203") == []


def test_noqa_tor102_silences_sb401():
    source = "import torch\nsd = torch.load('w.pt', weights_only=False)  # noqa: TOR102\n"
    assert found(source, "SB401") == [] and found(source.replace("TOR102", "TOR401"), "SB401") == [2]


def test_a_model_copied_from_a_file_class_instance_keeps_its_class():
    """``model = model.to(device)`` of an instance of a class of the file: the copy's class is the
    original's (the lint of such a file stopped on an AttributeError)."""
    source = """
    import torch
    from torch import nn
    class Head(nn.Module):
        def forward(self, x):
            return x
    def load(device):
        model = Head()
        model.eval()
        model = model.to(device)
        return model
    """
    assert lint_source(textwrap.dedent(source)) == []


def test_a_camelcase_call_of_a_class_defined_elsewhere_builds_a_model_and_runs_none():
    """``Net()`` (imported, or not known here) makes a model; it is no forward with grad on (a fix
    wrapping it in inference mode would make its parameters inference tensors)."""
    source = """
    import torch
    model = Net()
    model.load_state_dict(torch.load("w.pt", weights_only=True))
    model.eval()
    """
    assert found(source, "SB301") == []
