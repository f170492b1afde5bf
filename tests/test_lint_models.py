"""Model recognition shared by the rules (linter/checks/models.py), SB107's paths, SB201 on
fixed-size inputs, SB401's project metadata, and that only selected checks run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import samebits
from samebits.linter import lint_source
from samebits.linter.metadata import floor_of, torch_floor


def found(source: str, min_torch=None) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in lint_source(textwrap.dedent(source), min_torch=min_torch)]


def codes(source: str) -> list[str]:
    return [c for c, _ in found(source)]


@pytest.mark.parametrize(
    "constructor",
    [
        "torchvision.models.resnet50(weights='DEFAULT')",
        "models.detection.retinanet_resnet50_fpn_v2(weights='DEFAULT')",
        "timm.create_model('resnet18', pretrained=True)",
        "torch.hub.load('facebookresearch/dinov2', 'dinov2_vits14')",
        "AutoModelForCausalLM.from_config(config)",
        "Net()",
    ],
)
def test_a_library_or_file_model_used_without_eval_is_found(constructor):
    source = f"""
    import timm
    import torch
    import torchvision
    from torchvision import models
    from transformers import AutoModelForCausalLM
    class Net(torch.nn.Module):
        pass
    model = {constructor}
    with torch.no_grad():
        y = model(x)
    """
    assert ("SB107", 11) in found(source)


def test_a_torchvision_model_held_by_a_class_is_found_in_another_method():
    source = """
    import torch
    from torchvision.models.detection import retinanet_resnet50_fpn_v2
    class Detector:
        def __init__(self):
            self.model = retinanet_resnet50_fpn_v2(weights="DEFAULT")
        def detect(self, x):
            return self.model([x])
    """
    assert found(source) == [("SB107", 8), ("SB301", 8)]


@pytest.mark.parametrize(
    "binding",
    [
        "AutoModelForSequenceClassification.from_pretrained('m')",  # eval mode already
        "YOLO('yolov8n.pt')",  # handles eval and grad itself
        "pipeline('text-classification')",
        "torch.export.load('m.pt2').module()",  # .eval() raises on it
        "torch.jit.load('m.pt')",  # mode saved in the file
    ],
)
def test_sources_that_need_no_eval_are_not_sb107(binding):
    source = f"""
    import torch
    from transformers import AutoModelForSequenceClassification, pipeline
    from ultralytics import YOLO
    model = {binding}
    with torch.inference_mode():
        y = model(x)
    """
    assert "SB107" not in codes(source)


def test_tokenizers_and_processors_are_not_models():
    source = """
    import torch
    from transformers import AutoModel, AutoTokenizer, AutoImageProcessor
    tok = AutoTokenizer.from_pretrained("m")
    proc = AutoImageProcessor.from_pretrained("m")
    model = AutoModel.from_pretrained("m")
    for text in texts:
        enc = tok(text, return_tensors="pt")
        pix = proc(images, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc)
    """
    assert codes(source) == []


def test_predictors_that_handle_grad_are_not_sb301():
    source = """
    from ultralytics import YOLO
    from transformers import pipeline
    detector = YOLO("yolov8n.pt")
    clf = pipeline("sentiment-analysis")
    for frame in frames:
        boxes = detector(frame)
        label = clf(text)
    """
    assert codes(source) == []


def test_a_class_from_the_users_package_is_a_model_once_loaded():
    source = """
    import torch
    from mypkg.models import UNet
    net = UNet(3, 2)
    net.load_state_dict(torch.load("w.pt", weights_only=True))
    with torch.no_grad():
        mask = net(x)
    """
    assert found(source) == [("SB107", 7)]
    # a capitalised import that is never treated as a module is not a model
    assert codes("from mypkg.io import Reader\nreader = Reader('f')\nfor row in reader(x):\n    pass\n") == []


def test_eval_on_one_path_only_is_found_at_the_callers_first_use():
    source = """
    import torch
    def load(path):
        model = Net()
        model.load_state_dict(torch.load(path, weights_only=True))
        if torch.cuda.is_available():
            return model.cuda()
        model.eval()
        return model
    class Net(torch.nn.Module):
        pass
    model = load("w.pt")
    with torch.no_grad():
        y = model(x)
    """
    assert found(source) == [("SB107", 14)]
    fixed = source.replace("return model.cuda()", "return model.cuda().eval()")
    assert codes(fixed) == []


def test_eval_in_only_one_branch_is_not_eval():
    source = """
    import torch
    model = Net()
    model.load_state_dict(torch.load("w.pt", weights_only=True))
    if fast:
        model.eval()
    with torch.no_grad():
        y = model(x)
    class Net(torch.nn.Module):
        pass
    """
    assert found(source) == [("SB107", 8)]
    assert (
        codes(
            source.replace(
                "if fast:\n        model.eval()", "if fast:\n        model.eval()\n    else:\n        model.eval()"
            )
        )
        == []
    )


def test_a_global_model_used_in_a_handler_counts_eval_anywhere_in_the_file():
    handler = """
    import torch
    from torchvision.models import resnet50
    model = resnet50(weights="DEFAULT")
    {extra}
    @app.route("/predict")
    def predict():
        with torch.no_grad():
            return model(read())
    """
    assert found(handler.format(extra="")) == [("SB107", 9)]
    assert codes(handler.format(extra="model.eval()")) == []


def test_same_name_in_two_functions_is_two_variables():
    source = """
    import torch
    from transformers import AutoTokenizer, AutoModel
    def load_tokenizer():
        model = AutoTokenizer.from_pretrained("m")
        return model
    def main():
        model = AutoModel.from_pretrained("m")
        with torch.no_grad():
            return model(**enc)
    """
    assert codes(source) == []


def test_custom_no_grad_decorators_and_a_forward_that_turns_grad_off():
    decorated = """
    import torch
    model = Net().eval()
    @smart_inference_mode()
    def run(x):
        return model(x)
    class Net(torch.nn.Module):
        pass
    """
    assert codes(decorated) == []
    frozen = """
    import torch
    class Frozen(torch.nn.Module):
        def forward(self, x):
            with torch.no_grad():
                return self.body(x)
    enc = Frozen().eval()
    for images in loader:
        feats = enc(images)
    """
    assert codes(frozen) == []


FIXED = "tf = transforms.Compose([transforms.Resize((224, 224)), transforms.ToTensor()])\n    "


def test_sb201_batch_of_one_made_on_an_earlier_line_over_fixed_size_inputs():
    loop = """
    import torch
    from torchvision import transforms
    {fixed}model = Net().eval()
    with torch.no_grad():
        for path in paths:
            x = tf(open_image(path)).unsqueeze(0)
            x = x.to(device)
            y = model(x)
    class Net(torch.nn.Module):
        pass
    """
    assert ("SB201", 10) in found(loop.format(fixed=FIXED))
    assert "SB201" not in codes(loop.format(fixed=""))  # sizes may vary: nothing to stack


def test_sb201_dataloader_of_batch_size_one_over_fixed_size_inputs():
    loop = """
    import torch
    from torch.utils.data import DataLoader
    from torchvision import transforms
    {fixed}def make(ds):
        return ds, DataLoader(ds, {size}shuffle=False)
    model = Net().eval()
    ds, loader = make(data)
    with torch.no_grad():
        for images, labels in loader:
            out = model(images)
    class Net(torch.nn.Module):
        pass
    """
    assert ("SB201", 12) in found(loop.format(fixed=FIXED, size="batch_size=1, "))
    assert ("SB201", 12) in found(loop.format(fixed=FIXED, size=""))  # the default is 1
    assert "SB201" not in codes(loop.format(fixed=FIXED, size="batch_size=64, "))
    assert "SB201" not in codes(loop.format(fixed="", size="batch_size=1, "))


def test_sb401_old_torch_evidence_in_the_file():
    source = "import torch\nfrom torch.autograd import Variable\nmodel = torch.load('m.pth')\n"
    assert codes(source) == ["SB401"]
    assert codes("import torch\nmodel = torch.load('m.pth')\nx = Variable(t, volatile=True)\n") == ["SB401"]
    assert codes("import torch\nmodel = torch.load('m.pth')\n") == []


@pytest.mark.parametrize(
    ("line", "floor"),
    [
        ("torch>=1.13,<3", (1, 13)),
        ("torch==2.1.0+cu118", (2, 1)),
        ('"torch >= 2.6"', (2, 6)),
        ("torch", (0, 0)),
        ("torch[opt]~=2.4.0", (2, 4)),
        ("torchvision>=0.21", None),
        ("torchaudio==2.1", None),
        ("torch-geometric>=2.0", None),
        ("torch_scatter", None),
    ],
)
def test_only_torch_requirements_set_the_floor(line, floor):
    assert floor_of(line) == floor


def test_metadata_is_found_up_to_the_repository_root(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["torch>=2.6"]\n')
    legacy = repo / "legacy"
    (legacy / "tools" / "deep").mkdir(parents=True)
    (legacy / "requirements.txt").write_text("torchvision==0.14.1\ntorch==1.13.1\n")
    tv_only = repo / "tv"
    (tv_only / "src").mkdir(parents=True)
    (tv_only / "requirements-dev.txt").write_text("torchvision>=0.21\n")
    setup = repo / "setuppy"
    (setup / "pkg").mkdir(parents=True)
    (setup / "setup.py").write_text('from setuptools import setup\nsetup(install_requires=["torch>=1.10", "numpy"])\n')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "outside"\ndependencies = ["torch>=1.0"]\n')
    torch_floor.cache_clear()
    assert torch_floor(legacy / "tools" / "deep") == (1, 13)
    assert torch_floor(tv_only / "src") == (2, 6)  # torchvision says nothing; the repository's pyproject does
    assert torch_floor(setup / "pkg") == (1, 10)  # setup.py read as string literals, never run
    assert torch_floor(repo) == (2, 6)  # the search stops at the repository root
    script = legacy / "tools" / "deep" / "infer.py"
    script.write_text("import torch\nmodel = torch.load('m.pth')\n")
    assert [f.code for f in samebits.lint([repo])] == ["SB401"]


def test_explicit_torch_in_the_lint_config_wins(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["torch>=2.6"]\n[tool.samebits.lint]\ntorch = ">=1.12"\n'
    )
    (tmp_path / "app.py").write_text("import torch\nsd = torch.load('w.pt')\n")
    torch_floor.cache_clear()
    assert [f.code for f in samebits.lint([tmp_path])] == ["SB401"]


def test_a_bad_torch_range_in_the_lint_config_is_a_user_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.samebits.lint]\ntorch = "soon"\n')
    (tmp_path / "app.py").write_text("x = 1\n")
    with pytest.raises(samebits.errors.UserError, match="torch must be a version range"):
        samebits.lint([tmp_path])


def test_only_selected_checks_run_and_torch_is_never_imported(tmp_path):
    target = tmp_path / "flags.py"
    target.write_text(
        "import torch\ntorch.backends.cudnn.determinstic = True\nsd = torch.load('w.pt', weights_only=False)\n"
    )
    probe = (
        (
            "import sys, samebits\n"
            "from samebits.linter.config import LintConfig\n"
            f"found = samebits.lint([{str(target)!r}], LintConfig(select=sys.argv[1].split(',')))\n"
            "print(sorted({{f.code for f in found}}), 'torch' in sys.modules)\n"
        )
        .replace("{{", "{")
        .replace("}}", "}")
    )
    out = {
        sel: subprocess.run(
            [sys.executable, "-c", probe, sel], capture_output=True, text=True, check=True
        ).stdout.split()
        for sel in ("SB401", "SB102")
    }
    assert out["SB401"] == ["['SB401']", "False"]
    assert out["SB102"] == ["['SB102']", "False"]  # its flags come from a table (checks/backend_flags.py)
