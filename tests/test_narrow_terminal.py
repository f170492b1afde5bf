"""At 80 columns every table keeps every value: env, `--help` of every command (bench, check and
doctor are held to it in tests/test_report.py and tests/test_timing.py)."""

import json
import re

import pytest

from conftest import run_cli, scrubbed_env

NARROW = scrubbed_env(COLUMNS="80")
COMMANDS = [
    "check",
    "doctor",
    "bench",
    "record",
    "verify",
    "predict",
    "serve",
    "probe",
    "env",
    "lint",
    "run",
    "report",
    "demo",
]


def column(text: str, header: str, until: str | None = None) -> str:
    """Everything printed under ``header`` (a left-aligned column, up to the column headed
    ``until`` or the table's edge), whitespace removed: a folded or wrapped value reads whole."""
    lines = text.splitlines()
    (top,) = [i for i, line in enumerate(lines) if re.match(r"\s*field\s+value\s*$", line)]
    start, end = lines[top].index(header), lines[top].index(until) if until else None
    return "".join(line[start:end].strip() for line in lines[top + 1 :]).replace(" ", "")


def test_env_keeps_every_field_and_value_whole_at_80_columns(tmp_path):
    fingerprint = tmp_path / "fp.json"
    result = run_cli("env", "--json", str(fingerprint), env=NARROW)
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    from samebits.fingerprint.diff import flatten_fields

    fields = {k: v for k, v in flatten_fields(json.loads(fingerprint.read_text())).items() if k != "schema_version"}
    fields.pop("kind", None)
    names, values = column(result.stdout, "field", until="value"), column(result.stdout, "value")
    for name, value in fields.items():
        assert name.replace(" ", "") in names, name  # not "flags.torch.backends.cuda.matmul.allo…"
        shown = value if isinstance(value, str) else json.dumps(value)
        assert shown.replace(" ", "") in values, (name, shown)
    assert "…" not in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_cuts_nothing_at_80_columns(command):
    result = run_cli(command, "--help", env=NARROW)
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout, [line for line in result.stdout.splitlines() if "…" in line]
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_verify_of_a_changed_model_keeps_every_name_at_80_columns(tmp_path):
    golden = tmp_path / "g.safetensors"
    assert run_cli("record", "demo:transformer", "-o", str(golden), env=NARROW).returncode == 0
    factory = tmp_path / "nudged.py"
    factory.write_text(
        "import torch\n"
        "from samebits.models.demos import transformer\n"
        "def build():\n"
        "    model, x = transformer()\n"
        "    with torch.no_grad():\n"
        "        next(model.parameters()).add_(1e-3)\n"
        "    return model, x\n"
    )
    result = run_cli("verify", str(golden), f"{factory}:build", "--json", str(tmp_path / "v.json"), env=NARROW)
    assert result.returncode == 1, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    data = json.loads((tmp_path / "v.json").read_text())
    shown = set(result.stdout.split())
    assert all((item["path"] or "<output>") in shown for item in data["items"])
    assert "…" not in result.stdout and "the weights changed since recording" in " ".join(result.stdout.split())


DEEP = """
import torch
from torch import nn

class SizeShift(nn.Module):
    def forward(self, x):
        return x + x.shape[0] * 1e-3  # other bits at every batch size, on any CPU

def nest(names):
    inner = SizeShift()
    for name in reversed(names):
        outer = nn.Module()
        outer.add_module(name, inner)
        outer.forward = lambda x, m=inner: m(x)
        inner = outer
    return inner

class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder_stack_of_layers = nest(["transformer_block_zero", "self_attention_projection"])

    def forward(self, x):
        return self.encoder_stack_of_layers(x)

def build():
    return Deep(), torch.randn(4, 8)
"""


def test_a_deep_module_name_breaks_after_a_dot_at_80_columns(tmp_path):
    (tmp_path / "deep.py").write_text(DEEP)
    report = tmp_path / "r.json"
    result = run_cli("check", f"{tmp_path / 'deep.py'}:build", "--axes", "batch", "--json", str(report), env=NARROW)
    assert result.returncode == 1, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    (batch,) = [a for a in json.loads(report.read_text())["axes"] if a["axis"] == "batch"]
    growth = [g["module"] for g in batch["origin"]["growth"]]
    deepest = max(growth, key=len)
    assert len(deepest) > 40, growth  # too long for the module column at 80 columns
    for part in deepest.split("."):  # folded mid-word, a part would be cut across two lines
        assert part in result.stdout, (part, result.stdout)
