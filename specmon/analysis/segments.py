"""Load segments: each change of concurrency, request rate or output length starts one.

A segment's figures come from its own RequestResults (every request carries the segment it
was sent in; None counts as segment 0, the run's start): token-weighted acceptance length,
TPOT (the average inter-token latency, ms), output tokens/s and requests/s over the
segment's own window (first send to last response of its valid requests, AIPerf's
benchmark-duration rule), and the recommended k: specmon.decision.choose over the
segments' measurements (every server's, under the row's load; docs/tuning.md "Choosing
k"), with each segment's request and error counts as its health (a segment failing more
than 1% of its requests is excluded and flagged).
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from specmon import decision
from specmon.constants import NS_PER_S
from specmon.decision.acceptance import add_request
from specmon.decision.measured import add_rate
from specmon.decision.slo import Slo, percentiles_of
from specmon.formatting import fmt_number, stacked_rows
from specmon.segment_plan import SETTING_KEYS

RUN = "run"  # SegmentTable.rows(draft_cost=RUN): the table's own --draft-cost
SERVER_WIDE = "server-wide"  # a row's acceptance_source when it came from /metrics
# A segment saturated (the client's loop warning) for this share of its window or more is
# left out of the advice, as a saturated sweep cell is; a spell under it (a start-up hiccup
# of half a second in a 10 s segment) moves the segment's throughput by under 5%.
SATURATED_SHARE = 0.05


@dataclass(frozen=True)
class ServerWide:
    """A server's own acceptance from its /metrics counters over the run (k from its
    per-position counters, the derived accepted-drafts histogram): what a segment whose
    requests carried no spec-decode record is advised on (counters-only vLLM set-ups)."""

    k: int
    histogram: Mapping[int, int]


# ---------------------------------------------------------------- the table


def segment_of(result: Any) -> int:
    return 0 if result.segment is None else int(result.segment)


class _SegmentSums:
    """One segment's running sums, O(1) per result added (tests/support/segments_oracle.py recomputes
    the same figures from scratch)."""

    __slots__ = (
        "accepted",
        "blocks",
        "drafted",
        "errors",
        "first_start",
        "histogram",
        "itl_count",
        "itl_sum",
        "ks",
        "last_end",
        "osl",
        "rate_blocks",
        "requests",
        "spec_records",
        "spec_requests",
        "steps",
        "tpot",
        "ttft",
    )

    def __init__(self) -> None:
        self.requests = self.errors = self.steps = self.accepted = self.drafted = 0
        self.spec_requests = 0  # requests whose record has verify steps
        self.histogram: dict[int, int] = {}
        self.ks: set[int] = set()
        self.itl_sum: float = 0
        self.itl_count = 0
        self.osl: float = 0
        self.first_start: int | None = None
        self.last_end: int | None = None
        self.blocks: list[dict[int, int]] = []  # whole requests, for P(best) (add_request)
        # (output tokens, request seconds) per block of whole requests: the measured
        # answer's intervals (decision/measured.py add_rate)
        self.rate_blocks: list[list[float]] = []
        self.spec_records = 0  # requests that carried a spec-decode record
        # per request, ms, for the SLO's percentiles (decision/slo.py): typed arrays, 8 bytes
        # a value (a list of floats held 32: about 64 bytes a streamed request for the two)
        self.ttft: array[float] = array("d")
        self.tpot: array[float] = array("d")

    def add(self, r: Any) -> None:
        if r.error is not None:
            self.errors += 1
            return
        self.requests += 1
        rec = r.spec
        self.spec_records += rec is not None
        if r.start_ns is not None and r.end_ns is not None and r.end_ns > r.start_ns:
            seconds = (r.end_ns - r.start_ns) / NS_PER_S
            tokens = r.metrics.get("output_sequence_length", 0)
            add_rate(self.rate_blocks, self.requests - 1, tokens, seconds)
        # A counts-only record (no verify steps) is left out of the segment's AL and rate,
        # which share one accepted-drafts sum; the run's pooled rate still has it.
        if (
            rec is not None
            and rec.num_spec_steps is not None
            and rec.acceptance_histogram is not None
        ):
            self.steps += rec.num_spec_steps
            self.accepted += rec.num_accepted_draft_tokens
            self.drafted += rec.num_draft_tokens
            hist = self.histogram
            for j, n in rec.acceptance_histogram.items():
                hist[int(j)] = hist.get(int(j), 0) + int(n)
            add_request(self.blocks, self.spec_requests, rec.acceptance_histogram)
            self.spec_requests += 1
            if rec.num_spec_tokens is not None:
                self.ks.add(int(rec.num_spec_tokens))
        metrics = r.metrics
        if (
            "inter_token_latency" in metrics
        ):  # summed in arrival order, as the from-scratch oracle does
            self.itl_sum += metrics["inter_token_latency"]
            self.itl_count += 1
            self.tpot.append(metrics["inter_token_latency"])
        if "time_to_first_token" in metrics:
            self.ttft.append(metrics["time_to_first_token"])
        self.osl += metrics.get("output_sequence_length", 0)
        if r.start_ns is not None and (self.first_start is None or r.start_ns < self.first_start):
            self.first_start = r.start_ns
        if r.end_ns is not None and (self.last_end is None or r.end_ns > self.last_end):
            self.last_end = r.end_ns

    def row(self, index: int, settings: Mapping | None, latency: bool = False) -> dict:
        """The segment's row; `latency` adds its TTFT / TPOT percentiles (a sort of each
        segment's values: asked for with an SLO and by the export, not at every refresh)."""
        start, end = self.first_start, self.last_end
        window = (
            (end - start) / NS_PER_S
            if start is not None and end is not None and end > start
            else None
        )
        steps, hist = self.steps, self.histogram
        k = max(self.ks) if self.ks else (max(hist) if hist else None)
        return {
            "segment": index,
            "settings": dict(settings) if settings else {},
            "request_count": self.requests,
            "error_count": self.errors,
            "num_spec_tokens": k,
            "steps": steps,
            "accepted": self.accepted,
            "drafted": self.drafted,
            "histogram": {str(j): n for j, n in sorted(hist.items())},
            "request_blocks": [{str(j): n for j, n in sorted(b.items())} for b in self.blocks],
            "rate_blocks": [[t, round(sec, 6)] for t, sec in self.rate_blocks],
            # requests answered without any spec-decode record: a server at k=0 (or one
            # that reports speculation only in /metrics)
            "speculation_seen": self.spec_records > 0,
            "acceptance_length": 1 + self.accepted / steps if steps else None,
            "tpot_ms": self.itl_sum / self.itl_count if self.itl_count else None,
            "output_token_throughput": self.osl / window if window else None,
            "request_throughput": self.requests / window if window else None,
            "duration_s": window,
            "latency_percentiles": percentiles_of({"ttft_ms": self.ttft, "tpot_ms": self.tpot})
            if latency
            else {},
            "recommended_k": None,
            "draft_cost": None,
            "recommended_from": None,
            "recommendation": None,
            "basis": None,
            "predicted_gain_vs_k0": {},
            "p_best": None,
            "caveat": None,
            "hint": None,
            "answer": None,
            "proposal": None,
            "flags": [],
        }


