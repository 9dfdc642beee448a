"""View-model for "tune k while you watch": the what-if panel, one card per server,
the segments table and the server's own counters. No Textual here: plain data and strings,
so every number is testable without a terminal. Per-position acceptance and E(k') come from
specmon.decision.acceptance (docs/tuning.md §2-§5); the recommended k, its basis, P(best),
band and caveat from specmon.decision, through the segments table's rows when the run has
them (the same measurements, the same live draft cost), so the what-if panel, the cards,
the segments table and `specmon tune` give one k and name its basis (docs/tuning.md §6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specmon import decision
from specmon.analysis.segments import _settings_text, row_k
from specmon.constants import DEFAULT_DRAFT_COST
from specmon.decision.acceptance import TuningEstimate, analyze
from specmon.server.scrape import CounterDelta, Reconciliation, ServerCounterView, reconcile
from specmon.server.server_view import live_verdict

COST_STEP = 0.01
COST_MAX = 2.0


@dataclass(frozen=True)
class DraftCost:
    """The draft cost ratio c the what-if uses; `assumed` until the user gives one."""

    value: float
    assumed: bool

    def label(self) -> str:
        source = "assumed" if self.assumed else "given"
        return f"c={self.value:.2f} ({source}; +/- {COST_STEP:g})"

    @property
    def given(self) -> float | None:
        """What decision.advise is told: None while assumed (it then states its own assumption)."""
        return None if self.assumed else self.value

    def step(self, direction: int) -> DraftCost:
        """One +/- press; the user's choice is no longer an assumption."""
        value = round(min(max(self.value + direction * COST_STEP, 0.0), COST_MAX), 4)
        return DraftCost(value, False)


def initial_draft_cost(given: float | None) -> DraftCost:
    """--draft-cost when given, else the assumed default."""
    return (
        DraftCost(float(given), False) if given is not None else DraftCost(DEFAULT_DRAFT_COST, True)
    )


def measured_k(hist: Mapping[int, int], k: int | None) -> int | None:
    """The server's k, or the deepest bucket seen when the records do not say it."""
    observed = max((j for j, n in hist.items() if n), default=None)
    if k is None:
        return observed if observed else None
    return max(int(k), observed or 0)


@dataclass(frozen=True)
class WhatIf:
    """One server's what-if: the estimate (a_i, E(k'), bands) and the recommended k with its
    basis, predicted gains vs k'=0, text and caveat, as specmon.decision gave it (KChoice)."""

    estimate: TuningEstimate
    k: int | None
    gain: Mapping[int, float]
    text: str
    caveat: str = ""
    proposal: str = ""  # the model's "next: measure k=8, predicted +5% [-3..+12] · basis" or ""

    @property
    def head(self) -> str:
        """'best k=3 (2.40x)' without the basis (KChoice.text joins its parts with ' · ')."""
        return self.text.split(" · ", 1)[0]


def current_row(rows: Sequence[Mapping[str, Any]] | None, label: str) -> Mapping[str, Any] | None:
    """The server's latest segment row with verify steps (the load it runs now); a row of
    server None is a one-server run's."""
    mine = [r for r in rows or () if r.get("server") in (label, None) and r.get("steps")]
    return max(mine, key=lambda r: r["segment"], default=None)


def what_if(
    hist: Mapping[int, int],
    k: int | None,
    cost: float | None,
    rows: Sequence[Mapping[str, Any]] | None = None,
    label: str = "run",
    throughput: float | None = None,
) -> WhatIf | None:
    """The what-if for one server's pooled histogram; None with no steps or no k. The k is
    the segments table's answer for the server's current segment when `rows` has one (rows
    computed with this `cost`), else decision.advise over the histogram alone; `cost` None =
    unknown (advise assumes its default and says so); `throughput` the run's output tok/s,
    the measured figure of its one arm."""
    kk = measured_k(hist, k)
    if not kk or sum(hist.values()) <= 0:
        return None
    dense = {int(j): int(n) for j, n in hist.items()}
    est = analyze(dense, kk, DEFAULT_DRAFT_COST if cost is None else cost)
    row = current_row(rows, label)
    if row is not None:
        gains = {int(j): float(g) for j, g in (row.get("predicted_gain_vs_k0") or {}).items()}
        text = str(row["recommendation"])
        proposal = str(row.get("hint") or "")
        caveat = str(row.get("caveat") or "")
        return WhatIf(est, row["recommended_k"], gains, text, caveat, proposal)
    measured = decision.Measurement(kk, None, dense, throughput=throughput)
    choice = decision.advise([measured], None, cost)
    proposal = choice.next_line()
    return WhatIf(est, choice.k, choice.gain, choice.text(), choice.caveat(), proposal)


