"""The portable profile beyond ``samebits run`` (issue #27): the ``machine`` axis, goldens that
verify bit for bit on another CPU of one level, ``--portable`` on the commands, the Predictor's
check, the fingerprint's level and what it neutralises. "Another machine" is this CPU started
with a lower baseline's instruction sets capped (MKL, oneDNN, ATen) and, for the fingerprint,
``$SAMEBITS_CPUINFO`` describing another CPU; tests/data holds a golden from another session's
CPU that every machine the project lands on verifies again."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from samebits.determinism.portable import CODE_PATH_VARS, LEVELS, machines
from samebits.fingerprint import Fingerprint
from samebits.determinism.portable import read_cpuinfo

from conftest import REPO, run_cli, scrubbed_env

HERE = Path(__file__).resolve().parent
MIXED = "tests/portable_models.py:mixed"
DATA_GOLDEN = HERE / "data" / "mixed-x86-64-v3.safetensors"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # how the golden in tests/data was recorded

FLAGS = read_cpuinfo()[1]
needs_avx2 = pytest.mark.skipif(
    not {"avx2", "fma"} <= FLAGS, reason="this CPU cannot run x86-64-v3 (no AVX2/FMA in /proc/cpuinfo)"
)


def other_cpu(
    tmp_path: Path, flags: str, model: str = "x86-64 CPU 7B12 (another machine of this vendor)"
) -> dict[str, str]:
    """A fingerprint's view of another CPU: /proc/cpuinfo with ``flags`` and ``model``."""
    text = Path("/proc/cpuinfo").read_text()
    text = re.sub(r"(?m)^flags\s*:.*$", f"flags\t\t: {flags}", text)
    text = re.sub(r"(?m)^model name\s*:.*$", f"model name\t: {model}", text)
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return {"SAMEBITS_CPUINFO": str(path)}


def an_avx2_machine(tmp_path: Path) -> dict[str, str]:
    """Another machine whose best is AVX2: its cpuinfo, and its libraries' instruction sets."""
    return {**other_cpu(tmp_path, "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma f16c"), **LEVELS["x86-64-v3"].machine}


def check_json(*args: str, model: str = "demo:cnn", env: dict[str, str] | None = None) -> dict:
    result = run_cli("check", model, "--axes", "machine", *args, "--json", "-", env=env, timeout=300)
    assert result.returncode in (0, 1, 2), result.stderr
    return json.loads(result.stdout)


def reached_here(library: str) -> bool:
    """Measured in fresh processes: whether the simulated x86-64-v2 CPU's variables change
    ``library``'s probe on this CPU (MKL caps its instruction sets only on Intel CPUs)."""
    code = "import json; from samebits.measure.code_paths import probe; print(json.dumps(probe()))"
    probes = []
    for env in ({k: "" for k in CODE_PATH_VARS}, LEVELS["x86-64-v2"].machine):
        clean = {k: v for k, v in {**scrubbed_env(), **env}.items() if v != ""}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean, timeout=120)
        probes.append(json.loads(result.stdout)[library])
    return probes[0] != probes[1]


@needs_avx2
def test_the_machine_axis_finds_other_bits_on_other_cpus_and_none_under_the_level():
    """demo:cnn runs oneDNN's convolutions and ATen's kernels, whose caps act on every x86 CPU."""
    native = check_json()
    (axis,) = native["axes"]
    assert axis["verdict"] == "diverged" and axis["runs"] >= 2  # measured: AVX2 and SSE4.2 kernels round differently
    assert axis["origin"]["module"] and axis["origin"]["op"]  # where it starts
    details = axis["details"]
    mkl = reached_here("MKL")
    assert details["portable"] is None
    assert (details["pinned"] or {}).get("verdict") == ("identical" if mkl else None)  # the fix, re-run where it can be
    cost = details["portable_cost"]
    assert cost["level"] == "x86-64-v3" and cost["native_ms"] > 0 and cost["ratio"] > 0
    (cause,) = native["causes"]
    assert cause["code"] == "cpu-code-paths" and cause["verified"] is mkl and "--portable x86-64-v3" in cause["fix"]
    assert f"{cost['ratio']:.2f}x" in cause["evidence"]

    pinned = check_json("--portable", "x86-64-v3")
    (axis,) = pinned["axes"]
    assert pinned["fingerprint"]["cpu"]["portable"] == "x86-64-v3" and not pinned["causes"]
    if reached_here("MKL"):  # Intel: every simulated CPU counts
        assert axis["verdict"] == "identical" and axis["agreed"] == axis["runs"] >= 2
        assert axis["details"]["portable"] == "x86-64-v3"
    else:  # the model's GEMMs (MKL) cannot be simulated here, or this CPU is the level's own baseline
        assert axis["verdict"] == "skipped", axis
        assert any(why in axis["reason"] for why in ("could not simulate an x86-64-v3 CPU", "no x86-64 baseline below"))


