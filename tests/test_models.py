import textwrap

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from samebits.errors import SpecError, UserError
from samebits.models import DEMOS, ModelInputs, load_input_file, load_model, random_inputs, resolve_inputs


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x, scale: float = 1.0):
        return self.fc(x) * scale


def write(tmp_path, name, code):
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


@pytest.fixture
def factory_file(tmp_path):
    return write(
        tmp_path,
        "models.py",
        """
        import torch
        from torch import nn
        from helper import WIDTH  # a sibling module: the file's folder is importable

        def make():
            return nn.Linear(WIDTH, 2), torch.ones(3, WIDTH)

        def bare():
            return nn.Linear(WIDTH, 2)

        def broken():
            raise RuntimeError("weights file missing")

        def wrong():
            return 42

        instance = nn.Linear(WIDTH, 1)
        """,
    )


@pytest.fixture(autouse=True)
def helper_module(tmp_path):
    write(tmp_path, "helper.py", "WIDTH = 4\n")


def test_file_factory_with_example_inputs(factory_file):
    loaded = load_model(f"{factory_file}:make")
    assert loaded.kind == "factory" and loaded.hookable
    assert loaded.example_inputs.call(loaded.model).shape == (3, 2)


def test_factory_without_inputs_and_module_instances(factory_file):
    assert load_model(f"{factory_file}:bare").example_inputs is None
    assert isinstance(load_model(f"{factory_file}:instance").model, nn.Linear)


def test_module_factory(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    write(pkg, "__init__.py", "")
    write(pkg, "net.py", "import torch\ndef build():\n    return torch.nn.ReLU()\n")
    monkeypatch.chdir(tmp_path)
    assert isinstance(load_model("mypkg.net:build").model, nn.ReLU)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{f}:nothere", "has no attribute 'nothere'; callables there: bare, broken, instance, make, wrong"),
        ("{f}:broken", "factory '{f}:broken' raised RuntimeError: weights file missing"),
        ("{f}:wrong", "returned a int; it must return an nn.Module or (module, example_inputs)"),
        ("{d}/missing.py:make", "MODEL file '{d}/missing.py' does not exist"),
        ("no_such_pkg.mod:make", "no module named 'no_such_pkg.mod'"),
        ("justaname", "no ':factory' part"),
        ("demo:nope", "unknown demo model 'nope'; choose one of mlp, cnn, transformer, detector"),
        ("{d}/missing.pt", "does not exist"),
    ],
)
def test_spec_errors_say_what_to_do(factory_file, tmp_path, spec, message):
    spec = spec.format(f=factory_file, d=tmp_path)
    with pytest.raises(SpecError) as info:
        load_model(spec)
    assert message.format(f=factory_file, d=tmp_path) in str(info.value)
    assert "\n" not in str(info.value)


def test_torchscript_file(tmp_path):
    path = tmp_path / "m.pt"
    torch.jit.script(Tiny()).save(str(path))
    loaded = load_model(str(path))
    assert loaded.kind == "torchscript" and not loaded.hookable
    assert loaded.model(torch.ones(1, 4)).shape == (1, 2)


def test_state_dict_and_pickled_module_are_explained(tmp_path):
    sd = tmp_path / "sd.pt"
    torch.save(Tiny().state_dict(), sd)
    with pytest.raises(SpecError, match=r"is a state_dict \(2 tensors\), not a model; pass a factory"):
        load_model(str(sd))
    pickled = tmp_path / "pickled.pt"
    torch.save(Tiny(), pickled)
    with pytest.raises(SpecError, match="pickled object saved with torch.save\\(model\\).*does not unpickle"):
        load_model(str(pickled))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a zip")
    with pytest.raises(SpecError, match="not a TorchScript archive"):
        load_model(str(junk))


def test_exported_program(tmp_path):
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(Tiny(), (torch.ones(2, 4),)), str(path))
    loaded = load_model(str(path))
    assert loaded.kind == "export"
    assert loaded.example_inputs.call(loaded.model).shape == (2, 2)