class SegmentTable:
    """The segments table kept up to date as results arrive: `update(label, results)` folds in
    only the results past the last call (result lists are append-only), so a live refresh
    costs O(new results) plus the recommendation per segment, not a re-read of the run.
    `rows(settings)` gives the rows of the whole lists (thread-safe; tests/support/segments_oracle.py
    is the from-scratch oracle it is checked against)."""

    def __init__(
        self,
        *,
        draft_cost: float | None = None,
        across_servers: bool = True,
        slo: Slo | None = None,
    ) -> None:
        self.draft_cost = draft_cost
        self.across_servers = across_servers
        self.slo = slo  # --slo: every row's k is the best that meets it
        self._sums: dict[str | None, dict[int, _SegmentSums]] = {}  # label order = first update
        self._seen: dict[str | None, int] = {}
        self._lock = threading.Lock()
        # label -> the server's counters (ServerWide), for rows without any spec-decode
        # record; set by whoever polls /metrics (MultiRun)
        self.server_wide: Callable[[], Mapping[str | None, ServerWide]] | None = None
        # label -> the client's SaturationLog: a segment whose window overlaps a saturated
        # spell is `client_saturated` and left out of the advice (the sweep's gate)
        self.saturation: Callable[[], Mapping[str | None, Any]] | None = None

    def update(self, label: str | None, results: Sequence[Any]) -> None:
        with self._lock:
            by_segment = self._sums.setdefault(label, {})
            start, end = self._seen.get(label, 0), len(results)
            for i in range(start, end):
                r = results[i]
                if r.phase != "profiling":
                    continue
                index = 0 if r.segment is None else int(r.segment)
                sums = by_segment.get(index)
                if sums is None:
                    sums = by_segment[index] = _SegmentSums()
                sums.add(r)
            self._seen[label] = end

    def add(self, label: str | None, result: Any) -> None:
        """Fold in one result as it lands (the push form of `update`, for a sink): the same
        sums as `update` over the same results in the same order. Thread-safe."""
        if result.phase != "profiling":
            return
        index = 0 if result.segment is None else int(result.segment)
        with self._lock:
            by_segment = self._sums.setdefault(label, {})
            sums = by_segment.get(index)
            if sums is None:
                sums = by_segment[index] = _SegmentSums()
            sums.add(result)

    def rows(
        self,
        settings: Mapping | None = None,
        draft_cost: float | str | None = RUN,
        latency: bool = False,
    ) -> list[dict]:
        """`settings`: SegmentLog.settings(), or {label: ...} when the
        table was updated with labels. `draft_cost`: the cost the recommendation uses; RUN
        (the default) is the table's own (--draft-cost), None unknown, a number given (the
        TUI's +/-). `latency`: every row carries its TTFT / TPOT percentiles (always with an
        SLO, which needs them)."""
        latency = latency or self.slo is not None
        saturation = self.saturation() if self.saturation is not None else None
        with self._lock:
            rows = []
            for label, by_segment in self._sums.items():
                if label is None:
                    seg_settings = settings or {}
                else:
                    seg_settings = (settings or {}).get(label) or {}
                for index in sorted(by_segment):
                    sums = by_segment[index]
                    row = sums.row(index, seg_settings.get(index), latency)
                    row["server"] = label
                    log = saturation.get(label) if saturation is not None else None
                    if log is not None:  # a runner that watched its load loop
                        share = log.share_of(sums.first_start, sums.last_end)
                        row["client_saturated_share"] = round(share, 4)
                        row["client_saturated"] = share >= SATURATED_SHARE
                    rows.append(row)
        wide = self.server_wide() if self.server_wide is not None else {}
        for row in rows:
            _fill_server_wide(row, wide.get(row["server"]))
        cost = self.draft_cost if draft_cost == RUN else draft_cost
        assert not isinstance(cost, str), f"draft_cost: a number, None or {RUN!r}"
        _recommend(rows, cost, self.across_servers, self.slo)
        rows.sort(key=lambda r: (r["segment"], str(r["server"])))
        return rows