@needs_avx2
def test_the_machine_axis_never_counts_a_cpu_it_could_not_simulate():
    """demo:mlp runs MKL alone: where MKL's cap acts (Intel) the simulated CPUs differ from fc1;
    where it cannot (MKL ignores MKL_ENABLE_INSTRUCTIONS on other vendors) the axis says it could
    not simulate them, never that they agree."""
    (axis,) = check_json(model="demo:mlp")["axes"]
    if reached_here("MKL"):
        assert axis["verdict"] == "diverged" and axis["origin"]["module"] == "fc1"
    else:
        assert axis["verdict"] == "skipped" and "could not simulate" in axis["reason"]
        assert "MKL caps its instruction sets only on Intel CPUs" in axis["reason"]


def test_a_simulated_cpu_that_agrees_without_its_variables_reaching_the_model_is_set_aside():
    from samebits.checker.axes.machine import PROBE, set_aside_unsimulated, unsimulated_text
    from samebits.measure.processes import ChildResult
    from samebits.measure.trace import Trace

    same, other = Trace({"<output>": "a"}, []), Trace({"<output>": "b"}, [])
    probe = {"MKL": "m", "oneDNN": "d", "ATen": "a"}
    results = [
        ChildResult("this CPU", same, None, 1.0),
        ChildResult("an x86-64-v3 CPU", same, None, 1.0),  # its MKL probe unchanged, outputs agree
        ChildResult("an x86-64-v2 CPU", other, None, 1.0),  # unchanged too, but outputs differ: real
        ChildResult(PROBE + "this CPU", None, None, 1.0, data=probe),
        ChildResult(PROBE + "an x86-64-v3 CPU", None, None, 1.0, data={**probe, "ATen": "a3"}),
        ChildResult(PROBE + "an x86-64-v2 CPU", None, None, 1.0, data={**probe, "ATen": "a2"}),
    ]
    kept, aside = set_aside_unsimulated(results, ["MKL"])
    assert [r.label for r in kept] == ["this CPU", "an x86-64-v2 CPU"] and aside == {"an x86-64-v3 CPU": ["MKL"]}
    assert "could not simulate an x86-64-v3 CPU: the model runs MKL" in unsimulated_text(aside)
    kept, aside = set_aside_unsimulated(results, ["ATen"])  # the ATen caps acted: every CPU counts
    assert len(kept) == 3 and not aside
    failed = [r if r.label != PROBE + "an x86-64-v3 CPU" else ChildResult(r.label, None, "boom", 1.0) for r in results]
    kept, aside = set_aside_unsimulated(failed, ["ATen"])  # its probe failed: its agreement proves nothing
    assert [r.label for r in kept] == ["this CPU", "an x86-64-v2 CPU"] and list(aside) == ["an x86-64-v3 CPU"]
    assert "an x86-64-v3 CPU: the probe of what its variables reach failed here: boom" in unsimulated_text(aside)
    native_failed = [r if r.label != PROBE + "this CPU" else ChildResult(r.label, None, "boom", 1.0) for r in results]
    kept, aside = set_aside_unsimulated(native_failed, ["ATen"])  # nothing is known of any simulation
    assert [r.label for r in kept] == ["this CPU", "an x86-64-v2 CPU"] and list(aside) == ["an x86-64-v3 CPU"]


