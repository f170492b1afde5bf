"""One self-contained HTML page for a saved report (check, verify, doctor, bench, probe): every style
inline, charts as inline SVG (report/charts.py), no script and no network request, so it opens
from a mail attachment on an offline machine. Works from the report's JSON alone."""

from __future__ import annotations

import html
import json
from typing import Any

from samebits.errors import UserError

KINDS = ("check", "check-generate", "verify", "doctor", "bench", "probe")

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:980px;color:#222;padding:0 1em}
h1{font-size:1.35em;margin:.2em 0}h2{font-size:1.1em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
.verdict{padding:.6em .9em;border-radius:6px;margin:.8em 0;font-weight:600}
.ok{background:#e8f6ec;color:#1e6b34}.bad{background:#fdecea;color:#8a1f11}.warn{background:#fff5e0;color:#7a4b00}
table{border-collapse:collapse;margin:.4em 0;font-size:13px}th,td{padding:.25em .7em;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}pre{background:#f7f7f7;padding:.6em;overflow:auto}
.muted{color:#777}details{margin:.6em 0}summary{cursor:pointer;font-weight:600}.chart svg{max-width:100%;height:auto}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _table(head: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    cells = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{_e(c)}</td>' if i in numeric else f"<td>{_e(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _fingerprint(data: dict[str, Any] | None, title: str = "Fingerprint") -> str:
    if not data:
        return ""
    text = json.dumps(data, indent=1, sort_keys=True, default=str)
    return f"<details><summary>{_e(title)}</summary><pre>{_e(text)}</pre></details>"


def _verdict(ok: bool, text: str, warn: bool = False) -> str:
    kind = "ok" if ok else "warn" if warn else "bad"
    return f'<div class="verdict {kind}">{_e(text)}</div>'


def _num(value: object, fmt: str = "{:.3g}") -> str:
    return "" if value is None else fmt.format(value)


def _check(d: dict[str, Any]) -> str:
    parts = [_verdict(bool(d.get("ok")), d.get("headline", ""))]
    parts.append(
        f'<p class="muted">MODEL {_e(d.get("model"))}, inputs {_e(d.get("inputs"))}, {d.get("seconds", 0):.1f} s</p>'
    )
    rows = [
        [a["axis"], a["verdict"], f"{a.get('agreed', '')}/{a.get('runs', '')}", a.get("summary") or a.get("reason", "")]
        for a in d["axes"]
    ]
    parts += ["<h2>Axes</h2>", _table(["axis", "verdict", "agreed", "what was measured"], rows)]
    diverged = [a for a in d["axes"] if a.get("origin") and a["origin"].get("profile")]
    if diverged:
        from samebits.report.charts import divergence_by_depth

        series = [
            {"axis": a["axis"], "profile": a["origin"]["profile"], "origin": a["origin"]["module"]} for a in diverged
        ]
        parts.append("<h2>Where the difference starts and how it grows</h2>")
        parts.append('<div class="chart">' + divergence_by_depth(series) + "</div>")
    parts += [_outputs(a) for a in d["axes"]]
    for a in d["axes"]:
        o = a.get("origin")
        if not o:
            continue
        parts.append(f"<h2>{_e(a['axis'])}: starts in <code>{_e(o['module'])}</code> ({_e(o['type'])})</h2>")
        if o.get("note"):
            parts.append(f"<p>{_e(o['note'])}</p>")
        if o.get("op"):
            parts.append(f"<p>first op inside it that differs: <code>{_e(o['op'])}</code></p>")
        if o.get("growth"):
            growth = [[g["module"], g["type"], _num(g["max_abs"]), f"{g['mismatched_pct']:.1f}%"] for g in o["growth"]]
            parts.append(_table(["module", "type", "max abs diff", "elements differing"], growth, {2, 3}))
    parts.append(_causes(d.get("causes")))
    if d.get("localization"):
        parts.append(f"<p class='muted'>{_e(d['localization'])}</p>")
    parts.append(_fingerprint(d.get("fingerprint")))
    return "".join(parts)


def _outputs(axis: dict[str, Any]) -> str:
    """The axis's outputs that differ, in the report's order: the one a user notices first on top."""
    changes = (axis.get("difference") or {}).get("outputs") or []
    if not changes:
        return ""
    rows = [[c["path"] or "<output>", c["text"]] for c in changes]
    return f"<h2>{_e(axis['axis'])}: outputs that differ</h2>" + _table(["output", "what changes"], rows)


def _causes(causes: list[dict[str, Any]] | None) -> str:
    if not causes:
        return ""
    parts = ["<h2>Causes (each measured)</h2><ul>"]
    for c in causes:
        verified = " (verified by re-run)" if c.get("verified") else ""
        parts.append(
            f"<li><b>{_e(c['code'])}</b>: {_e(c['summary'])}<br><span class='muted'>evidence:</span> "
            f"{_e(c['evidence'])}{_e(verified)}<br><span class='muted'>fix:</span> {_e(c['fix'])}</li>"
        )
    return "".join(parts) + "</ul>"


def _check_generate(d: dict[str, Any]) -> str:
    parts = [_verdict(bool(d.get("ok")), d.get("headline", ""))]
    parts.append(
        f'<p class="muted">MODEL {_e(d.get("model"))}, prompts of {_e(d.get("prompts"))} tokens, '
        f"{_e(d.get('max_new_tokens'))} new tokens, "
        + (f"sampled (seed {_e(d['sampling'].get('seed'))})" if d.get("sampling") else "greedy")
        + f", {d.get('seconds', 0):.1f} s</p>"
    )
    rows = [[a["axis"], a["tokens"], a["scores"], a.get("summary", "")] for a in d["axes"]]
    parts += ["<h2>Axes</h2>", _table(["axis", "tokens", "score bits", "what was measured"], rows)]
    partings = [
        [
            a["axis"],
            p["prompt"],
            p["step"],
            p["position"],
            p["reference_token"],
            p["other_token"],
            _num(p["margin"]),
            f"{p['module']} ({p.get('module_type')})" if p.get("module") else "",
        ]
        for a in d["axes"]
        for p in a.get("parted", [])
    ]
    if partings:
        head = ["axis", "prompt", "step", "position", "token alone", "token here", "reference margin", "first module"]
        parts += ["<h2>Where generations part</h2>", _table(head, partings, {1, 2, 3, 4, 5, 6})]
    return "".join(parts) + _causes(d.get("causes")) + _fingerprint(d.get("fingerprint"))


def _verify(d: dict[str, Any]) -> str:
    ok = bool(d.get("ok"))
    parts = [_verdict(ok, f"{d.get('verdict', '')}: {d.get('policy_reason', '')}")]
    parts.append(
        f'<p class="muted">MODEL {_e(d.get("model"))}, golden {_e(d.get("golden"))}, policy {_e(d.get("policy"))}</p>'
    )
    items = [
        [
            i["path"] or "<output>",
            i["verdict"],
            i["dtype"],
            i["shape"],
            f"{i['mismatched']}/{i['numel']}",
            _num(i["max_abs"]),
            _num(i.get("max_ulp")),
        ]
        for i in d.get("items", [])
    ]
    parts += [
        "<h2>Per output path</h2>",
        _table(["path", "verdict", "dtype", "shape", "differing", "max abs", "max ULP"], items, {4, 5, 6}),
    ]
    if d.get("weights_changed"):
        names = ", ".join(d["weights_changed"])
        parts.append(
            f"<p><b>the weights changed since recording</b>: {len(d['weights_changed'])} tensors ({_e(names)})</p>"
        )
    if d.get("first_module"):
        parts.append(f"<p>first changed module: <code>{_e(d['first_module'])}</code></p>")
    if d.get("layouts"):
        rows = [[t["name"], t["what"], t["verdict"], t["note"]] for t in d["layouts"]]
        parts += ["<h2>Re-laid in memory</h2>", _table(["layout", "what", "verdict", "difference"], rows)]
    changes = d.get("fingerprint_changes") or []
    if changes:
        rows = [
            [c.get("field"), c.get("old"), c.get("new"), "yes" if c.get("affects_bits") else "no", c.get("note", "")]
            for c in changes
        ]
        parts += [
            "<h2>Fingerprint changes since the golden</h2>",
            _table(["field", "recorded", "now", "affects bits", "note"], rows),
        ]
    for cause in d.get("likely_causes") or []:
        parts.append(f"<p><b>likely cause:</b> {_e(cause)}</p>")
    return "".join(parts) + _fingerprint(d.get("recorded"), "Recorded with the golden")


def _doctor(d: dict[str, Any]) -> str:
    findings = d.get("findings", [])
    parts = [_verdict(not findings, f"{len(findings)} finding(s)" if findings else "no findings", warn=bool(findings))]
    for f in findings:
        parts.append(f"<h2>{_e(f['code'])} {_e(f['name'])} ({_e(f['severity'])})</h2><p>{_e(f['message'])}</p>")
        parts.append(f"<p><span class='muted'>fix:</span> {_e(f['fix'])}</p>")
        growth = f.get("details", {})
        if "as_is" in growth and "inference_mode" in growth:
            from samebits.report.charts import bars

            modes = [growth["as_is"], growth["inference_mode"]]
            parts.append(
                '<div class="chart">'
                + bars(
                    "memory kept over the forwards", [m["mode"] for m in modes], [m["grown_mb"] for m in modes], "MB"
                )
                + "</div>"
            )
    probes = [
        [p["probe"], p["status"], p.get("summary", ""), _num(p.get("seconds"), "{:.2f}")] for p in d.get("probes", [])
    ]
    if probes:
        parts += ["<h2>Probes</h2>", _table(["probe", "status", "measured", "s"], probes, {3})]
    return "".join(parts) + _fingerprint(d.get("environment"), "Environment")


def _rounds(ratio: Any, busy: bool) -> str:
    """A ratio as the range of its rounds, or ``-`` (the loop itself; a busy machine)."""
    if not isinstance(ratio, dict) or busy:
        return "-"
    return f"{ratio['min']:.1f}-{ratio['max']:.1f}x"


def _bench(d: dict[str, Any]) -> str:
    rows = d.get("rows", [])
    load = d.get("load") if isinstance(d.get("load"), dict) else None
    busy = bool(load and load.get("busy"))
    parts = [f'<p class="muted">MODEL {_e(d.get("model"))}, {d.get("seconds", 0):.0f} s</p>']
    if rows:
        from samebits.report.charts import bars

        labels = [f"{r['config']} @ {r['batch']}" for r in rows]
        parts.append(
            '<div class="chart">'
            + bars("samples/s", labels, [r["samples_per_s"] for r in rows], "samples/s")
            + "</div>"
        )
        table = [
            [
                r["config"],
                r["batch"],
                f"{r['samples_per_s']:,.0f}",
                _num(r["p50_ms"], "{:.2f}"),
                _num(r["p99_ms"], "{:.2f}"),
                _num(r["peak_mb"], "{:.1f}"),
                "yes" if r["identical_to_reference"] else "no",
                "yes" if r["same_as_alone"] else "no",
                _rounds(r.get("speedup"), busy),
            ]
            for r in rows
        ]
        head = ["config", "batch", "samples/s", "p50 ms", "p99 ms", "peak MB", "bits = loop", "bits = alone", "vs loop"]
        parts += ["<h2>Configurations</h2>", _table(head, table, {1, 2, 3, 4, 5, 8})]
    if load:
        parts.append(
            f'<p class="muted">measured under load {load["average"]:.1f} on {load["cores"]:g} cores'
            + (": the machine was busy, no speedup is measurable here" if busy else "")
            + "; bench needs a quiet machine</p>"
        )
    for name, sizes in (d.get("invariance") or {}).items():
        parts.append(f"<p>{_e(name)} runs only the batch sizes it verified: {_e(', '.join(map(str, sizes)))}</p>")
    for name, plan in (d.get("plans") or {}).items():
        parts.append(f"<p>{_e(name)}: {_e(plan)}</p>")
    return "".join(parts)


def _probe(d: dict[str, Any]) -> str:
    parts = [_verdict(bool(d.get("ok")), d.get("headline", ""), warn=d.get("exit_code") == 2)]
    parts.append(
        f'<p class="muted">URL {_e(d.get("url"))} ({_e(d.get("protocol"))}), {_e(d.get("inputs"))}; answers compared '
        f"by {_e(', '.join(d.get('outputs', [])))}; load from {_e(d.get('filler'))}, {d.get('seconds', 0):.1f} s</p>"
    )
    rows = [
        [a["axis"], a["verdict"], f"{a['agreed']}/{a['runs']}" if a["runs"] else "", a["summary"] or a["reason"]]
        for a in d["axes"]
    ]
    parts += ["<h2>Axes</h2>", _table(["axis", "verdict", "agreed", "what was measured"], rows)]
    cells = [c for a in d["axes"] for c in a.get("cells", [])]
    if cells:
        table = [
            [
                c["concurrency"],
                c["requests"],
                f"{c['requests_per_s']:.0f}",
                f"{c['differing']}/{c['probe_answers']}",
                sum(c["failed"].values()),
                _num(c["client_cpu_ms_per_request"], "{:.3f}"),
                c["client"],
            ]
            for c in cells
        ]
        head = [
            "concurrency",
            "requests",
            "req/s",
            "probe answers differing",
            "failed",
            "client CPU ms/request",
            "load client",
        ]
        parts += ["<h2>Under load</h2>", _table(head, table, {0, 1, 2, 3, 4, 5})]
    for a in d["axes"]:
        first = a.get("first")
        if a["verdict"] == "diverged" and first:
            where = (
                f"{first['output']}[{', '.join(map(str, first['element']))}]"
                if first.get("element")
                else first["output"]
            )
            parts.append(f"<h2>{_e(a['axis'])}: first at {_e(first['where'])}</h2>")
            parts.append(f"<p>output <code>{_e(where)}</code>: {_e(first['expected'])} then {_e(first['got'])}</p>")
    return "".join(parts)


def render(data: dict[str, Any]) -> str:
    """The HTML page of a report's JSON (``data["kind"]`` one of :data:`KINDS`)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in KINDS:
        raise UserError(f"not a samebits report samebits can render (kind {kind!r}; one of {', '.join(KINDS)})")
    renderers = {
        "check": _check,
        "check-generate": _check_generate,
        "verify": _verify,
        "doctor": _doctor,
        "bench": _bench,
        "probe": _probe,
    }
    body = renderers[kind](data)
    title = f"samebits {kind}: {data.get('model', data.get('url', ''))}"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1>{body}"
        f"<p class='muted'>samebits report, schema {_e(data.get('schema_version'))}</p></body></html>\n"
    )