def _fill_server_wide(row: dict, wide: ServerWide | None) -> None:
    """A row whose requests carried no spec-decode record, on a server whose counters did
    count verify steps: its acceptance is the server's, over the whole run (every client
    and segment in it), labelled `acceptance_source: server-wide`; its throughput and
    latency stay its own."""
    if wide is None or row["speculation_seen"] or not row["request_count"]:
        return
    hist = {int(j): int(n) for j, n in wide.histogram.items() if n}
    steps = sum(hist.values())
    if not steps or wide.k < 1:
        return
    accepted = sum(j * n for j, n in hist.items())
    row.update(
        num_spec_tokens=wide.k,
        steps=steps,
        accepted=accepted,
        drafted=wide.k * steps,
        histogram={str(j): n for j, n in sorted(hist.items())},
        acceptance_length=1 + accepted / steps,
        acceptance_source=SERVER_WIDE,
    )


def _window_s(valid: Sequence[Any]) -> float | None:
    starts = [r.start_ns for r in valid if r.start_ns is not None]
    ends = [r.end_ns for r in valid if r.end_ns is not None]
    if not starts or not ends or max(ends) <= min(starts):
        return None
    return (max(ends) - min(starts)) / NS_PER_S


def _recommend(
    rows: list[dict], draft_cost: float | None, across_servers: bool, slo: Slo | None = None
) -> None:
    """Every row's k from specmon.decision: the measurements are this server's segments
    (every server's under the same load, `across_servers`), the load the row's."""
    points = [_measurement(r) for r in rows]
    done: dict[tuple, decision.KChoice] = {}  # rows under one load share the answer
    for row in rows:
        peers = [
            m
            for m, r in zip(points, rows, strict=True)
            if m is not None and (across_servers or r["server"] == row["server"])
        ]
        load = row["settings"].get("concurrency")
        key = (load, tuple(id(m) for m in peers))
        if key not in done:
            done[key] = _advise(peers, load, draft_cost, slo)
        choice = done[key]
        row["recommended_k"] = choice.k
        row["draft_cost"] = choice.draft_cost
        row["recommended_from"] = choice.source
        row["recommendation"] = choice.text()
        row["basis"] = choice.basis
        row["predicted_gain_vs_k0"] = {str(k): g for k, g in sorted(choice.gain.items())}
        row["p_best"] = choice.p_best
        row["caveat"] = choice.caveat()
        row["hint"] = choice.next_line() or None  # the model's proposal (second line)
        row["answer"] = None if choice.measured is None else choice.measured.to_dict()
        row["proposal"] = None if choice.proposal is None else choice.proposal.to_dict()
        row["flags"] = list(choice.flags)
        if any(
            r.get("acceptance_source") == SERVER_WIDE for r in _peers(rows, row, across_servers)
        ):
            note = " · acceptance server-wide (/metrics counters, whole run)"
            row["recommendation"] += note
            row["basis"] = f"{row['basis']}{note}"