@needs_avx2
def test_a_golden_recorded_under_the_level_verifies_exactly_on_another_cpu(tmp_path):
    env = scrubbed_env(**ONE_THREAD)
    pinned, plain = tmp_path / "pinned.safetensors", tmp_path / "plain.safetensors"
    assert run_cli("record", MIXED, "-o", str(pinned), "--portable", "x86-64-v3", env=env, cwd=REPO).returncode == 0
    assert run_cli("record", MIXED, "-o", str(plain), env=env, cwd=REPO).returncode == 0
    from samebits.determinism.portable import cpu_vendor
    from samebits.golden.format import read_golden

    scope = read_golden(pinned).header["bits_hold_on"]  # the level's promise, in the file
    assert f"CPUs of vendor {cpu_vendor()} that run x86-64-v3" in scope and "GEMMs differ across vendors" in scope
    assert "bits_hold_on" not in read_golden(plain).header
    elsewhere = scrubbed_env(**ONE_THREAD, **an_avx2_machine(tmp_path))

    def verify(golden: Path, *args: str) -> dict:
        result = run_cli("verify", str(golden), MIXED, *args, "--json", "-", env=elsewhere, cwd=REPO, timeout=300)
        assert result.returncode in (0, 1), result.stderr
        return {**json.loads(result.stdout), "stderr": result.stderr}

    travelled = verify(pinned)  # verify takes the golden's level by default
    assert "recorded under portable level x86-64-v3" in travelled["stderr"]
    assert (travelled["policy"], travelled["verdict"]) == ("exact", "identical")
    neutral = {c["field"]: c for c in travelled["fingerprint_changes"]}  # cpu.isa too, where this CPU's has more
    assert "cpu.model" in neutral and not any(c["affects_bits"] for c in neutral.values())
    assert "neutralised: both run portable level x86-64-v3" in neutral["cpu.model"]["note"]

    unpinned = verify(plain)  # without the level: another CPU's kernels, compared with tolerances
    assert unpinned["policy"] == "dtype-defaults" and unpinned["verdict"] == "close"
    assert verify(pinned, "--portable", "native")["policy"] == "dtype-defaults"


# Goldens recorded on other CPUs, each with OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 samebits record
# MODEL -o FILE --portable x86-64-v3: an Intel Xeon (AVX-512; tests/data/mixed-...) and an AMD EPYC
# Zen 3 (AVX2, no AVX-512; tests/data/amd-epyc-zen3/, from ../shared/machines/amd-epyc-avx2).
OTHER_CPUS = [
    (DATA_GOLDEN, MIXED),
    *[
        (HERE / "data" / "amd-epyc-zen3" / f"{name}-x86-64-v3.safetensors", model)
        for name, model in (
            ("mixed", MIXED),
            ("demo-mlp", "demo:mlp"),
            ("demo-cnn", "demo:cnn"),
            ("demo-transformer", "demo:transformer"),
        )
    ],
]


@needs_avx2
@pytest.mark.parametrize(
    "golden, model", OTHER_CPUS, ids=lambda v: v.parent.name + "/" + v.name if isinstance(v, Path) else v
)
def test_goldens_recorded_on_other_cpus_verify_exactly_here_within_one_vendor(golden, model):
    """Under the level, a golden of a CPU of this one's vendor verifies bit for bit; one of another
    vendor is compared by tolerance, and verify says why (MKL pins its AVX2 branch only on Intel
    CPUs): measured on the recording Intel and AMD machines and on an AMD Zen 5 (AVX-512)."""
    from samebits.determinism.portable import cpu_vendor
    from samebits.golden.format import read_golden

    result = run_cli("verify", str(golden), model, "--json", "-", env=scrubbed_env(**ONE_THREAD), cwd=REPO)
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    relevant = {c["field"]: c for c in report["fingerprint_changes"] if c["affects_bits"]}
    if set(relevant) - {"cpu.vendor"}:
        pytest.skip(f"this machine differs from the recording in more than the CPU: {', '.join(relevant)}")
    cpu = read_golden(golden).header["fingerprint"]["cpu"]
    recorded = cpu.get("vendor") or cpu_vendor(cpu["model"])
    if recorded == cpu_vendor():
        assert (report["policy"], report["verdict"]) == ("exact", "identical"), report["items"]
    else:
        assert report["policy"] == "dtype-defaults" and report["verdict"] in ("identical", "close"), report["items"]
        assert "MKL pins its AVX2 branch only on Intel CPUs" in relevant["cpu.vendor"]["note"]


def predictions_under(level: str, rows: torch.Tensor, tmp_path: Path) -> torch.Tensor:
    """``predict_one`` of tests/serve_models.py's mlp on each row, by a Predictor in a fresh
    process started under ``level``."""
    code = (
        "import sys, torch, samebits\n"
        "sys.path.insert(0, 'tests')\n"
        "import serve_models\n"
        "model, example = serve_models.mlp()\n"
        "rows = torch.load(sys.argv[1])\n"
        f"with samebits.Predictor(model, example_inputs=example, portable={level!r}) as p:\n"
        "    torch.save(torch.stack([p.predict_one(r) for r in rows]), sys.argv[2])\n"
    )
    torch.save(rows, tmp_path / "rows.pt")
    command = ("--", sys.executable, "-c", code, str(tmp_path / "rows.pt"), str(tmp_path / "want.pt"))
    made = run_cli("run", "--portable", level, *command, cwd=REPO, timeout=300)
    assert made.returncode == 0, made.stderr
    return torch.load(tmp_path / "want.pt")