def short_caveat(w: WhatIf) -> str:
    """The decision's caveat (over every server's measured k, so a k=4 server beside this
    one is never called 'beyond the measured k'); the batch-size clause is shown beside it."""
    return w.caveat or w.estimate.caveat.split(";", 1)[0]


def _f(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def position_cells(est: TuningEstimate) -> list[tuple[str, str, str, str]]:
    """(i, S_i, a_i, [lo-hi]) per measured position."""
    out = []
    for p in est.positions:
        ci = "-" if p.ci95 is None else f"[{p.ci95[0]:.2f}-{p.ci95[1]:.2f}]"
        out.append((str(p.position), _f(p.unconditional), _f(p.conditional), ci))
    return out


def prediction_cells(w: WhatIf) -> list[tuple[str, str, str, str, bool]]:
    """(k', E(k'), band, gain, best) per predicted k'; extrapolated k' carry a '*' and no
    gain (never the plain recommendation: the hint names the best of them)."""
    out = []
    for p in w.estimate.predictions:
        band = "" if not p.extrapolated or p.low is None else f"{p.low:.2f}-{p.high:.2f}"
        label = f"{p.k}*" if p.extrapolated else str(p.k)
        gain = w.gain.get(p.k)
        out.append((label, _f(p.acceptance_length, ".2f"), band, _f(gain, ".2f"), p.k == w.k))
    return out


def recommendation_text(w: WhatIf | None) -> str:
    """The short answer (cards, strips, panel titles): 'measured best k=3: 1,234 tok/s' (the
    head's first clause: its margins are on the headline and the what-if panel)."""
    if w is None:
        return "what-if appears with the first verify steps"
    return w.head.split(", ")[0]


@dataclass(frozen=True)
class ServerCard:
    """One server's column in panel 8 (servers side by side)."""

    label: str
    k: int | None
    requests: int
    acceptance_length: float | None
    acceptance_rate: float | None  # %
    histogram: tuple[tuple[int, int], ...]
    recommendation: str
    source: str  # "" or " (server-wide)"
    survival: tuple[float, ...] = ()  # S_i per position (vLLM's per-position rate)


# ---------------------------------------------------------------- the server's counters


@dataclass(frozen=True)
class CounterStatus:
    lines: list[str]
    histogram: dict[int, int] | None  # server-wide H[j], for panels without per-request stats
    k: int | None
    acceptance_length: float | None = None  # server-wide, 1 + Δaccepted / Δdrafts
    acceptance_rate: float | None = None  # server-wide, Δaccepted / Δdraft_tokens (0..1)
    no_drafts: bool = False  # counters present, no verify step counted in the window


def _no_steps_text(snapshot: Any) -> str:
    """Counters that counted no verify step: none yet, or, with requests answered, none
    ever (a server at k=0: waiting brings none)."""
    if snapshot is not None and snapshot.request_count:
        return "no verify steps: no speculation on this server"
    return "no verify steps yet"


def counter_status(
    view: ServerCounterView | None,
    snapshot: Any,
    now_s: float | None = None,
    reconciled: bool = True,
) -> CounterStatus:
    """What the poller says now: window figures, per position, reconciliation (left out
    when `reconciled` is False: `specmon watch` sends no requests to reconcile with)."""
    if view is None:
        return CounterStatus(["server /metrics: not polled"], None, None)
    delta: CounterDelta | None = view.delta
    if delta is None:
        why = view.error or "no sample yet"
        return CounterStatus([f"server /metrics: {why}"], None, None)
    if not delta.present:
        return CounterStatus(["server /metrics: no spec-decode counters"], None, None)
    if not delta.drafts and not delta.missing:
        return CounterStatus(
            [
                f"server-wide ({delta.label_sets} engine(s), {delta.duration_s:.0f} s): "
                + _no_steps_text(snapshot)
            ],
            None,
            None,
            no_drafts=True,
        )
    rate = "-" if delta.acceptance_rate is None else f"{100 * delta.acceptance_rate:.1f}%"
    al = "-" if delta.acceptance_length is None else f"{delta.acceptance_length:.2f}"
    steps = delta.count("drafts")
    per_pos = " ".join(f"{r:.2f}" for r in delta.per_position_rates or []) or "-"
    lines = [
        f"server-wide /metrics: {delta.label_sets} engine(s), {delta.duration_s:.0f} s window",
        f"AL {al} · draft acceptance {rate} · {'-' if steps is None else f'{steps:,}'} steps",
        f"per position: {per_pos}",
    ]
    rejected = delta.missing_text("accepted", "drafts", "draft_tokens", "per_pos")
    if rejected:
        lines.append(f"{rejected}: missing, not zero")
    if reconciled:
        lines.append(reconciliation_line(view, snapshot, now_s))
    hist = delta.histogram()
    return CounterStatus(
        lines,
        {j: n for j, n in enumerate(hist)} if hist else None,
        delta.num_spec_tokens or None,
        delta.acceptance_length,
        delta.acceptance_rate,
    )


def reconciliation_line(view: ServerCounterView, snapshot: Any, now_s: float | None = None) -> str:
    """The live verdict (server_view.live_verdict) in one line. A view without the client's
    side of each scrape (no ClientProbe) is compared with `snapshot` as it is."""
    verdict = live_verdict(view, now_s)
    if verdict is None:
        assert view.delta is not None
        return _verdict_text(reconcile(view.delta, snapshot), "")
    if verdict.state == "settling":
        diffs = _diff_text(verdict.reconciliation)
        shown = f" (server − run: {diffs})" if diffs else ""
        return f"reconciliation: settling{shown}; {verdict.why}"
    assert verdict.reconciliation is not None
    return _verdict_text(verdict.reconciliation, f" at the scrape {verdict.age_s:.0f} s ago")


def _diff_text(rec: Reconciliation | None) -> str:
    """Totals only (the per-bucket differences are in the export)."""
    if rec is None:
        return ""
    return ", ".join(f"{name} {d:+,}" for name, d in rec.diffs.items() if "[" not in name)


def _verdict_text(rec: Reconciliation, when: str) -> str:
    if rec.equal:
        return f"reconciliation: equal{when} (counters match the per-request totals)"
    likely = rec.reasons[0].split(":")[0] if rec.reasons else "cause unknown"
    return (
        f"reconciliation: differs{when} (server − run: {_diff_text(rec) or 'histogram only'}); "
        f"likely: {likely}"
    )


# ---------------------------------------------------------------- segments


SEGMENT_HEADERS = (
    "seg",
    "server",
    "settings",
    "k",
    "req",
    "AL",
    "TPOT ms",
    "out tok/s",
    "req/s",
    "best k",
)


def segment_cells(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """One display row per segment row of SegmentTable.rows()."""
    out: list[tuple[str, ...]] = []
    for r in rows:
        out.append(
            (
                str(r["segment"]),
                "-" if r.get("server") is None else str(r["server"]),
                _settings_text(r.get("settings") or {}),
                _f(row_k(r), "d"),  # 0: a server without speculation
                str(r["request_count"]),
                _f(r.get("acceptance_length"), ".2f"),
                _f(r.get("tpot_ms"), ".2f"),
                _f(r.get("output_token_throughput"), ".1f"),
                _f(r.get("request_throughput"), ".2f"),
                "-" if r.get("recommended_k") is None else str(r["recommended_k"]),
            )
        )
    return out


# ---------------------------------------------------------------- run-time knobs


def next_setting(current: float | int | None, direction: int, integer: bool) -> float | int:
    """Double or halve a load setting (at least 1); from nothing, start at 1."""
    if not current:
        return 1 if integer else 1.0
    value = current * 2 if direction > 0 else current / 2
    if integer:
        return max(1, int(round(value)))
    return max(0.25, round(value, 3))
