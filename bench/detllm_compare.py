"""detllm (PyPI ``detllm``, an LLM determinism checker) and ``samebits check --generate`` side by
side, on the same model and prompts (issue #17): what each checks, its verdict, where it says the
outputs part, its exit code and its wall-clock seconds.

Run (from the repository root, with the project's venv active):
    python bench/detllm_compare.py [--detllm /tmp/detvenv/bin/detllm] [--new 16] [--runs 3] [--keep]

detllm lives in its own venv (``python3 -m venv /tmp/detvenv && /tmp/detvenv/bin/pip install
-c constraints.txt 'detllm[hf]' tokenizers``): it is called as a command, never imported.

The model is ``gpt2_twins`` of tests/real_models.py (random weights, every token with a twin a hair
behind it, built so that its four prompts part under batching), saved with ``save_pretrained``
into a temporary folder with a local word-level tokenizer ("t0".."t511", one word per id, pad and
EOS id 0, left padding), so that the text prompt "t5 t77 t300" encodes to exactly ids 5, 77, 300.
Nothing is downloaded. detllm reads the four prompts as text from a JSONL file; samebits loads a
factory written next to the model that returns the same prompts as ids, left-padded.

Besides what detllm reports, the script reads detllm's own trace files (the generated ids of every
run) and finds where each prompt's batched generation parts from its run alone: what detllm's data
holds, next to what its report says.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import real_models  # noqa: E402

VOCAB = 512

FACTORY = '''"""Written by bench/detllm_compare.py: the saved gpt2_twins and its four prompts, left-padded."""

import torch
from transformers import AutoModelForCausalLM

MODEL_DIR = {model_dir!r}
PROMPTS = {prompts!r}


def model():
    m = AutoModelForCausalLM.from_pretrained(MODEL_DIR).eval()
    width = max(len(p) for p in PROMPTS)
    ids = torch.zeros((len(PROMPTS), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(PROMPTS):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    return m, {{"input_ids": ids, "attention_mask": mask}}
'''


def save_model(model_dir: Path) -> list[list[int]]:
    """gpt2_twins and a local tokenizer into ``model_dir``; its prompts as lists of ids."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    model, inputs = real_models.gpt2_twins()
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    prompts = [ids[i][mask[i].bool()].tolist() for i in range(ids.shape[0])]
    model.save_pretrained(model_dir)
    tok = Tokenizer(WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="t0", pad_token="t0", padding_side="left")
    fast.save_pretrained(model_dir)

    # The saved copy is the model, bit for bit, and the text prompts encode to the prompts' ids.
    loaded = AutoModelForCausalLM.from_pretrained(model_dir)
    saved = loaded.state_dict()
    for name, tensor in model.state_dict().items():
        if not torch.equal(saved[name], tensor):
            raise SystemExit(f"the saved model's {name} differs from gpt2_twins'")
    back = AutoTokenizer.from_pretrained(model_dir)
    for p in prompts:
        got = back(text(p))["input_ids"]
        if got != p:
            raise SystemExit(f"the tokenizer encodes {text(p)!r} to {got}, not {p}")
    return prompts


def text(prompt: list[int]) -> str:
    return " ".join(f"t{i}" for i in prompt)


def timed(cmd: list[str], cwd: Path) -> tuple[int, str, str, float]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trace_partings(alone: list[dict], other: list[dict], order=None) -> list[str]:
    """Where each prompt's new tokens in ``other`` first differ from ``alone`` (detllm's traces:
    ``generated_token_ids`` is the whole padded sequence, prompt included)."""
    found = []
    for i, (a, b) in enumerate(zip(alone, other)):
        new_a = a["generated_token_ids"][len(a["input_token_ids"]) :]
        new_b = b["generated_token_ids"][len(b["input_token_ids"]) :]
        step = next((s for s, (x, y) in enumerate(zip(new_a, new_b)) if x != y), None)
        if step is None and len(new_a) != len(new_b):
            step = min(len(new_a), len(new_b))
        if step is not None:
            x = new_a[step] if step < len(new_a) else None
            y = new_b[step] if step < len(new_b) else None
            found.append(f"prompt {order[i] if order else i} step {step} ({x} vs {y})")
    return found


