"""Charts as static inline SVG through matplotlib's SVG backend (``pip install 'samebits[report]'``):
readable in a mail viewer with no script. Each chart is an ``<svg>`` string; every data point
carries a ``data-module`` (or ``data-label``) attribute so that tests can find it."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from typing import Any

from samebits.errors import UserError

_COLORS = ("#c0392b", "#2e86c1", "#8e44ad", "#d68910", "#16a085", "#7f8c8d")


def require_matplotlib() -> None:
    """A one-line error naming the extra where matplotlib is missing."""
    _matplotlib()


def _matplotlib() -> Any:
    try:
        import matplotlib
        import matplotlib.figure
        from matplotlib.backends.backend_svg import FigureCanvasSVG
    except ImportError:
        raise UserError("an HTML report needs matplotlib: pip install 'samebits[report]'") from None
    return matplotlib, matplotlib.figure.Figure, FigureCanvasSVG


_STYLE = {"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "samebits"}


@contextlib.contextmanager
def _figure(**options: Any) -> Iterator[Any]:
    """A figure on matplotlib's SVG canvas in its default style, never pyplot's: a
    ``matplotlibrc`` in the working folder (read when matplotlib is imported) sets no style and
    names no ``figure.hooks`` to import and call. The caller's rcParams are put back after."""
    matplotlib, figure, canvas = _matplotlib()
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(_STYLE)
        if "text.parse_math" in matplotlib.rcParams:  # labels are module names: "$" is text, never math
            matplotlib.rcParams["text.parse_math"] = False
        fig = figure(**options)
        canvas(fig)
        yield fig


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)  # the RDF block names no data
    return text[text.index("<svg") :]  # no XML prolog or DOCTYPE inside HTML


def _tag(svg: str, labels: dict[str, str]) -> str:
    """Give each artist group (``<g id="GID">``) the attributes listed for its gid."""

    def tag(match: re.Match[str]) -> str:
        label = labels.get(match.group(1))
        return match.group(0) if label is None else f"{match.group(0)[:-1]} {label}>"

    return re.sub(r'<g id="([^"]+)">', tag, svg)


def _attr(name: str, value: str) -> str:
    escaped = value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    return f'{name}="{escaped}"'


def divergence_by_depth(series: list[dict[str, Any]]) -> str:
    """One panel per measure (max abs diff, % elements differing) over every traced module in
    call order, one series per diverged axis; identical modules sit on the zero band (a symlog
    axis), modules that differ but were not measured sit on a marked band above it, and the
    origin module is marked. ``series``: ``[{"axis", "profile": [ModuleStat dicts], "origin"}]``."""
    with _figure(figsize=(9, 5.2)) as fig:
        panels = fig.subplots(2, 1, sharex=True)
        labels: dict[str, str] = {}
        names = [m["module"] for m in series[0]["profile"]]
        for s_index, s in enumerate(series):
            color = _COLORS[s_index % len(_COLORS)]
            profile = s["profile"]
            xs = list(range(len(profile)))
            for panel, key in zip(panels, ("max_abs", "mismatched_pct")):
                ys = [m[key] if m[key] is not None else None for m in profile]
                measured = [(x, y) for x, y in zip(xs, ys) if y is not None]
                panel.plot([x for x, _ in measured], [y for _, y in measured], color=color, linewidth=1, alpha=0.6)
                for x, y, m in zip(xs, ys, profile):
                    gid = f"pt-{s_index}-{x}-{key.replace('_', '')}"
                    if y is None:  # differs, not measured (past the keep budget)
                        panel.plot([x], [0], marker="x", color=color, gid=gid)
                    else:
                        panel.plot([x], [y], marker="o", markersize=3.5, color=color, gid=gid)
                    labels[gid] = " ".join(
                        (
                            _attr("data-module", m["module"]),
                            _attr("data-axis", s["axis"]),
                            _attr("data-measure", key),
                            _attr(
                                "data-state",
                                "identical" if m["identical"] else "differs" if y is not None else "unmeasured",
                            ),
                        )
                    )
                origin = next((i for i, m in enumerate(profile) if m["module"] == s.get("origin")), None)
                if origin is not None:
                    panel.axvline(
                        origin, color=color, linestyle="--", linewidth=1, gid=f"origin-{s_index}-{key.replace('_', '')}"
                    )
                    labels[f"origin-{s_index}-{key.replace('_', '')}"] = " ".join(
                        (
                            _attr("data-origin", s["origin"]),
                            _attr("data-axis", s["axis"]),
                            _attr("data-index", str(origin)),
                        )
                    )
            panels[0].plot([], [], color=color, marker="o", label=f"{s['axis']} (origin {s.get('origin')})")
        panels[0].legend(loc="lower left", bbox_to_anchor=(0, 1.02), ncol=3, fontsize=8, frameon=False)
        panels[0].set_yscale("symlog", linthresh=1e-12)
        panels[0].set_ylabel("max abs diff")
        panels[1].set_yscale("symlog", linthresh=0.01)
        panels[1].set_ylabel("% elements differing")
        step = max(1, len(names) // 40)
        panels[1].set_xticks(range(0, len(names), step))
        panels[1].set_xticklabels([names[i] for i in range(0, len(names), step)], rotation=60, ha="right", fontsize=7)
        for panel in panels:
            panel.set_ylim(bottom=0)  # differences are >= 0: no negative half of the symlog axis
            panel.axhline(0, color="#999", linewidth=0.8)
            panel.grid(True, axis="y", alpha=0.3)
        panels[1].set_xlabel("traced modules in call order (0 = identical)")
        return _tag(_svg(fig), labels)


def bars(title: str, labels: list[str], values: list[float], unit: str) -> str:
    """Horizontal bars, one per configuration (bench: samples/s)."""
    with _figure(figsize=(8, 0.4 * len(labels) + 1)) as fig:
        ax = fig.subplots()
        ax.barh(range(len(labels)), values, color=_COLORS[1], gid="bars")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
        ax.set_title(title, fontsize=10)
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
        return _svg(fig)