SATURATED_ALL = (
    "the client was saturated through every measurement at this load: the answer is "
    "uncertain, re-measure (--workers 2)"
)


def _advise(
    peers: list[decision.Measurement], load: Any, draft_cost: float | None, slo: Slo | None
) -> decision.KChoice:
    """specmon.decision's answer at `load`. Saturated segments are left out (the sweep's
    gate); when that leaves no answer because every measurement at this load is saturated
    (and otherwise healthy: a busy machine), they answer after all, flagged uncertain,
    rather than the advice going silent."""
    choice = decision.advise(peers, load, draft_cost, slo)
    here = [m for m in peers if m.concurrency == load]
    if choice.k is not None or not here or not all(m.saturated for m in here):
        return choice
    if any(replace(m, saturated=False).health.reasons() for m in here):
        return choice
    kept = [replace(m, saturated=False) if m.concurrency == load else m for m in peers]
    again = decision.advise(kept, load, draft_cost, slo)
    return replace(again, flags=(*again.flags, SATURATED_ALL))


def _peers(rows: list[dict], row: dict, across_servers: bool) -> list[dict]:
    """The rows answered together with `row`: its load's, every server's or its own."""
    load = row["settings"].get("concurrency")
    return [
        r
        for r in rows
        if r["settings"].get("concurrency") == load
        and (across_servers or r["server"] == row["server"])
    ]


def _measurement(row: dict) -> decision.Measurement | None:
    return measurement_of_row(row, "" if row["server"] is None else str(row["server"]))


def measurement_of_row(row: Mapping[str, Any], label: str) -> decision.Measurement | None:
    """A segment row (live, or read back from a summary's `segments`) as the decision's
    measurement; None without k or verify steps (or a row too malformed to read)."""
    try:
        k = row_k(row)
        if k is None:
            return None
        settings = row.get("settings") or {}
        return decision.Measurement(
            k=k,
            concurrency=settings.get("concurrency"),
            histogram={int(j): int(n) for j, n in (row.get("histogram") or {}).items()},
            step_ms=_step_time(row),
            throughput=row.get("output_token_throughput"),
            label=label,
            requests=int(row.get("request_count") or 0),
            errors=int(row.get("error_count") or 0),
            saturated=bool(row.get("client_saturated")),
            latency=_latency(row.get("latency_percentiles")),
            blocks=tuple(
                {int(j): int(n) for j, n in b.items()} for b in row.get("request_blocks") or ()
            ),
            rate_blocks=tuple((float(t), float(s)) for t, s in row.get("rate_blocks") or ()),
        )
    except (AttributeError, TypeError, ValueError):
        return None


def row_k(row: Mapping[str, Any]) -> int | None:
    """The row's k: its verify steps' k; 0 for a row whose requests carried no spec-decode
    record at all (`speculation_seen` false: no speculation on that server); None else."""
    if row.get("num_spec_tokens") and row.get("steps"):
        return int(row["num_spec_tokens"])
    if row.get("speculation_seen") is False and row.get("request_count"):
        return 0
    return None


