"""Issue #29: lint a file together with its project (linter/project.py): models made, run, eval'd
or run under no_grad in another file of the project, each from a minimal project shaped like the
real ones the issue's misses and false alarms came from."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import samebits

NET = """
import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)
    def forward(self, x):
        return self.bn(x)
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.delenv("SAMEBITS_LINT_CACHE_DIR", raising=False)  # the default place, under XDG_CACHE_HOME
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def found(root: Path, target: str | None = None) -> list[tuple[str, str, int]]:
    result = samebits.lint([root / target] if target else [root])
    assert result.errors == []
    return [(Path(f.path).name, f.code, f.line) for f in result]


def messages(root: Path, target: str) -> list[str]:
    return [f.message for f in samebits.lint([root / target])]


def test_a_module_level_model_imported_from_the_project(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET + "model = Net()\n",
            "demo.py": """
            import torch
            from model import model
            model.load_state_dict(torch.load("w.pt", weights_only=True))
            with torch.no_grad():
                warm = model(torch.zeros(1, 3, 8, 8))
            """,
        },
    )
    assert found(root, "demo.py") == [("demo.py", "SB107", 5)]
    assert "made in model.py:9, never eval'd there" in messages(root, "demo.py")[0]


def test_a_module_level_model_eval_d_where_it_is_made(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET + "model = Net()\nmodel.eval()\n",
            "demo.py": "import torch\nfrom model import model\nwith torch.no_grad():\n    y = model(x)\n",
        },
    )
    assert found(root, "demo.py") == []


@pytest.mark.parametrize(
    ("imports", "make"),
    [
        ("from pkg.models import get_net", "get_net(cfg)"),
        ("import train", "train.Model()"),
        ("from pkg import models", "models.Net()"),
        ("from pkg.models import Net as Backbone", "Backbone()"),
    ],
)
def test_project_factories_and_classes_through_modules(tmp_path, imports, make):
    root = project(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/models.py": NET + "def get_net(cfg):\n    net = Net()\n    return net.cuda()\n",
            "train.py": "from pkg.models import Net\nclass Model(Net):\n    pass\n",
            "demo.py": f"""
            import torch
            {imports}
            net = {make}
            net.load_state_dict(torch.load("w.pt", weights_only=True))
            with torch.no_grad():
                out = net(x)
            """,
        },
    )
    assert ("demo.py", "SB107", 6) in found(root, "demo.py")


def test_relative_imports_and_a_subclass_of_a_project_module(tmp_path):
    root = project(
        tmp_path,
        {
            "app/__init__.py": "",
            "app/base.py": NET,
            "app/nets.py": "from .base import Net\nclass Big(Net):\n    pass\n",
            "app/run.py": """
            import torch
            from .nets import Big
            def main():
                m = Big()
                with torch.inference_mode():
                    return m(torch.zeros(1))
            """,
        },
    )
    assert found(root, "app/run.py") == [("run.py", "SB107", 6)]


def test_a_model_passed_to_a_test_function_called_outside_no_grad(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET,
            "eval_ssd.py": """
            import torch
            from model import Net
            def test_net(net, images):
                for img in images:
                    det = net(img)
            if __name__ == "__main__":
                net = Net()
                net.load_state_dict(torch.load("ssd.pth", weights_only=True))
                net.eval()
                test_net(net, images)
            """,
        },
    )
    assert found(root, "eval_ssd.py") == [("eval_ssd.py", "SB301", 5)]


def test_a_model_run_by_a_function_of_another_file(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET,
            "evaluate.py": "def test_net(net, images):\n    return [net(img) for img in images]\n",
            "main.py": """
            import torch
            from model import Net
            from evaluate import test_net
            net = Net()
            net.load_state_dict(torch.load("w.pth", weights_only=True))
            net.eval()
            test_net(net, images)
            with torch.no_grad():
                test_net(net, images)
            """,
        },
    )
    assert found(root, "main.py") == [("main.py", "SB301", 7)]
    assert "evaluate.py:1" in messages(root, "main.py")[0]


def test_a_warm_up_through_a_project_function_before_eval(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET,
            "utils.py": "import torch\ndef warm_up(model):\n    with torch.no_grad():\n        model(torch.zeros(1, 3, 8, 8))\n",
            "serve.py": """
            import torch
            from model import Net
            from utils import warm_up
            net = Net()
            net.load_state_dict(torch.load("w.pth", weights_only=True))
            warm_up(net)
            net.eval()
            """,
        },
    )
    assert found(root, "serve.py") == [("serve.py", "SB107", 6)]
    assert "is run by warm_up() of utils.py:2" in messages(root, "serve.py")[0]


def test_a_project_function_that_evals_its_parameter(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET,
            "utils.py": "def prepare(model, device):\n    model.to(device)\n    model.eval()\n",
            "serve.py": """
            import torch
            from model import Net
            from utils import prepare
            net = Net()
            prepare(net, "cuda")
            with torch.no_grad():
                out = net(x)
            """,
        },
    )
    assert found(root, "serve.py") == []


