"""The contract, class 'code execution': nothing samebits reads (a .pt2 archive, a golden, a
predict manifest, a cache entry) makes it run code."""

from __future__ import annotations

import io
import json
import pickle
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import torch

import samebits
from samebits.runtime.cache import CacheError

from conftest import run_cli, scrubbed_env
from contract import MODELS, Evil, one_error, rewrite, snapshot


@pytest.fixture(scope="module")
def pt2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pt2") / "linear.pt2"
    torch.manual_seed(0)
    batch = {"input": {0: torch.export.Dim("batch")}}
    torch.export.save(torch.export.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),), dynamic_shapes=batch), str(path))
    return path


def craft(src: Path, dst: Path, edit) -> Path:
    """A copy of the archive ``src`` with entries changed by ``edit(name, data) -> data | None``
    (``None`` drops the entry) and extra entries from ``edit.extra``."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
        root = a.namelist()[0].split("/")[0]
        for info in a.infolist():
            data = edit(info.filename[len(root) + 1 :], a.read(info.filename))
            if data is not None:
                b.writestr(info, data)
        for name, data in getattr(edit, "extra", {}).items():
            b.writestr(f"{root}/{name}", data)
    return dst


def _pickled_weight(marker: Path):
    def edit(name, data):
        if name.endswith("weights_config.json"):
            config = json.loads(data)
            config["config"]["weight"]["use_pickle"] = True
            return json.dumps(config).encode()
        if name == "data/weights/weight_0":
            return pickle.dumps(Evil(marker))
        return data

    return edit


def _opaque_constant(marker: Path):
    def edit(name, data):
        if name.endswith("constants_config.json"):
            return json.dumps(
                {"config": {"c": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": False}}}
            ).encode()
        return data

    edit.extra = {"data/constants/opaque_obj_0": pickle.dumps(Evil(marker))}
    return edit


def _legacy_weights(marker: Path):
    edit = lambda name, data: data  # noqa: E731
    edit.extra = {"data/weights/model.pt": pickle.dumps(Evil(marker))}
    return edit


def _pickled_sample_inputs(marker: Path):
    def edit(name, data):
        if name.startswith("data/sample_inputs/"):
            buf = io.BytesIO()
            torch.save(Evil(marker), buf)
            return buf.getvalue()
        return data

    return edit


def _aoti(marker: Path):
    edit = lambda name, data: data  # noqa: E731
    edit.extra = {"data/aotinductor/model/model.so": b"\x7fELF"}
    return edit


CRAFTED = {
    "weights marked use_pickle": (_pickled_weight, "marks 'weight' as pickled (use_pickle)"),
    "opaque pickled constant": (_opaque_constant, "as a pickled object (opaque_obj_0)"),
    "legacy pickled weights": (_legacy_weights, "is a legacy pickled weights file"),
    "sample inputs needing pickle": (_pickled_sample_inputs, "only load with weights_only=False"),
    "compiled AOTInductor code": (_aoti, "holds compiled code"),
}


def records(src: Path) -> tuple[str, list[tuple[str, bytes]]]:
    """The archive's root folder and its entries in order, names relative to the root."""
    with zipfile.ZipFile(src) as a:
        root = a.namelist()[0].split("/")[0]
        return root, [(i.filename[len(root) + 1 :], a.read(i.filename)) for i in a.infolist()]


def write_archive(dst: Path, root: str, entries: list[tuple[str, bytes]]) -> Path:
    """A zip of ``entries`` under ``root`` (duplicates kept); a name starting with ``/`` goes at
    the zip's top level, outside the root folder."""
    import warnings

    with warnings.catch_warnings(), zipfile.ZipFile(dst, "w") as z:
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names: that is the point
        for name, data in entries:
            z.writestr(name[1:] if name.startswith("/") else f"{root}/{name}", data)
    return dst


def pickled(marker: Path) -> bytes:
    return pickle.dumps(Evil(marker))


