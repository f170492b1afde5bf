"""``samebits.probe.probe``: ask a running endpoint, from outside, whether its answers depend on
load, replica or restart. The probe inputs are fixed first; each axis then compares answers to
them bit for bit with their first quiet answer. The whole run is bounded by ``timeout_s``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from samebits.errors import UserError
from samebits.probe import axes, clients, samples, wrk
from samebits.probe.clients import Client, Endpoint, ProbeError, Sample
from samebits.probe.load import PROBERS_PER, WRK_REQUEST_FACTOR, Cell, run_cell
from samebits.probe.options import ProbeOptions
from samebits.probe.report import Axis, ProbeReport

FILLERS = 32  # distinct filler inputs rotated in the load


def probe(
    url: str,
    options: ProbeOptions | None = None,
    *,
    inputs: str | None = None,
    model: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ProbeReport:
    """Probe ``url`` on every axis; ``inputs`` (a tensor file, or for OpenAI a prompt file) or
    ``model`` (a MODEL spec: its example inputs) give the probe inputs, else the server's metadata."""
    o = options or ProbeOptions()
    o.validate()
    if o.client == "wrk" and wrk.available() is None:
        raise UserError("--client wrk: wrk is not installed (apt-get install wrk), or use --client python")
    say = progress or (lambda _: None)
    started = time.monotonic()
    deadline = started + o.timeout_s
    ep = clients.endpoint(url, o.protocol, o.model_name)
    if o.client == "wrk" and ep.protocol == "v2-grpc":
        raise UserError("--client wrk sends HTTP/1.1 only; over gRPC the load comes from --client python")
    if ep.protocol == "openai" and not ep.model:
        ep = _with_model_name(ep, o)
    others = [_replica(url, ep) for url in o.replicas]  # a bad URL is refused before any request

    def connect_to(target: Endpoint) -> Callable[[], Client]:
        return lambda: clients.connect(target, o.request_timeout_s, o.binary, o.max_tokens, o.seed)

    connect = connect_to(ep)
    client = connect()
    try:
        say("inputs")
        probes, described = _probes(client, ep, o, inputs, model)
        fillers = samples.fillers(probes, FILLERS, o.seed)
        say("quiet")
        quiet_axis, quiet, quiet_s = axes.quiet(client, probes, o.repeats, deadline)
    finally:
        client.close()
    found: list[Axis] = [quiet_axis]
    use_wrk = o.client == "wrk" or (o.client == "auto" and wrk.available() is not None)
    use_wrk = use_wrk and ep.protocol != "v2-grpc"
    cells: list[Cell] = []
    timed_out = ""
    for c in o.concurrency:
        if time.monotonic() >= deadline:
            timed_out = f"--timeout-s {o.timeout_s:g} s ran out before concurrency {c}"
            break
        say(f"loaded: concurrency {c}")
        filler = _filler(ep, fillers, c, o, deadline) if use_wrk and c >= 2 else None
        cells.append(run_cell(connect, probes, quiet, fillers, c, o.requests, deadline, filler, o.request_timeout_s))
        if time.monotonic() >= deadline:
            timed_out = f"--timeout-s {o.timeout_s:g} s ran out during concurrency {c}"
            break
    found.append(axes.loaded(cells, timed_out))
    if any(c.concurrency > 1 for c in cells):
        say("settling after the load")
        axes.settle(connect, probes[0], quiet_s, deadline)
    if others or o.connections:
        targets = _targets(ep, others, o, connect_to)
        found.append(_guarded("replicas", deadline, o, lambda: axes.replicas(targets, probes, quiet, deadline), say))
    else:
        found.append(Axis("replicas", "skipped", reason="no --replicas given and --connections 0"))
    if o.restart_cmd:
        command = o.restart_cmd
        found.append(
            _guarded(
                "restart",
                deadline,
                o,
                lambda: axes.restart(command, connect, probes, quiet, o.restart_wait_s, deadline),
                say,
            )
        )
    else:
        found.append(Axis("restart", "skipped", reason="no --restart-cmd given"))
    filler_client = "wrk" if any(c.client == "wrk" for c in cells) else "python"
    outputs = [f"{t.name} {t.datatype}{list(t.shape)}" for t in quiet[0]]
    seconds = time.monotonic() - started
    return ProbeReport(ep.url, ep.protocol, described, len(probes), found, seconds, filler_client, outputs)