def test_a_project_wrapper_that_evals_the_model_it_stores(tmp_path):
    root = project(
        tmp_path,
        {
            "utils/torch_utils.py": """
            import torch
            from torch import nn
            class TracedModel(nn.Module):
                def __init__(self, model=None, device=None, img_size=(640, 640)):
                    super().__init__()
                    self.model = model
                    self.model.eval()
                    traced = torch.jit.trace(self.model, torch.rand(1, 3, img_size, img_size))
                    self.model = traced  # the last assignment is not the model given
                def forward(self, x):
                    return self.model(x)
            """,
            "model.py": NET,
            "detect.py": """
            import torch
            from model import Net
            from utils.torch_utils import TracedModel
            model = Net()
            model.load_state_dict(torch.load("yolo.pt", weights_only=True))
            model = TracedModel(model, "cpu", 640)
            with torch.no_grad():
                pred = model(img)
            """,
        },
    )
    assert found(root, "detect.py") == []


def test_grad_turned_off_in_the_projects_sampling_loop(tmp_path):
    root = project(
        tmp_path,
        {
            "diffusion/gaussian_diffusion.py": """
            import torch as th
            class GaussianDiffusion:
                def p_sample_loop(self, model, shape, cond_fn=None):
                    for sample in self.p_sample_loop_progressive(model, shape, cond_fn=cond_fn):
                        final = sample
                    return final
                def p_sample_loop_progressive(self, model, shape, cond_fn=None):
                    img = th.randn(*shape)
                    for i in range(10):
                        with th.no_grad():
                            img = self.p_sample(model, img, i, cond_fn=cond_fn)
                        yield img
                def p_sample(self, model, x, t, cond_fn=None):
                    return model(x, t)
            def create_diffusion():
                return GaussianDiffusion()
            """,
            "model.py": NET,
            "sample.py": """
            import torch as th
            from model import Net
            from diffusion.gaussian_diffusion import create_diffusion
            model = Net()
            model.load_state_dict(th.load("model.pt", weights_only=True))
            model.eval()
            diffusion = create_diffusion()
            def model_fn(x, t):
                return model(x, t)
            sample_fn = diffusion.p_sample_loop if use_fast else diffusion.p_sample_loop
            out = sample_fn(model_fn, (4, 3, 64, 64))
            """,
        },
    )
    assert found(root) == []


def test_a_function_called_under_no_grad_in_another_file(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET,
            "sampler.py": "from model import Net\nnet = Net().eval()\ndef step(x):\n    return net(x)\n",
            "run.py": "import torch\nfrom sampler import step\nwith torch.no_grad():\n    y = step(x)\n",
        },
    )
    assert found(root) == []


def test_a_fixed_size_from_a_project_transform_and_a_variable_batch_of_one(tmp_path):
    root = project(
        tmp_path,
        {
            "data/transforms.py": """
            import cv2
            class BaseTransform:
                def __init__(self, size):
                    self.size = size
                def __call__(self, image):
                    return cv2.resize(image, (self.size, self.size))
            """,
            "model.py": NET,
            "demo.py": """
            import torch
            from torch.autograd import Variable
            from data.transforms import BaseTransform
            from model import Net
            net = Net().eval()
            transform = BaseTransform(300)
            with torch.no_grad():
                for image in images:
                    x = torch.from_numpy(transform(image)).permute(2, 0, 1)
                    x = Variable(x.unsqueeze(0))
                    y = net(x)
            """,
        },
    )
    assert found(root, "demo.py") == [("demo.py", "SB201", 11)]


def test_a_file_that_does_not_parse_is_skipped_with_a_note(tmp_path):
    root = project(
        tmp_path,
        {
            "broken.py": "def (:\n",
            "model.py": NET + "model = Net()\n",
            "demo.py": "import torch\nfrom model import model\nwith torch.no_grad():\n    y = model(x)\n",
        },
    )
    result = samebits.lint([root / "demo.py"])
    assert [(f.code, f.line) for f in result] == [("SB107", 4)]
    assert any("broken.py" in n and "does not parse" in n for n in result.notes)


def test_the_index_is_cached_as_json_by_content_and_safe_to_delete(tmp_path):
    root = project(
        tmp_path / "p",
        {
            "model.py": NET + "model = Net()\n",
            "demo.py": "import torch\nfrom model import model\nwith torch.no_grad():\n    y = model(x)\n",
        },
    )
    first = found(root, "demo.py")
    (cached,) = (tmp_path / "cache" / "samebits" / "lint").glob("*.json")
    data = json.loads(cached.read_text())
    assert len(data["files"]) == 2 and data["schema"].startswith("samebits-lint-index")
    from samebits.linter import cache

    cache._MEMORY.clear()  # a new process: the summaries come from the file
    assert found(root, "demo.py") == first
    (root / "model.py").write_text(NET + "model = Net()\nmodel.eval()\n")
    assert found(root, "demo.py") == []  # changed content, new summary
    cached.unlink()
    cache._MEMORY.clear()
    assert found(root, "demo.py") == []