def _latency(raw: Any) -> dict[str, dict[str, float]]:
    """A row's latency_percentiles as read back (anything malformed is left out)."""
    if not isinstance(raw, Mapping):
        return {}
    return {
        str(name): {str(p): float(v) for p, v in ps.items() if isinstance(v, (int, float))}
        for name, ps in raw.items()
        if isinstance(ps, Mapping)
    }


def _step_time(row: Mapping[str, Any]) -> float | None:
    """ms per verify step: TPOT x acceptance length (docs/tuning.md §5)."""
    tpot, al = row.get("tpot_ms"), row.get("acceptance_length")
    if not isinstance(tpot, (int, float)) or not isinstance(al, (int, float)):
        return None
    return float(tpot) * float(al)


def recommended_by_segment(rows: Sequence[Mapping]) -> dict[int, int | None]:
    """segment -> recommended k (the first row's; across-server rows agree)."""
    out: dict[int, int | None] = {}
    for row in rows:
        out.setdefault(row["segment"], row["recommended_k"])
    return out


def advice_lines(rows: Sequence[Mapping]) -> list[str]:
    """The end of a run: the decision for each segment's load with its basis (the rows'
    own recommendation text, so it is the monitor's answer word for word)."""
    first: dict[int, Mapping] = {}
    for row in rows:
        first.setdefault(row["segment"], row)
    if not first:
        return ["advice: no recommendation: no request finished"]
    lines = []
    for seg, row in sorted(first.items()):
        where = f"advice (segment {seg}, {_settings_text(row['settings'])}):"
        lines.append(f"{where} {row['recommendation']}")
        if row.get("hint"):  # the model's proposal: a second line, never the answer
            lines.append(f"{' ' * len(where)} {row['hint']}")
    return lines


def render_segment_table(rows: Sequence[Mapping], width: int | None = None) -> str:
    """The end-of-run table: one line per segment (and server); stacked rows when wider
    than `width` (formatting.stacked_rows: no number is cut)."""
    if not rows:
        return "no segments"
    multi = any(r["server"] is not None for r in rows) and len({r["server"] for r in rows}) > 1
    headers = [
        "seg",
        *(["server"] if multi else []),
        "settings",
        "k",
        "requests",
        "accept-len",
        "TPOT ms",
        "out tok/s",
        "req/s",
        "best k",
        "c",
    ]  # best k: the best measured at that load (k=0 included), never a prediction
    body = []
    for r in rows:
        body.append(
            [
                str(r["segment"]),
                *([str(r["server"])] if multi else []),
                _settings_text(r["settings"]),
                _fmt(row_k(r), 0),  # 0: no speculation (the baseline)
                str(r["request_count"]),
                _fmt(r["acceptance_length"]),
                _fmt(r["tpot_ms"]),
                _fmt(r["output_token_throughput"], 1),
                _fmt(r["request_throughput"]),
                _fmt(r["recommended_k"], 0),
                _fmt(r["draft_cost"], 3),
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(headers)]
    if width is not None and sum(widths) + 2 * (len(widths) - 1) > width:
        lines = stacked_rows(headers, [[f"seg {row[0]}", *row[1:]] for row in body], width)
    else:
        lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    bases = dict.fromkeys(r.get("basis") for r in rows if r.get("basis"))
    lines += [f"model: {b}" for b in bases]
    # the model's proposal per segment, its basis said above: "seg 0 next: measure k=8, ..."
    hints = {r["segment"]: str(r["hint"]).split(" · ")[0] for r in rows if r.get("hint")}
    lines += [f"seg {seg} {h}" for seg, h in hints.items()]
    flags = dict.fromkeys(f for r in rows for f in r.get("flags") or ())
    lines += [f"health: {f}" for f in flags]
    return "Segments\n" + "\n".join(line.rstrip() for line in lines)


def _settings_text(settings: Mapping[str, Any]) -> str:
    names = {"concurrency": "conc", "request_rate": "rate", "output_tokens": "osl"}
    parts = [f"{names[k]}={settings[k]:g}" for k in SETTING_KEYS if settings.get(k) is not None]
    return " ".join(parts) or "-"


def _fmt(value: Any, digits: int = 2) -> str:
    return fmt_number(value, digits, grouping=False)
