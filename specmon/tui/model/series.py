"""Panel 3's time series as data: per-request figures folded into fine time bins
(`SeriesBins`), the series each one names (`SERIES`) and the windows `w` cycles (`WINDOWS`).
No Textual: the screen model builds them, tui/widgets/series.py draws them.

Definitions (docs/architecture.md, "Time series"): per time bin of the window, AL is
token-weighted (1 + Σaccepted / Σsteps of the requests that ended in the bin), TTFT p50 their
median TTFT and the error rate errors / requests ended in the bin. Output tokens/s counts
tokens when they arrived (each request's tokens spread over its first token .. end) and is
drawn only where complete (SeriesBins). The label's current value is the newest CURRENT_S
seconds of complete data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specmon.interfaces import SERIES_TIME

if TYPE_CHECKING:
    from specmon.pipeline import RequestResult

BIN_S = 0.25  # fine bins; a window folds them into at most `columns` display bins
# The label's current value is over this much of the newest complete data, not one column:
# a 0.25 s column of a steady 2,000 tok/s run reads +-10% (acceptance bursts), 3 s +-3%.
CURRENT_S = 3.0
NOW = "@now"  # data[key + NOW] = [the current value], when the source gives one
# data[STALL][c] = 1.0 where column c is a stall: a whole column after the first request
# ended in which none ended (drawn STALL_MARK in every series, never a blank)
STALL = "@stall"
# The sparklines' columns are at least long enough to hold this many request ends at the
# run's rate so far: a column's figures are then never a blank or one request's noise under
# steady load (4 req/s in 0.25 s columns left every other column empty: issue 36), and a
# column with none is a stall. Poisson at a mean of 5 leaves a column empty 0.7% of the time.
ENDS_PER_COLUMN = 5
# fetch(columns, min_column_s): the series binned to at most that many columns, each at
# least min_column_s long (a source whose columns are never shorter may ignore it)
Fetch = Callable[[int, float], dict[str, list[float | None]]]
TIME = SERIES_TIME  # data[TIME]: each column's middle, seconds from the start
PLOT_EVERY_S = 1.0  # the series fold every bin of the window: 1 Hz is plenty
RECENT_S = 10.0  # the headline's "last window" beside the run's output tok/s
# Bins older than FINE_KEEP_S behind the newest end (past every window but the run's) are
# folded into at most FOLDED_MAX wider bins (a power of two fine bins each, doubling as the
# run grows), each keeping at most 2 x TTFT_KEEP weighted TTFT values: the series' memory
# is bounded whatever the run's length (issue 35 item 6: 0.25 s bins and every TTFT over
# the whole run, ~120 MB a day).
FINE_KEEP_S = 120.0
FOLD_EVERY_S = 10.0  # fine bins are folded this many seconds' worth at a time
FOLDED_MAX = 1024
TTFT_KEEP = 16
# panel 3's windows (`w` cycles them): 10 s, 60 s, the whole run
WINDOWS: tuple[tuple[str, float | None], ...] = (("10 s", 10.0), ("60 s", 60.0), ("run", None))


@dataclass(frozen=True)
class SeriesSpec:
    key: str
    name: str
    fmt: str  # format spec of the numbers
    title: str  # the chart's title: what it is and its unit (short: a chart may be 36 wide)
    floor: float  # the chart's y axis starts here (AL is at least 1; the others 0)


SERIES: tuple[SeriesSpec, ...] = (
    SeriesSpec("al", "AL", ".2f", "AL (tokens/step)", 1.0),
    SeriesSpec("tok_s", "out tok/s", ",.0f", "output tok/s", 0.0),
    SeriesSpec("ttft_p50", "TTFT p50 ms", ",.1f", "TTFT p50 (ms)", 0.0),
    SeriesSpec("err_pct", "errors %", ".1f", "errors (% of requests)", 0.0),
)


@dataclass
class _Cell:
    """What the requests that ended in one time bin add up to."""

    ttfts: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0
    steps: int = 0
    accepted: int = 0
    tokens: int = 0  # output tokens of the requests that ended here
    # each TTFT's weight once folded (a quantile summary: _summarise); None: each one 1
    weights: list[float] | None = None

    def merge(self, other: _Cell) -> None:
        self.requests += other.requests
        self.errors += other.errors
        self.steps += other.steps
        self.accepted += other.accepted
        self.tokens += other.tokens
        if self.weights is None and other.weights is None:
            self.ttfts.extend(other.ttfts)
            return
        self.weights = _weights_of(self) + _weights_of(other)
        self.ttfts.extend(other.ttfts)

    def ttft_median(self) -> float | None:
        if self.weights is None:
            return _median(self.ttfts)
        return _weighted_median(self.ttfts, self.weights)

    def summarise(self) -> None:
        """Keep TTFT_KEEP evenly spaced quantiles of the TTFTs once over twice that many
        (a folded bin's median is then within 1/TTFT_KEEP of a rank of the exact one)."""
        if len(self.ttfts) > 2 * TTFT_KEEP:
            self.ttfts, self.weights = _summarise(self.ttfts, _weights_of(self), TTFT_KEEP)


@dataclass(frozen=True)
class Point:
    """One finished request as the series read it; times in seconds from the bins' origin."""

    end_s: float
    first_token_s: float | None  # None: no token time known (the tokens count at the end)
    ok: bool
    tokens: int
    steps: int
    accepted: int
    ttft_ms: float | None


class SeriesBins:
    """Per-request figures summed into fine time bins, fed incrementally from `results`.

    Time is seconds from the first result's start (results arrive in completion order, so
    the first one started at about the run's start); only results new since the last call
    are read, so a refresh costs O(new).

    Output tokens are counted when they arrived, not when their request ended: a request's
    tokens are spread evenly over its generation (first token to end), so a bin holds the
    tokens generated in it. A bin is complete once every request generating in it has
    ended; requests end in order of arrival here, so bins older than the newest end minus
    the longest generation seen are complete (`complete_s`). Newer bins would lack the
    tokens of requests still in flight and read low: they are not drawn, and the bin
    astride that time is divided by the part of it that is complete (issue 20: the newest,
    half-filled bin divided by the full width read 512 tok/s against a headline of 7,200).
    """

    def __init__(self, width_s: float = BIN_S) -> None:
        self.width_s = width_s
        self.seen = 0
        self._origin_ns: int | None = None
        self._bins: dict[int, _Cell] = {}  # by end time: AL, TTFT, errors
        self._tokens: dict[int, float] = {}  # by arrival time: output tokens
        self._latest_s = 0.0  # the newest end seen
        self._longest_s = 0.0  # the longest generation (first token to end) seen
        self._first_end_s: float | None = None  # the oldest end seen
        self._ends = 0  # requests seen
        # fine bins below _fine_start are folded: _folded[b // _fold] (and its tokens)
        self._fine_start = 0
        self._fold = 1  # fine bins per folded bin, a power of two
        self._folded: dict[int, _Cell] = {}
        self._folded_tokens: dict[int, float] = {}

    def add(self, results: Sequence[RequestResult]) -> None:
        for i in range(self.seen, len(results)):
            raw = result_point(results[i])
            if raw is None:
                continue
            end_ns, start_ns, ok, tokens, steps, accepted, ttft = raw
            if self._origin_ns is None:
                self._origin_ns = start_ns if start_ns is not None else end_ns
            end_s = max(0.0, (end_ns - self._origin_ns) / 1e9)
            first = None
            if start_ns is not None and ttft is not None:
                first = min(end_s, max(0.0, (start_ns - self._origin_ns) / 1e9 + ttft / 1e3))
            self.add_point(Point(end_s, first, ok, tokens, steps, accepted, ttft))
        self.seen = len(results)

    def add_point(self, p: Point) -> None:
        b = int(p.end_s / self.width_s)
        if b < self._fine_start:  # ended long before the newest: straight into its fold
            cell = self._folded.setdefault(b // self._fold, _Cell(weights=[]))
        else:
            cell = self._bins.setdefault(b, _Cell())
        cell.requests += 1
        cell.errors += 0 if p.ok else 1
        cell.steps += p.steps
        cell.accepted += p.accepted
        cell.tokens += p.tokens
        self._ends += 1
        if self._first_end_s is None or p.end_s < self._first_end_s:
            self._first_end_s = p.end_s
        if p.ttft_ms is not None:
            cell.ttfts.append(p.ttft_ms)
            if cell.weights is not None:
                cell.weights.append(1.0)
                cell.summarise()
        first = p.end_s if p.first_token_s is None else p.first_token_s
        self._spread(first, p.end_s, p.tokens)
        self._latest_s = max(self._latest_s, p.end_s)
        self._longest_s = max(self._longest_s, p.end_s - first)
        self._age()

    def _age(self) -> None:
        """Fold the fine bins more than FINE_KEEP_S behind the newest end, FOLD_EVERY_S at a
        time; widen the folded bins while there are over FOLDED_MAX of them."""
        w = self.width_s
        keep_from = int((self._latest_s - FINE_KEEP_S) / w)
        if keep_from - self._fine_start < FOLD_EVERY_S / w:
            return
        for b in range(self._fine_start, keep_from):
            cell = self._bins.pop(b, None)
            if cell is not None:
                self._fold_into(b // self._fold, cell)
            tokens = self._tokens.pop(b, None)
            if tokens is not None:
                key = b // self._fold
                self._folded_tokens[key] = self._folded_tokens.get(key, 0.0) + tokens
        self._fine_start = keep_from
        while keep_from / self._fold > FOLDED_MAX:
            self._widen()

    def _fold_into(self, key: int, cell: _Cell) -> None:
        folded = self._folded.setdefault(key, _Cell(weights=[]))
        folded.merge(cell)
        folded.summarise()

    def _widen(self) -> None:
        """Twice as wide folded bins: each pair merged."""
        self._fold *= 2
        cells, tokens = self._folded, self._folded_tokens
        self._folded, self._folded_tokens = {}, {}
        for key, cell in sorted(cells.items()):
            self._fold_into(key // 2, cell)
        for key, value in tokens.items():
            self._folded_tokens[key // 2] = self._folded_tokens.get(key // 2, 0.0) + value

    def _add_tokens(self, b: int, tokens: float) -> None:
        if b < self._fine_start:
            key = b // self._fold
            self._folded_tokens[key] = self._folded_tokens.get(key, 0.0) + tokens
        else:
            self._tokens[b] = self._tokens.get(b, 0.0) + tokens

    def _spread(self, t0: float, t1: float, tokens: int) -> None:
        """`tokens` evenly over [t0, t1] (all in t1's bin when the span is empty)."""
        w = self.width_s
        if tokens <= 0:
            return
        if t1 <= t0:
            self._add_tokens(int(t1 / w), tokens)
            return
        rate = tokens / (t1 - t0)
        b = int(t0 / w)
        while b * w < t1:
            self._add_tokens(b, rate * (min(t1, (b + 1) * w) - max(t0, b * w)))
            b += 1

    def last_s(self) -> float:
        """The newest end seen (seconds from the origin)."""
        return self._latest_s

    def steady_column_s(self) -> float:
        """The shortest sparkline column that holds ENDS_PER_COLUMN request ends at the
        rate seen so far (0 before ENDS_PER_COLUMN requests have ended: then no column
        is taken for a stall)."""
        first = self._first_end_s
        if first is None or self._ends < ENDS_PER_COLUMN or self._latest_s <= first:
            return 0.0  # no rate known yet: no column is a stall
        return ENDS_PER_COLUMN * (self._latest_s - first) / (self._ends - 1)

    def recent_tok_s(self, now_s: float, window_s: float) -> float | None:
        """Output tokens/s of the requests that ended in the last `window_s` before `now_s`
        (None until the run has lasted that long): a stall reads low at once, where the
        run's average hardly moves. Whole fine bins, the newest the one that holds now_s."""
        if self._first_end_s is None or now_s < window_s:
            return None
        w = self.width_s
        end_b = math.ceil(now_s / w - 1e-9)
        n = max(1, round(window_s / w))
        start_b = max(end_b - n, int(self._first_end_s / w))
        if end_b <= start_b:
            return None
        tokens = sum(self._bins[b].tokens for b in range(start_b, end_b) if b in self._bins)
        return tokens / ((end_b - start_b) * w)

    def complete_s(self) -> float:
        """Token bins before this time hold every token generated in them."""
        return self._latest_s - self._longest_s

    def series(
        self, window_s: float | None, now_s: float, columns: int, min_column_s: float = 0.0
    ) -> dict[str, list[float | None]]:
        """Each series as at most `columns` display bins over the last `window_s` (None: the
        run) up to `now_s`; a display bin is a whole number of fine bins, at least
        `min_column_s` long, the last one ending at the fine bin that holds `now_s` (a short
        run gets fewer columns)."""
        w = self.width_s
        end_b = max(1, math.ceil(now_s / w - 1e-9))
        start_b = 0 if window_s is None else max(0, math.floor((now_s - window_s) / w + 1e-9))
        per = max(
            1, math.ceil((end_b - start_b) / max(columns, 1)), math.ceil(min_column_s / w - 1e-9)
        )
        columns = max(1, math.ceil((end_b - start_b) / per))
        first_b = end_b - columns * per  # may be < 0: those fine bins are empty
        complete_b = math.floor(self.complete_s() / w + 1e-9)
        out: dict[str, list[float | None]] = {s.key: [] for s in SERIES}
        out[TIME] = [(first_b + (c + 0.5) * per) * w for c in range(columns)]
        out[STALL] = []
        first_end_b = math.inf if self._first_end_s is None else self._first_end_s / w
        steady = self.steady_column_s()
        now_b = now_s / w + 1e-9
        folded = self._folded_columns(first_b, per, columns)
        for c in range(columns):
            lo = first_b + c * per
            cell, old_tokens = folded.get(c) or (_Cell(), 0.0)
            for b in range(max(lo, self._fine_start), lo + per):
                if b in self._bins:
                    cell.merge(self._bins[b])
            # a stall: a whole column after the first end, none ended in it, at a known rate
            stalled = steady > 0 and not cell.requests and lo >= first_end_b and lo + per <= now_b
            out[STALL].append(1.0 if stalled else None)
            out["al"].append(1 + cell.accepted / cell.steps if cell.steps else None)
            out["tok_s"].append(self._rate(lo, lo + per, complete_b, old_tokens))
            out["ttft_p50"].append(cell.ttft_median())
            out["err_pct"].append(100.0 * cell.errors / cell.requests if cell.requests else None)
        out.update({key + NOW: [value] for key, value in self.current(now_s).items()})
        return out

    def current(self, now_s: float | None = None) -> dict[str, float | None]:
        """Each series over the newest CURRENT_S seconds of complete data: tokens/s up to
        complete_s(), the per-request figures of the requests that ended in that span. In a
        stall (nothing ended for CURRENT_S, or a steady column, up to `now_s`) tokens/s is
        0 and the per-request figures are unknown, not the last ones before it."""
        steady = self.steady_column_s()
        if now_s is not None and steady > 0 and now_s - self._latest_s > max(CURRENT_S, steady):
            return {"al": None, "tok_s": 0.0, "ttft_p50": None, "err_pct": None}
        w, n = self.width_s, max(1, round(CURRENT_S / self.width_s))
        complete_b = math.floor(self.complete_s() / w + 1e-9)
        tok = self._rate(max(0, complete_b - n), complete_b, complete_b) if complete_b > 0 else None
        last_b = int(self._latest_s / w)
        cell = _Cell()
        for b in range(last_b - n + 1, last_b + 1):
            if b in self._bins:
                cell.merge(self._bins[b])
        return {
            "al": 1 + cell.accepted / cell.steps if cell.steps else None,
            "tok_s": tok,
            "ttft_p50": _median(cell.ttfts),
            "err_pct": 100.0 * cell.errors / cell.requests if cell.requests else None,
        }

    def _folded_columns(
        self, first_b: int, per: int, columns: int
    ) -> dict[int, tuple[_Cell, float]]:
        """{column: (its folded bins merged, their tokens)}: a folded bin goes to the column
        that holds its first fine bin."""
        out: dict[int, tuple[_Cell, float]] = {}
        fold = self._fold
        for key in self._folded.keys() | self._folded_tokens.keys():
            c = (key * fold - first_b) // per
            if 0 <= c < columns:
                cell, tokens = out.get(c) or (_Cell(), 0.0)
                if key in self._folded:
                    cell.merge(self._folded[key])
                out[c] = (cell, tokens + self._folded_tokens.get(key, 0.0))
        return out

    def _rate(self, lo: int, hi: int, complete_b: int, folded_tokens: float = 0.0) -> float | None:
        """Tokens/s of fine bins lo..hi-1 over their complete part (the folded bins that
        start in it, with `folded_tokens`, count as complete); None under half complete
        (or before the first request)."""
        start = max(lo, 0, self._fine_start)
        covered = max(0, min(hi, complete_b) - start) + self._folded_span(lo, hi)
        if covered * 2 < hi - lo or covered <= 0:
            return None
        tokens = folded_tokens + sum(
            self._tokens.get(b, 0.0) for b in range(start, min(hi, complete_b))
        )
        return tokens / (covered * self.width_s)

    def _folded_span(self, lo: int, hi: int) -> int:
        """Fine bins folded into the folded bins that start in lo..hi-1 (the newest one
        may be cut by _fine_start)."""
        fold, fine_start = self._fold, self._fine_start
        first, end = -(-max(lo, 0) // fold), -(-min(hi, fine_start) // fold)  # ceil
        if end <= first:
            return 0
        return (end - first) * fold - max(0, end * fold - fine_start)


def result_point(
    r: RequestResult,
) -> tuple[int, int | None, bool, int, int, int, float | None] | None:
    """(end ns, start ns, ok, output tokens, steps, accepted, TTFT ms) of one result; the
    one place that reads RequestResult fields for the time series. Warmup is left out."""
    if r.phase == "warmup" or r.end_ns is None:
        return None
    metrics = r.metrics or {}
    spec = r.spec
    # a counts-only record (no verify steps) has no AL to add to a bin
    steps = spec.num_spec_steps if spec is not None else None
    accepted = spec.num_accepted_draft_tokens if spec is not None and steps is not None else 0
    ttft = metrics.get("time_to_first_token")
    return (
        int(r.end_ns),
        r.start_ns,
        r.ok,
        int(metrics.get("output_sequence_length") or 0) if r.ok else 0,
        steps or 0,
        accepted,
        float(ttft) if ttft is not None and r.ok else None,
    )


def _weights_of(cell: _Cell) -> list[float]:
    return cell.weights if cell.weights is not None else [1.0] * len(cell.ttfts)


def _weighted_median(xs: list[float], weights: list[float]) -> float | None:
    """The value where the cumulative weight reaches half (the mean of two values when it
    lands exactly between them): _median's answer when every weight is 1."""
    if not xs:
        return None
    pairs = sorted(zip(xs, weights))
    half, seen = sum(weights) / 2, 0.0
    for i, (x, weight) in enumerate(pairs):
        seen += weight
        if math.isclose(seen, half) and i + 1 < len(pairs):
            return (x + pairs[i + 1][0]) / 2
        if seen > half:
            return x
    return pairs[-1][0]


def _summarise(xs: list[float], weights: list[float], keep: int) -> tuple[list[float], list[float]]:
    """`keep` values at evenly spaced ranks of the weighted values, each weighing 1/keep of
    the total."""
    pairs = sorted(zip(xs, weights))
    total = sum(weights)
    step = total / keep
    out: list[float] = []
    seen, i = 0.0, 0
    for j in range(keep):
        target = (j + 0.5) * step
        while i < len(pairs) - 1 and seen + pairs[i][1] < target:
            seen += pairs[i][1]
            i += 1
        out.append(pairs[i][0])
    return out, [step] * keep


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