@needs_avx2
def test_serve_under_the_level_answers_with_the_levels_predictor(tmp_path):
    pytest.importorskip("fastapi", reason="samebits serve needs its extra")
    from test_serve import Server

    rows = torch.randn(5, 32, generator=torch.Generator().manual_seed(3))
    want = predictions_under("x86-64-v3", rows, tmp_path)
    server = Server(f"{HERE / 'serve_models.py'}:mlp", "--portable", "x86-64-v3")
    try:
        status, body = server.infer(rows)
        assert status == 200, body
        out = body["outputs"][0]
        got = torch.tensor(out["data"], dtype=torch.float32).reshape(out["shape"])
        assert torch.equal(got, want)
    finally:
        assert server.stop() == 0


def test_a_running_process_cannot_take_a_level_and_says_why():
    from samebits import Predictor
    from samebits.errors import UserError

    if not {"avx2", "fma"} <= FLAGS:
        pytest.skip("this CPU cannot run x86-64-v3")
    with pytest.raises(
        UserError,
        match=r"cannot be applied in a running process: MKL, oneDNN and ATen read .*samebits run --portable x86-64-v3",
    ):
        Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(2, 4), portable="x86-64-v3")
    with pytest.raises(UserError, match="unknown portable level 'v9'"):
        Predictor(torch.nn.Linear(4, 2), portable="v9")


def test_commands_refuse_a_level_this_cpu_cannot_run_in_one_line(tmp_path):
    env = scrubbed_env(**other_cpu(tmp_path, "fpu sse sse2 ssse3 sse4_1 sse4_2 avx"))
    for command in (("check", "demo:mlp"), ("record", "demo:mlp", "-o", str(tmp_path / "g.safetensors"))):
        result = run_cli(*command, "--portable", "x86-64-v3", env=env)
        assert result.returncode == 2
        assert (
            result.stderr.strip() == "samebits: error: this CPU cannot run portable level x86-64-v3: it lacks avx2, fma"
        )
    assert not (tmp_path / "g.safetensors").exists()


def test_a_command_invoked_in_process_says_it_cannot_start_itself_again():
    from typer.testing import CliRunner

    from samebits.cli.app import app

    if not {"avx2", "fma"} <= FLAGS:
        pytest.skip("this CPU cannot run x86-64-v3")
    result = CliRunner().invoke(app, ["check", "demo:mlp", "--portable", "x86-64-v3"])
    assert result.exit_code != 0
    assert "only the samebits command line can do" in str(result.exception)