def _guarded(name: str, deadline: float, o: ProbeOptions, run: Callable[[], Axis], say: Callable[[str], None]) -> Axis:
    """An axis after the first two: its failure is its verdict (``error``), not the run's end."""
    if time.monotonic() >= deadline:
        return Axis(name, "error", reason=f"not run: --timeout-s {o.timeout_s:g} s ran out")
    say(name)
    try:
        return run()
    except ProbeError as exc:
        return Axis(name, "error", reason=str(exc))


def _replica(url: str, ep: Endpoint) -> Endpoint:
    """A replica's endpoint: its own protocol by its URL (REST and gRPC of one model compare),
    OpenAI where the probed URL is, the probed model's name where it names none."""
    if ep.protocol == "openai":
        return dataclasses.replace(clients.endpoint(url, "openai"), model=ep.model)
    return clients.endpoint(url)


def _targets(
    ep: Endpoint, others: list[Endpoint], o: ProbeOptions, connect_to: Callable[[Endpoint], Callable[[], Client]]
) -> list[tuple[str, Callable[[], Client]]]:
    if others:
        return [(other.url, connect_to(other)) for other in others]
    return [(f"connection {i + 1}", connect_to(ep)) for i in range(o.connections)]


def _filler(ep: Endpoint, fillers: list[Sample], c: int, o: ProbeOptions, deadline: float) -> wrk.Filler:
    maker = clients.connect(ep, o.request_timeout_s, o.binary, o.max_tokens, o.seed)
    try:
        requests = [maker.wire_request(s) for s in fillers]
    finally:
        maker.close()
    base = f"{'https' if ep.tls else 'http'}://{ep.address}"
    probers = max(1, c // PROBERS_PER)
    return wrk.Filler(
        base,
        requests,
        max(1, c - probers),
        max(1.0, deadline - time.monotonic()),
        o.requests * WRK_REQUEST_FACTOR,
        o.request_timeout_s,
    )


def _with_model_name(ep: Endpoint, o: ProbeOptions) -> Endpoint:
    """OpenAI's ``model`` field from ``GET /v1/models`` (its first id), where the server lists any."""
    import json

    http = clients._Http(ep, o.request_timeout_s)
    try:
        status, _, body = http.request("GET", ep.path.split("/v1/")[0] + "/v1/models", None, {})
        listed = json.loads(body)["data"][0]["id"] if status == 200 else ""
    except (ProbeError, ValueError, KeyError, IndexError, TypeError):
        listed = ""
    finally:
        http.close()
    return dataclasses.replace(ep, model=str(listed))


def _probes(
    client: Client, ep: Endpoint, o: ProbeOptions, inputs: str | None, model: str | None
) -> tuple[list[Sample], str]:
    """The probe inputs and where they came from, in words."""
    if inputs and model:
        raise UserError("give --inputs FILE or --model MODEL, not both")
    if ep.protocol == "openai":
        if model:
            raise UserError("--model gives tensors; an OpenAI endpoint takes prompts: --inputs PROMPTS.txt")
        found = samples.prompts(inputs, o.probes)
        return found, f"{len(found)} prompts from {inputs}" if inputs else f"{len(found)} built-in prompts"
    specs = None
    if inputs is None and model is None:
        specs = client.metadata()
        found = samples.from_metadata(specs, o.probes, o.seed, o.int_range)
        shapes = ", ".join(f"{s.name} {s.datatype}{list(s.shape)}" for s in specs)
        return found, f"{len(found)} random rows (seed {o.seed}) of the served inputs {shapes}"
    args, kwargs, names, what = _tensors(inputs, model)
    try:
        served = [s.name for s in client.metadata()]
        names = [served[i] if i < len(served) else n for i, n in enumerate(names)]
    except ProbeError:
        pass  # a server without metadata (LitServe, plain FastAPI): the forward's own names
    found = samples.from_tensors(args, kwargs, names, o.probes)
    return found, f"{len(found)} rows of {what}"


def _tensors(inputs: str | None, model: str | None) -> tuple[tuple[Any, ...], dict[str, Any], list[str], str]:
    """(positional, keyword, positional names, description) of a tensor file or a MODEL's example."""
    from samebits.models import load_input_file, load_model
    from samebits.models.inputs import forward_parameters
    from samebits.models.target import inputs_for

    if inputs is not None:
        given = load_input_file(inputs)
        return given.args, given.kwargs, [f"input_{i}" for i in range(len(given.args))], inputs
    assert model is not None
    loaded = load_model(model)
    example = inputs_for(loaded, None, "give --inputs FILE")
    params = [name for name, _ in forward_parameters(loaded.model)]
    names = [params[i] if i < len(params) else f"input_{i}" for i in range(len(example.args))]
    return example.args, example.kwargs, names, f"{model}'s example inputs"