def short(value):
    """The report's divergence with its sha256 hashes cut to 12 characters, for the table."""
    if isinstance(value, dict):
        return {
            k: (v[:12] + "..." if k.endswith("_hash") and isinstance(v, str) else short(v)) for k, v in value.items()
        }
    return value


def logprob_gaps(alone: list[dict], other: list[dict], order=None) -> list[str]:
    """Per prompt, the largest gap between detllm's tier-2 logprobs of ``alone`` and ``other`` over
    the steps before the tokens first differ (the same token chosen at the same step)."""
    found = []
    for i, (a, b) in enumerate(zip(alone, other)):
        if not a.get("scores") or not b.get("scores"):
            continue
        new_a = a["generated_token_ids"][len(a["input_token_ids"]) :]
        new_b = b["generated_token_ids"][len(b["input_token_ids"]) :]
        gaps = []
        for x, y, la, lb in zip(new_a, new_b, a["scores"], b["scores"]):
            if x != y:
                break
            gaps.append(abs(la - lb))
        if gaps:
            found.append(f"prompt {order[i] if order else i}: {max(gaps):.3g} over {len(gaps)} equal tokens")
    return found


def run_detllm(exe: str, model_dir: Path, prompt_file: Path, work: Path, tier: int, args, order=None) -> dict:
    """``detllm check`` at ``tier``; ``order``: the original index of each line of ``prompt_file``."""
    label = f", prompt file in order {order}" if order else ""
    out = work / f"detllm_{len(list(work.glob('detllm_*')))}_tier{tier}"
    cmd = [
        exe,
        "check",
        "--backend",
        "hf",
        "--model",
        str(model_dir),
        "--prompt-file",
        str(prompt_file),
        "--tier",
        str(tier),
        "--runs",
        str(args.runs),
        "--batch-size",
        "1",
        "--vary-batch",
        "1,4",
        "--max-new-tokens",
        str(args.new),
        "--out",
        str(out),
    ]
    rc, stdout, stderr, seconds = timed(cmd, work)
    row = {"tool": f"detllm tier {tier}{label}", "rc": rc, "seconds": seconds, "stdout": stdout, "stderr": stderr}
    row["checked"] = f"{args.runs} runs at batch 1; batch 1,4 vs run 0" + (", logprobs" if tier >= 2 else "")
    report_path = out / "report.json"
    if not report_path.exists():
        row.update(verdict="no report.json", where="-", report_txt="")
        return row
    report = json.loads(report_path.read_text())
    details = report.get("details", {})
    row["verdict"] = f"{report['status']} {report['category']}"
    row["where"] = json.dumps(short(details.get("batch_divergence") or details.get("first_divergence")))
    row["report_txt"] = (out / "report.txt").read_text()
    traces = out / "traces"
    run0 = read_jsonl(traces / "run_0.jsonl")
    row["trace_partings"] = {
        name.stem: trace_partings(run0, read_jsonl(name), order)
        for name in sorted(traces.glob("*.jsonl"))
        if name.stem != "run_0"
    }
    if tier >= 2 and (traces / "batch_4.jsonl").exists():
        row["logprob_gaps"] = logprob_gaps(run0, read_jsonl(traces / "batch_4.jsonl"), order)
    return row