def test_onnx_file(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    path = tmp_path / "m.onnx"
    model = Tiny().eval()
    torch.onnx.export(model, (torch.ones(2, 4),), str(path), dynamo=True)
    loaded = load_model(str(path))
    assert loaded.kind == "onnx" and not loaded.hookable
    x = torch.randn(2, 4)
    torch.testing.assert_close(loaded.model(x), model(x))


def test_input_files(tmp_path):
    t = torch.arange(6.0).reshape(2, 3)
    torch.save((t, {"k": t}), tmp_path / "a.pt")
    np.save(tmp_path / "b.npy", t.numpy())
    save_file({"1": t + 1, "0": t, "mask": t > 2}, str(tmp_path / "c.safetensors"))
    a = load_input_file(tmp_path / "a.pt")
    assert torch.equal(a.args[0], t) and torch.equal(a.args[1]["k"], t)
    assert torch.equal(load_input_file(tmp_path / "b.npy").args[0], t)
    c = load_input_file(tmp_path / "c.safetensors")
    assert torch.equal(c.args[0], t) and torch.equal(c.args[1], t + 1) and list(c.kwargs) == ["mask"]


def test_input_file_errors(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_input_file(tmp_path / "x.pt")
    (tmp_path / "bad.npy").write_bytes(b"garbage")
    with pytest.raises(SpecError, match="cannot read input file"):
        load_input_file(tmp_path / "bad.npy")
    (tmp_path / "x.txt").write_text("1")
    with pytest.raises(SpecError, match="unknown type; use .pt, .npy or .safetensors"):
        load_input_file(tmp_path / "x.txt")
    torch.save(Tiny(), tmp_path / "module.pt")  # a pickle with code: refused by weights_only
    with pytest.raises(SpecError, match="cannot read input file"):
        load_input_file(tmp_path / "module.pt")


def test_random_inputs_are_seeded_and_typed():
    a = random_inputs(["2,3", "2,5"], ["float32", "int64"], "0,512", seed=1)
    b = random_inputs(["2,3", "2,5"], ["float32", "int64"], "0,512", seed=1)
    assert torch.equal(a.args[0], b.args[0]) and a.args[1].dtype == torch.int64
    assert int(a.args[1].max()) < 512
    assert random_inputs(["4"], ["bool"]).args[0].dtype == torch.bool


@pytest.mark.parametrize(
    ("shapes", "dtypes", "int_range", "message"),
    [
        (["2,x"], None, None, "not a comma-separated list"),
        (["2,-1"], None, None, "sizes >= 0"),
        (["2"], ["complex7"], None, "unknown dtype 'complex7'"),
        (["2", "3"], ["float32", "int64", "int8"], None, "one --dtype for all shapes"),
        (["2"], ["int64"], "5,1", "HIGH must be greater"),
        (["2"], ["int64"], "a", "must be LOW,HIGH"),
    ],
)
def test_random_input_errors(shapes, dtypes, int_range, message):
    with pytest.raises(UserError, match=message):
        random_inputs(shapes, dtypes, int_range)


def test_resolve_inputs_precedence(factory_file, tmp_path):
    loaded = load_model(f"{factory_file}:make")
    assert resolve_inputs(loaded) is loaded.example_inputs
    assert resolve_inputs(loaded, input_shapes=["1,4"]).args[0].shape == (1, 4)
    with pytest.raises(UserError, match="not both"):
        resolve_inputs(loaded, input_file="x.pt", input_shapes=["1"])
    with pytest.raises(UserError, match="comes with no example inputs"):
        resolve_inputs(load_model(f"{factory_file}:bare"))


def test_inputs_follow_torch_export_convention():
    assert ModelInputs.from_example((1, 2)).args == (1, 2)
    assert ModelInputs.from_example({"x": 1}).kwargs == {"x": 1}
    t = torch.ones(1)
    assert ModelInputs.from_example(t).args == (t,)
    assert ModelInputs.from_example([t]).args == ([t],)


@pytest.mark.parametrize("name", list(DEMOS))
def test_demos_are_seeded_and_run(name):
    a, b = load_model(f"demo:{name}"), load_model(f"demo:{name}")
    assert not a.model.training
    with torch.inference_mode():
        out_a, out_b = a.example_inputs.call(a.model), b.example_inputs.call(b.model)
    from samebits.tensors import compare

    assert compare(out_a, out_b).identical


def test_demo_detector_box_count_depends_on_threshold():
    loaded = load_model("demo:detector")
    with torch.inference_mode():
        counts = [len(o["boxes"]) for o in loaded.example_inputs.call(loaded.model)]
        loaded.model.threshold += 0.01
        fewer = [len(o["boxes"]) for o in loaded.example_inputs.call(loaded.model)]
    assert all(c > 0 for c in counts) and sum(fewer) < sum(counts)


def test_demo_names_in_cli_help_match_the_registry():
    from samebits.cli.demo import DEMO_NAMES

    assert DEMO_NAMES == tuple(DEMOS)


def test_a_pt2_whose_outputs_need_their_class_code_gets_the_advice_that_works(tmp_path):
    """A program returning a registered dataclass (a transformers ModelOutput) loads only where
    that class's code is imported: it is a program, the message names the class and says what
    to export instead ("not a torch.export program ... save one with torch.export.save" was wrong)."""
    from conftest import run_cli, run_python

    path = tmp_path / "out.pt2"
    made = run_python(
        textwrap.dedent(f"""
        import dataclasses, torch
        import torch.utils._pytree as pytree

        @dataclasses.dataclass
        class Out:
            a: torch.Tensor
            b: torch.Tensor

        pytree.register_dataclass(Out, serialized_type_name="mypkg.Out")

        class M(torch.nn.Module):
            def forward(self, x):
                return Out(x + 1, x * 2)

        torch.export.save(torch.export.export(M(), (torch.randn(2, 3),)), {str(path)!r})
        """)
    )
    assert made.returncode == 0, made.stderr
    result = run_cli("check", str(path), "--axes", "repeat")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "is a torch.export program whose inputs or outputs hold a mypkg.Out" in line
    assert "export a wrapper whose forward takes and returns tensors" in line