def test_the_index_is_bounded(tmp_path, monkeypatch):
    from samebits.linter import engine
    from samebits.linter import project as project_module

    monkeypatch.setattr(project_module, "MAX_FILES", 2)
    monkeypatch.setattr(engine, "MAX_FILES", 2)
    root = project(tmp_path, {f"m{i}.py": "x = 1\n" for i in range(6)})
    result = samebits.lint([root / "m0.py"])
    assert result.files == 1 and any("only the first 2" in n for n in result.notes)


def test_without_a_project_marker_the_paths_given_are_the_project(tmp_path):
    (tmp_path / "model.py").write_text(NET + "model = Net()\n")
    (tmp_path / "demo.py").write_text(
        "import torch\nfrom model import model\nwith torch.no_grad():\n    y = model(x)\n"
    )
    alone = samebits.lint([tmp_path / "demo.py"])
    together = samebits.lint([tmp_path / "demo.py", tmp_path / "model.py"])
    assert [f.code for f in alone] == [] and [f.code for f in together] == ["SB107"]


def test_a_module_level_model_eval_d_by_another_file_that_imports_it(tmp_path):
    root = project(
        tmp_path,
        {
            "model.py": NET + "model = Net()\n",
            "app.py": "from model import model\ndef setup():\n    model.eval()\n",
            "handlers.py": "import torch\nfrom model import model\ndef predict(x):\n    with torch.no_grad():\n        return model(x)\n",
        },
    )
    assert found(root, "handlers.py") == []


def test_the_cli_prints_the_notes_of_files_left_out_of_the_index(tmp_path):
    from samebits.linter.report import to_json, to_text

    root = project(tmp_path, {"broken.py": "def (:\n", "ok.py": "x = 1\n"})
    result = samebits.lint([root / "ok.py"])
    assert "note: " in to_text(result) and "broken.py" in to_text(result)
    assert any("broken.py" in n for n in to_json(result)["notes"])


def test_an_inference_method_that_turns_grad_off_in_another_file(tmp_path):
    root = project(
        tmp_path,
        {
            "sampler.py": """
            import torch
            from torch import nn
            class Sampler(nn.Module):
                def forward(self, x):
                    return x
                @torch.no_grad()
                def sample(self, n):
                    return self(torch.randn(n, 4))
            """,
            "run.py": """
            import torch
            from sampler import Sampler
            s = Sampler()
            s.load_state_dict(torch.load("ema.pt", weights_only=True))
            s.eval()
            images = s.sample(16)
            """,
        },
    )
    assert found(root, "run.py") == []


def test_a_factory_that_builds_from_a_registry_of_model_classes(tmp_path):
    root = project(
        tmp_path,
        {
            "nets/__init__.py": "from .unet import UNet\nfrom .fpn import FPN\nMODELS = {'unet': UNet, 'fpn': FPN}\n"
            "def make(name, **kw):\n    return MODELS[name](**kw)\n",
            "nets/unet.py": NET.replace("class Net", "class UNet"),
            "nets/fpn.py": NET.replace("class Net", "class FPN"),
            "score.py": """
            import torch
            from nets import make
            model = make("unet", classes=3)
            model.load_state_dict(torch.load("w.pt", weights_only=True))
            with torch.no_grad():
                out = model(batch)
            """,
        },
    )
    assert found(root, "score.py") == [("score.py", "SB107", 6)]


def test_a_registry_that_holds_anything_but_model_classes_makes_no_model(tmp_path):
    root = project(
        tmp_path,
        {
            "nets.py": NET + "def adam(p):\n    return p\nREG = {'net': Net, 'opt': adam}\n"
            "def make(name):\n    return REG[name]()\n",
            "score.py": """
            import torch
            from nets import make
            model = make("net")
            with torch.no_grad():
                out = model(batch)
            """,
        },
    )
    assert found(root, "score.py") == []


def test_a_shared_instance_evaluated_where_it_is_made_is_a_model_in_eval_mode(tmp_path):
    # the class's base comes from a library the index cannot see; .eval() on the instance says module
    root = project(
        tmp_path,
        {
            "shared.py": """
            import torch
            from somelib.models import Base
            class Classifier(Base):
                def forward(self, ids):
                    return self.head(ids)
            clf = Classifier()
            clf.load_state_dict(torch.load("best.pt"))
            clf.eval()
            """,
            "check.py": """
            import torch
            from shared import clf as reference
            for ids in batches:
                out = reference(ids)
            """,
        },
    )
    assert found(root, "check.py") == [("check.py", "SB301", 4)]