def test_the_simulated_machines_are_the_baselines_this_cpu_can_run():
    avx512 = {"sse4_2", "avx2", "fma", "avx512f"}
    labels = [label for label, _ in machines(None, avx512)]
    assert labels == ["this CPU", "an x86-64-v3 CPU", "an x86-64-v2 CPU"]
    (_, mine), (_, v3), (_, v2) = machines(None, avx512)
    assert all(mine[k] == "" for k in CODE_PATH_VARS)  # this CPU: every cap removed
    assert v3["MKL_ENABLE_INSTRUCTIONS"] == "AVX2" and "MKL_CBWR" not in {k for k, v in v3.items() if v}
    avx2 = {"sse4_2", "avx2", "fma"}  # such a CPU is an x86-64-v3 CPU: it is not simulated again
    assert [label for label, _ in machines(None, avx2)] == ["this CPU", "an x86-64-v2 CPU"]
    assert [label for label, _ in machines("x86-64-v3", avx2)] == ["this CPU under x86-64-v3"]
    assert [label for label, _ in machines(None, {"sse4_2"})] == ["this CPU"]
    under = machines("x86-64-v3", avx512)  # only the CPUs that can run it, each running it
    assert [label for label, _ in under] == ["this CPU under x86-64-v3", "an x86-64-v3 CPU under x86-64-v3"]
    assert all(env["MKL_CBWR"] == "AVX2,STRICT" and env["ATEN_CPU_CAPABILITY"] == "avx2" for _, env in under)
    assert under[1][1]["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"  # the other CPU's MKL still capped


def test_the_fingerprint_neutralises_the_cpu_only_when_both_sides_run_one_level():
    from samebits.fingerprint.diff import bit_relevant_digest

    here = Fingerprint.capture().to_dict()
    there = json.loads(json.dumps(here))
    there["cpu"]["isa"], there["cpu"]["model"] = ["avx2", "fma", "sse4_2"], "another CPU"
    for level in (None, "x86-64-v3"):
        a, b = json.loads(json.dumps(here)), json.loads(json.dumps(there))
        a["cpu"]["portable"] = b["cpu"]["portable"] = level
        changes = Fingerprint.from_dict(a).diff(Fingerprint.from_dict(b))
        assert {c.field for c in changes} == {"cpu.isa", "cpu.model"}
        assert all(c.affects_bits is (level is None) for c in changes)
        assert (bit_relevant_digest(a) == bit_relevant_digest(b)) is (level is not None)
    b = json.loads(json.dumps(there))
    b["cpu"]["portable"] = "x86-64-v3"  # one side pinned, the other not: the level itself differs
    changes = Fingerprint.from_dict(here).diff(Fingerprint.from_dict(b))
    assert {c.field for c in changes if c.affects_bits} >= {"cpu.isa", "cpu.portable"}


@needs_avx2
def test_under_a_level_onnxruntime_is_refused_and_the_predictor_runs():
    pytest.importorskip("onnxruntime", reason="the onnxruntime backend needs its extra")
    code = (
        "import torch, samebits\n"
        "from samebits.fingerprint import Fingerprint\n"
        "model, x = torch.nn.Linear(8, 4), torch.randn(4, 8)\n"
        "try:\n"
        "    samebits.Predictor(model, example_inputs=x, backend='onnxruntime')\n"
        "except samebits.UserError as exc:\n"
        "    print('refused:', exc)\n"
        "with samebits.Predictor(model, example_inputs=x, portable='x86-64-v3') as p:\n"
        "    print('level:', p.portable, Fingerprint.capture().cpu['portable'])\n"
    )
    result = run_cli("run", "--portable", "x86-64-v3", "--", sys.executable, "-c", code, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (
        "refused: the onnxruntime backend's CPU kernels pick their instruction sets themselves: portable level x86-64-v3 does not pin them"
        in result.stdout
    )
    assert "level: x86-64-v3 x86-64-v3" in result.stdout


def test_the_machine_axis_skips_a_runtime_whose_kernels_it_cannot_cap():
    from samebits.checker.axes.machine import machine_jobs

    for runtime in ("predictor:onnxruntime", "predictor:auto"):
        jobs, skipped = machine_jobs(None, runtime)
        assert not jobs and skipped is not None and skipped.verdict == "skipped"
        assert "pick their instruction sets themselves" in skipped.reason
    if {"avx2", "fma"} <= FLAGS:
        skipped = machine_jobs("x86-64-v3", "predictor:auto")[1]  # under a level auto leaves onnxruntime out
        assert skipped is None or "pick their instruction sets" not in skipped.reason
        assert len(machine_jobs(None, "predictor:eager")[0]) >= 2


@needs_avx2
def test_verify_recomputes_a_predict_run_under_its_level(tmp_path):
    torch.save(torch.randn(12, 256, generator=torch.Generator().manual_seed(2)), tmp_path / "x.pt")
    out = tmp_path / "out"
    made = run_cli("predict", "demo:mlp", str(tmp_path / "x.pt"), "-o", str(out), "--portable", "x86-64-v3")
    assert made.returncode == 0, made.stderr
    again = run_cli("verify", str(out))  # this process starts natively: verify takes the run's level
    assert again.returncode == 0, again.stdout + again.stderr
    assert "recorded under portable level x86-64-v3" in again.stderr
    native = tmp_path / "native"  # natively: other bits where this CPU's kernels differ from the level's (measured)
    assert (
        run_cli("predict", "demo:mlp", str(tmp_path / "x.pt"), "-o", str(native), "--portable", "native").returncode
        == 0
    )

    def samples(folder: Path) -> list[list[str]]:
        return [s["sample_xxh3_128"] for s in json.loads((folder / "manifest.json").read_text())["shards"]]

    differs = samples(native) != samples(out)
    assert run_cli("verify", str(out), "--portable", "native").returncode == (1 if differs else 0)