def run_samebits(spec: str, work: Path, axes: str | None, args) -> dict:
    out_json = work / f"samebits_{axes or 'default'}.json"
    cmd = [sys.executable, "-m", "samebits", "check", spec, "--generate", str(args.new), "--json", str(out_json)]
    if axes:
        cmd += ["--axes", axes]
    rc, stdout, stderr, seconds = timed(cmd, ROOT)
    row = {"tool": "samebits --generate" + (f" --axes {axes}" if axes else ""), "rc": rc, "seconds": seconds}
    row.update(stdout=stdout, stderr=stderr)
    if not out_json.exists():
        row.update(checked=axes or "default axes", verdict="no JSON", where="-")
        return row
    data = json.loads(out_json.read_text())
    row["checked"] = ",".join(a["axis"] for a in data["axes"])
    row["verdict"] = "; ".join(f"{a['axis']}: tokens {a['tokens']}, scores {a['scores']}" for a in data["axes"])
    partings = [
        f"{a['axis']}: prompt {p['prompt']} step {p['step']} ({p['reference_token']} vs {p['other_token']}, "
        f"margin {p['margin']:.2g})"
        for a in data["axes"]
        for p in a["parted"]
    ]
    row["where"] = "; ".join(partings) or "-"
    row["headline"] = data.get("headline", "")
    row["score_differences"] = {
        a["axis"]: a["first_score_difference"] for a in data["axes"] if a.get("first_score_difference")
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detllm", default="/tmp/detvenv/bin/detllm", help="the detllm command (its own venv)")
    parser.add_argument("--new", type=int, default=16, help="new tokens per prompt")
    parser.add_argument("--runs", type=int, default=3, help="detllm --runs")
    parser.add_argument("--tiers", default="1,2", help="detllm tiers to run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = parser.parse_args()
    if not Path(args.detllm).exists() and shutil.which(args.detllm) is None:
        raise SystemExit(f"no detllm at {args.detllm} (see the module docstring to install it)")

    work = Path(tempfile.mkdtemp(prefix="detllm_compare_"))
    try:
        model_dir = work / "gpt2_twins"
        prompts = save_model(model_dir)
        prompt_file = work / "prompts.jsonl"
        prompt_file.write_text("".join(json.dumps({"prompt": text(p)}) + "\n" for p in prompts))
        # The same prompts with the longest (never padded in a batch) first: detllm's diff stops at
        # the first row that differs, and a padded row differs in its input ids before its tokens.
        longest = max(range(len(prompts)), key=lambda i: len(prompts[i]))
        order = [longest] + [i for i in range(len(prompts)) if i != longest]
        reordered = work / "prompts_longest_first.jsonl"
        reordered.write_text("".join(json.dumps({"prompt": text(prompts[i])}) + "\n" for i in order))
        factory = work / "factory.py"
        factory.write_text(FACTORY.format(model_dir=str(model_dir), prompts=prompts))
        print(f"model: gpt2_twins saved in {model_dir}; prompts of {[len(p) for p in prompts]} tokens")
        versions = subprocess.run(
            [str(Path(args.detllm).parent / "python"), "-c", "import detllm.version as v; print(v.__version__)"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(f"detllm {versions or '?'}; torch {torch.__version__}; threads {torch.get_num_threads()}")

        rows = []
        for tier in [int(t) for t in args.tiers.split(",") if t.strip()]:
            rows.append(run_detllm(args.detllm, model_dir, prompt_file, work, tier, args))
        rows.append(run_detllm(args.detllm, model_dir, reordered, work, 1, args, order))
        rows.append(run_samebits(f"{factory}:model", work, None, args))
        rows.append(run_samebits(f"{factory}:model", work, "repeat,batch", args))

        for row in rows:
            print(f"\n== {row['tool']} (exit {row['rc']}, {row['seconds']:.1f} s)")
            if row["tool"].startswith("detllm"):
                print("stdout:", row["stdout"].strip() or "(empty)")
                logged = [line for line in row["stderr"].splitlines() if line.strip() and "Loading weights" not in line]
                print("stderr (less the weight-loading progress bars):", "\n".join(logged) or "(empty)")
                print("report.txt:\n" + row["report_txt"].rstrip())
                for name, found in row.get("trace_partings", {}).items():
                    print(f"its traces, {name} vs run_0: {'; '.join(found) or 'no prompt parts'}")
                if "logprob_gaps" in row:
                    print("its tier-2 logprobs, batch_4 vs run_0 at equal tokens:", "; ".join(row["logprob_gaps"]))
            else:
                print(row["stdout"].rstrip())
                if row["rc"] not in (0, 1):
                    print(row["stderr"].rstrip())
                print("first score differences:", json.dumps(row.get("score_differences")))

        print("\n| tool | checked | verdict | where outputs part | exit | seconds |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            print(
                f"| {row['tool']} | {row['checked']} | {row['verdict']} | {row['where']} | {row['rc']} "
                f"| {row['seconds']:.1f} |"
            )
    finally:
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