# A payload config whose one weight is pickled (every field the loader's dataclass requires).
PICKLED_CONFIG = {
    "config": {"weight": {"path_name": "weight_evil", "is_param": True, "use_pickle": True, "tensor_meta": None}}
}


def second_program(entries: list[tuple[str, bytes]], entry: str, marker: Path) -> list[tuple[str, bytes]]:
    """``entries`` plus a program read from ``entry`` (torch names it by cutting off ``models/``
    and the last five characters), whose weight is pickled."""
    name = entry[len("models/") : -len(".json")]
    data = dict(entries)
    config = PICKLED_CONFIG
    return entries + [
        (entry, data.get("models/model.json", b"{}")),
        (f"data/sample_inputs/{name}.pt", data.get("data/sample_inputs/model.pt", b"")),
        (f"data/weights/{name}_weights_config.json", json.dumps(config).encode()),
        (f"data/constants/{name}_constants_config.json", b'{"config": {}}'),
        ("data/weights/weight_evil", pickled(marker)),
    ]


def legacy_fallback(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """Entries of the pre-2.6 format at the zip's top level: ``torch.export.load`` falls back to
    reading them (and unpickling) when the pt2 reader fails on the archive."""
    from torch._export.serde.schema import SCHEMA_VERSION

    data = dict(entries)
    return entries + [
        ("/version", ".".join(map(str, SCHEMA_VERSION)).encode()),
        ("/serialized_exported_program.json", data.get("models/model.json", b"{}")),
        ("/serialized_state_dict.pt", pickled(marker)),
        ("/serialized_constants.pt", pickled(marker)),
        ("/serialized_example_inputs.pt", pickled(marker)),
    ]


def duplicate_config(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """A second weights config of the same name marking the weight pickled: zip readers differ
    on which copy they read."""
    config = PICKLED_CONFIG
    return entries + [
        ("data/weights/model_weights_config.json", json.dumps(config).encode()),
        ("data/weights/weight_evil", pickled(marker)),
    ]


def graph_calling(entries: list[tuple[str, bytes]], target: str, marker: Path) -> list[tuple[str, bytes]]:
    """The program's graph with a first node that calls ``target`` on a string."""
    try:
        program = json.loads(dict(entries)["models/model.json"])
        program["graph_module"]["graph"]["nodes"]
    except (KeyError, TypeError, ValueError):  # an earlier edit dropped or replaced the program
        return entries
    program["graph_module"]["graph"]["nodes"].insert(
        0,
        {
            "target": target,
            "inputs": [{"name": "command", "arg": {"as_string": f"touch {marker}"}, "kind": 1}],
            "outputs": [{"as_none": True}],
            "metadata": {},
        },
    )
    return [(n, json.dumps(program).encode() if n == "models/model.json" else d) for n, d in entries]


def shape_running(entries: list[tuple[str, bytes]], marker: Path) -> list[tuple[str, bytes]]:
    """A symbolic size expression with Python in front: the loader hands it to sympy.sympify."""
    payload = f"__import__('os').system('touch {marker}') or Symbol('s".encode()
    return [(n, d.replace(b"\"Symbol('s", b'"' + payload) if n == "models/model.json" else d) for n, d in entries]


EVASIONS = {
    "a second program whose name does not end in .json": (
        lambda e, mk: second_program(e, "models/evil.bin!!", mk),
        "is read as a program but is not named like one",
    ),
    "a second program named like the first": (
        lambda e, mk: second_program(e, "models/second.json", mk),
        "as pickled (use_pickle)",
    ),
    "the older format at the zip's top level": (legacy_fallback, "file in archive is not in a subdirectory"),
    "a weights config written twice": (duplicate_config, "appears twice"),
    "a shape expression sympy runs": (shape_running, "holds a shape expression that is not arithmetic"),
    "a graph that calls os.system": (
        lambda e, mk: graph_calling(e, "torch.os.system", mk),
        "is not an allowed operator type",
    ),
}


def evasion(pt2: Path, tmp_path: Path, case: str) -> tuple[Path, Path, str]:
    make, fragment = EVASIONS[case]
    marker = tmp_path / "ran"
    root, entries = records(pt2)
    return write_archive(tmp_path / "evil.pt2", root, make(entries, marker)), marker, fragment


def torch_export_load(path: Path) -> None:
    """``torch.export.load(path)`` in a fresh interpreter (whatever it raises)."""
    subprocess.run(
        [sys.executable, "-c", f"import torch; torch.export.load({str(path)!r})"],
        capture_output=True,
        timeout=120,
        env=scrubbed_env(),
    )


def test_a_crafted_pt2_really_runs_code_in_torch_export_load(tmp_path, pt2):
    """The threat is real: torch.export.load alone unpickles the crafted entry."""
    marker = tmp_path / "ran"
    evil = craft(pt2, tmp_path / "evil.pt2", _pickled_weight(marker))
    torch_export_load(evil)
    assert marker.exists()


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_pt2_model_is_refused_and_runs_nothing(tmp_path, pt2, case):
    make, fragment = CRAFTED[case]
    marker = tmp_path / "ran"
    evil = craft(pt2, tmp_path / "evil.pt2", make(marker))
    before = snapshot(tmp_path)
    one_error(run_cli("check", str(evil)), fragment)
    assert not marker.exists() and snapshot(tmp_path) == before


@pytest.mark.parametrize("case", [c for c in EVASIONS if c != "a graph that calls os.system"])
def test_each_evasion_really_runs_code_in_torch_export_load(tmp_path, pt2, case):
    """The evasions the scan used to miss are real: torch.export.load alone runs the payload."""
    evil, marker, _ = evasion(pt2, tmp_path, case)
    torch_export_load(evil)
    assert marker.exists()


@pytest.mark.parametrize("case", list(EVASIONS))
def test_an_evasion_is_refused_and_runs_nothing(tmp_path, pt2, case):
    from samebits.models.pt2_archive import load_exported

    evil, marker, fragment = evasion(pt2, tmp_path, case)
    with pytest.raises(samebits.UserError, match=re.escape(fragment)):
        load_exported(evil)
    assert not marker.exists()


def test_a_clean_archive_loads_as_torch_export_load_does(tmp_path, pt2):
    from samebits.models.pt2_archive import load_exported

    root, entries = records(pt2)
    copy = write_archive(tmp_path / "copy.pt2", root, entries)
    x = torch.randn(5, 3)
    assert torch.equal(load_exported(copy).module()(x), torch.export.load(str(pt2)).module()(x))


def test_a_zip_that_is_not_a_pt2_is_one_line(tmp_path):
    bad = tmp_path / "x.pt2"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("x/hello.txt", "hi")
    one_error(run_cli("check", str(bad)), "not a torch.export program")


@pytest.mark.parametrize("stored", ["os:abort", "subprocess:call", f"{MODELS}:hang", "model.pt"])
def test_a_golden_never_chooses_code_to_run(tmp_path, golden, stored):
    g = rewrite(golden, tmp_path / "g.safetensors", edit_header=lambda h: h.update(model=stored))
    before = snapshot(tmp_path)
    one_error(run_cli("verify", str(g)), "which is code; a golden never chooses code to run")
    assert snapshot(tmp_path) == before


def test_a_golden_naming_a_crafted_pt2_runs_nothing(tmp_path, golden, pt2):
    marker = tmp_path / "ran"
    craft(pt2, tmp_path / "evil.pt2", _pickled_weight(marker))
    g = rewrite(golden, tmp_path / "g.safetensors", edit_header=lambda h: h.update(model="evil.pt2"))
    one_error(run_cli("verify", str(g)), "is refused")
    assert not marker.exists()


def test_a_file_planted_in_the_cache_is_rebuilt_not_run(tmp_path):
    cache = tmp_path / "cache"
    model, x = torch.nn.Linear(4, 2), torch.randn(4, 4)
    with samebits.Predictor(model, example_inputs=x, backend="export", cache_dir=cache, tile=4):
        pass
    (artifact,) = cache.glob("export-*.pt2")
    marker = tmp_path / "ran"
    craft(Path(shutil.copy(artifact, tmp_path / "orig.pt2")), artifact, _pickled_weight(marker))
    with pytest.warns(UserWarning, match="did not match the digest recorded at build"):
        with samebits.Predictor(model, example_inputs=x, backend="export", cache_dir=cache, tile=4) as p:
            assert p.artifacts[4].built_here is True
    assert not marker.exists()


@pytest.mark.parametrize("backend", ["torchscript", "export"])  # a .pt2's graph and shapes are loaded as a program
def test_code_is_not_loaded_from_a_cache_others_can_write(tmp_path, backend):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(CacheError, match="writable by others .*does not load code from it"):
        samebits.Predictor(
            torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), backend=backend, cache_dir=cache, tile=4
        )


def _mutations(marker: Path) -> dict[str, object]:
    """Edits of an archive's entry list, harmless and hostile, for the property test."""

    def rename(entries, i, suffix):
        name, data = entries[i % len(entries)]
        return entries[: i % len(entries)] + [(name + suffix, data)] + entries[i % len(entries) + 1 :]

    def drop(entries, i, _):
        return entries[: i % len(entries)] + entries[i % len(entries) + 1 :]

    def extra(entries, i, suffix):
        return entries + [(f"{['models/', 'data/weights/', 'data/constants/', 'extra/', ''][i % 5]}x{suffix}", b"{}")]

    def pickle_entry(entries, i, _):
        name, _ = entries[i % len(entries)]
        return entries + [(name, pickled(marker))]

    return {
        "second program": lambda e, i, s: second_program(e, f"models/p{s}json"[: 9 + i % 6] or "models/p", marker),
        "legacy fallback": lambda e, i, s: legacy_fallback(e, marker),
        "duplicate config": lambda e, i, s: duplicate_config(e, marker),
        "graph target": lambda e, i, s: graph_calling(
            e, ["torch.os.system", "torch.load", "_operator.call"][i % 3], marker
        ),
        "legacy weights": lambda e, i, s: e + [("data/weights/model.pt", pickled(marker))],
        "opaque constant": lambda e, i, s: e + [("data/constants/opaque_obj_0", pickled(marker))],
        "aoti": lambda e, i, s: e + [(f"data/aotinductor/model{s}/x.so", b"\x7fELF")],
        "rename": rename,
        "drop": drop,
        "extra": extra,
        "pickle over an entry": pickle_entry,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(sorted(_mutations(Path("x")))),
            st.integers(0, 50),
            st.text(alphabet="._/-jsonx", max_size=6),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_no_archive_built_from_these_edits_runs_code(tmp_path, pt2, steps):
    """Whatever is added, renamed, dropped, duplicated or pickled, loading either refuses in
    one line or gives a program, and no payload runs."""
    from samebits.models.pt2_archive import load_exported

    marker = tmp_path / "ran"
    marker.unlink(missing_ok=True)
    mutations = _mutations(marker)
    root, entries = records(pt2)
    for name, i, suffix in steps:
        entries = mutations[name](entries, i, suffix)
    evil = write_archive(tmp_path / "evil.pt2", root, entries)
    try:
        load_exported(evil)
    except samebits.UserError as exc:
        assert "\n" not in str(exc)
    assert not marker.exists()


def test_verify_of_a_predict_folder_naming_a_crafted_pt2_runs_nothing(tmp_path, pt2):
    import numpy as np

    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((4, 3)).astype("float32"))
    out = tmp_path / "out"
    run = run_cli("predict", str(pt2), str(tmp_path / "x.npy"), "-o", str(out))
    assert run.returncode == 0, run.stderr
    evil, marker, _ = evasion(pt2, tmp_path, "a second program whose name does not end in .json")
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "model": str(evil)}))
    one_error(run_cli("verify", str(out)), "is read as a program but is not named like one")
    assert not marker.exists()
