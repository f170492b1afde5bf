import getpass
import json
import os
import socket
from importlib import resources

import jsonschema
import pytest

from samebits.fingerprint import BIT_ENV_VARS, Fingerprint
from samebits.fingerprint.diff import bit_relevant_digest

from conftest import run_cli, scrubbed_env


@pytest.fixture(scope="module")
def fp():
    return Fingerprint.capture()


def test_json_round_trip(fp):
    again = Fingerprint.from_json(fp.to_json())
    assert again == fp and again.diff(fp) == []


def test_holds_nothing_private(fp):
    text = fp.to_json()
    for private in {socket.gethostname(), getpass.getuser(), os.path.expanduser("~")} - {"root", "/root", ""}:
        assert private not in text
    assert set(fp.env) <= set(BIT_ENV_VARS)  # only the listed variables, never the whole environment
    assert "PATH" not in fp.env and "HOME" not in fp.env


def test_captures_what_changes_bits(fp):
    import torch

    assert fp.packages["torch"] == torch.__version__
    assert fp.cpu["capability"] == torch.backends.cpu.get_cpu_capability()
    assert fp.threads["intra_op"] == torch.get_num_threads()
    assert fp.flags["torch.get_float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert "torch.use_deterministic_algorithms (enabled, warn_only)" in fp.flags


def test_bit_relevant_env_vars_are_kept(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    monkeypatch.setenv("SOME_SECRET", "x")
    fp = Fingerprint.capture()
    assert fp.env["MKL_CBWR"] == "AVX2" and "SOME_SECRET" not in fp.env


def test_diff_names_fields_with_their_effect(fp):
    data = fp.to_dict()
    data["cpu"] = {
        **data["cpu"],
        "capability": "SVE256",
        "isa": sorted(set(data["cpu"]["isa"]) | {"sve2"}),
    }  # not this machine's
    data["samebits"] = "9.9"
    other = Fingerprint.from_dict(data)
    changes = {c.field: c for c in fp.diff(other)}
    assert set(changes) == {"cpu.capability", "cpu.isa", "samebits"}
    assert changes["cpu.capability"].affects_bits and "pick other" in changes["cpu.capability"].note
    assert "gained sve2" in changes["cpu.isa"].note
    assert not changes["samebits"].affects_bits


def _pinned(fp, **cpu):
    data = fp.to_dict()
    data["cpu"] = {**data["cpu"], "portable": "x86-64-v3", **cpu}
    return Fingerprint.from_dict(data)


def test_under_one_level_the_cpu_model_is_neutral_but_the_vendor_is_not(fp):
    """MKL pins the level's AVX2 branch only on Intel CPUs (oneMKL's CNR docs), so under one level a
    CPU of another vendor keeps GEMM bits only by chance: verify compares by tolerance and says why."""
    intel = _pinned(fp, model="Intel(R) Xeon(R) CPU @ 2.20GHz", vendor="GenuineIntel")
    other_intel = _pinned(fp, model="Intel(R) Core(TM) i7-8700", vendor="GenuineIntel")
    amd = _pinned(fp, model="AMD EPYC 7B12", vendor="AuthenticAMD")
    assert not [c for c in intel.diff(other_intel) if c.affects_bits]
    (vendor,) = [c for c in intel.diff(amd) if c.affects_bits]
    assert vendor.field == "cpu.vendor" and "MKL pins its AVX2 branch only on Intel CPUs" in vendor.note
    old = Fingerprint.from_dict({**amd.to_dict(), "cpu": {k: v for k, v in amd.cpu.items() if k != "vendor"}})
    assert not [c for c in old.diff(amd) if c.affects_bits]  # recorded before the vendor: read from the model
    assert [c.field for c in old.diff(intel) if c.affects_bits] == ["cpu.vendor"]
    digest = lambda f: bit_relevant_digest(f.to_dict())  # noqa: E731
    assert digest(intel) == digest(other_intel) != digest(amd) == digest(old)  # the calibration's key too


def test_openblas_settings_count_only_where_torch_runs_openblas(fp):
    data = fp.to_dict()
    mkl = {**data, "torch_build": {**data["torch_build"], "blas": "mkl"}, "env": {}}
    openblas = {**data, "torch_build": {**data["torch_build"], "blas": "open"}, "env": {}}
    for base, counts in ((mkl, False), (openblas, True)):
        a = Fingerprint.from_dict(base)
        b = Fingerprint.from_dict({**base, "env": {"OPENBLAS_CORETYPE": "Haswell"}})
        (change,) = a.diff(b)
        assert change.field == "env.OPENBLAS_CORETYPE" and change.affects_bits is counts
        assert (bit_relevant_digest(a.to_dict()) != bit_relevant_digest(b.to_dict())) is counts


def test_from_dict_refuses_foreign_or_newer_data(fp):
    with pytest.raises(ValueError, match="no schema_version"):
        Fingerprint.from_dict({"hello": 1})
    with pytest.raises(ValueError, match="newer"):
        Fingerprint.from_dict({**fp.to_dict(), "schema_version": 99})
    broken = fp.to_dict()
    del broken["cpu"]
    with pytest.raises(ValueError, match="lacks the fields cpu"):
        Fingerprint.from_dict(broken)


def _schema(name):
    return json.loads(resources.files("samebits").joinpath(f"schemas/{name}.schema.json").read_text())


def test_env_json_matches_its_schema_and_text_goes_to_stderr():
    result = run_cli("env", "--json", "-")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    jsonschema.validate(data, _schema("fingerprint"))
    assert "samebits environment fingerprint" in result.stderr


def test_env_diff_of_two_files(tmp_path):
    a = tmp_path / "a.json"
    assert run_cli("env", "--json", str(a)).returncode == 0
    same = run_cli("env", "--diff", str(a), str(a))
    assert same.returncode == 0 and "No differences" in same.stdout
    data = json.loads(a.read_text())
    data["threads"]["intra_op"] = 64
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data))
    changed = run_cli("env", "--diff", str(a), str(b), "--json", str(tmp_path / "d.json"))
    assert changed.returncode == 1
    assert "threads.intra_op" in changed.stdout
    report = json.loads((tmp_path / "d.json").read_text())
    jsonschema.validate(report, _schema("env-diff"))
    assert [c["field"] for c in report["changes"]] == ["threads.intra_op"]


def test_env_diff_against_this_machine_sees_a_changed_variable(tmp_path):
    a = tmp_path / "a.json"
    assert run_cli("env", "--json", str(a)).returncode == 0
    result = run_cli("env", "--diff", str(a), env=scrubbed_env(MKL_CBWR="COMPATIBLE"))
    assert result.returncode == 1 and "env.MKL_CBWR" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "does not exist"), ("{not json", "is not JSON"), ('{"a": 1}', "is not a samebits fingerprint")],
)
def test_env_diff_bad_files_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "f.json"
    if content is not None:
        path.write_text(content)
    result = run_cli("env", "--diff", str(path))
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
