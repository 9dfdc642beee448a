"""Goodput: a latency objective every surface chooses under (docs/tuning.md "SLO").

`--slo ttft=S,tpot=MS[,p=90]`: TTFT in seconds, TPOT in milliseconds, the percentile of
the requests that must meet them (p50, p90, p95 or p99; default p90, as guidellm's
goodput). One parser (`parse_slo`) and one check (`Slo.check`) for every surface: a sweep
cell (its repeats' percentiles, the median over repeats), a run or a load segment (one
sample: its own requests' percentiles). What misses it is not selectable (the reasons say
by how much); when nothing at a load meets it, the decision says so instead of picking the
fastest.

The figures are `Percentiles`: {"ttft_ms": {"p50": .., "p90": ..}, "tpot_ms": {...}} in ms,
TPOT being AIPerf's inter-token latency (as the sweep reads it): `percentiles_of_summary`
reads them from an AIPerf-shaped summary, `percentiles_of` computes them from per-request
values (the segments table).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specmon.errors import UserError
from specmon.stats import percentile

PERCENTILES = ("p50", "p90", "p95", "p99")
# (name shown, key in Percentiles, the summary's metric tag)
FIGURES = (("TTFT", "ttft_ms", "time_to_first_token"), ("TPOT", "tpot_ms", "inter_token_latency"))

Percentiles = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    percentile: str = "p90"

    def text(self) -> str:
        """'TTFT p90 <= 1 s, TPOT p90 <= 50 ms' (the basis words every surface shows)."""
        parts = []
        if self.ttft_ms is not None:
            parts.append(f"TTFT {self.percentile} <= {self.ttft_ms / 1000:g} s")
        if self.tpot_ms is not None:
            parts.append(f"TPOT {self.percentile} <= {self.tpot_ms:g} ms")
        return ", ".join(parts)

    def misses(self, ttft_ms: float | None, tpot_ms: float | None) -> list[str]:
        """Why figures (at `percentile`, ms) miss the objective; unknown figures miss."""
        out = []
        for name, limit, value in (
            ("TTFT", self.ttft_ms, ttft_ms),
            ("TPOT", self.tpot_ms, tpot_ms),
        ):
            if limit is None:
                continue
            if value is None:
                out.append(f"misses the SLO: no {name} {self.percentile} measured")
            elif value > limit:
                out.append(
                    f"misses the SLO: {name} {self.percentile} {value:.1f} ms > {limit:g} ms"
                )
        return out

    def figures(self, samples: Sequence[Percentiles]) -> tuple[float | None, float | None]:
        """(TTFT, TPOT) at the percentile: the median over the samples that have it."""
        return _median(samples, "ttft_ms", self.percentile), _median(
            samples, "tpot_ms", self.percentile
        )

    def check(self, samples: Sequence[Percentiles], tpot_scale: float = 1.0) -> list[str]:
        """The one check: why the samples (a cell's repeats; a run's or a segment's one)
        miss the objective, empty when they meet it. `tpot_scale` carries a measured TPOT to
        another k (the decision's prediction, docs/tuning.md "SLO")."""
        ttft, tpot = self.figures(samples)
        return self.misses(ttft, None if tpot is None else tpot * tpot_scale)


def _median(samples: Sequence[Percentiles], name: str, p: str) -> float | None:
    present = [float(v) for s in samples if (v := (s.get(name) or {}).get(p)) is not None]
    return float(statistics.median(present)) if present else None


def percentiles_of_summary(summary: Mapping[str, object]) -> dict[str, dict[str, float]]:
    """TTFT and TPOT (AIPerf's ITL) percentiles, ms, from a run's summary (its metric blocks
    carry p50..p99)."""
    out = {}
    for _, name, tag in FIGURES:
        stats = summary.get(tag)
        if not isinstance(stats, Mapping):
            continue
        got = {p: float(stats[p]) for p in PERCENTILES if isinstance(stats.get(p), (int, float))}
        if got:
            out[name] = got
    return out


def percentiles_of(values: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    """{"ttft_ms": [per-request ms, ...], ...} -> the Percentiles of each (the summary's
    interpolation, specmon.stats.percentile); names without values are left out."""
    out = {}
    for name, vals in values.items():
        if vals:
            ordered = sorted(vals)
            out[name] = {p: percentile(ordered, float(p[1:])) for p in PERCENTILES}
    return out


def parse_slo(text: str) -> Slo:
    """'ttft=1,tpot=50' or 'ttft=0.5,p=99' -> Slo; ValueError with a one-line reason."""
    values: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key.strip() not in ("ttft", "tpot", "p"):
            raise ValueError(f"--slo: '{part}' is not ttft=S, tpot=MS or p=90")
        values[key.strip()] = value.strip()
    percentile_name = "p" + values.get("p", "90").removeprefix("p")
    if percentile_name not in PERCENTILES:
        raise ValueError(f"--slo: p={values['p']}: choose one of 50, 90, 95, 99")
    try:
        ttft = float(values["ttft"]) * 1000 if "ttft" in values else None
        tpot = float(values["tpot"]) if "tpot" in values else None
    except ValueError:
        raise ValueError(f"--slo: '{text}': ttft and tpot must be numbers") from None
    if ttft is None and tpot is None:
        raise ValueError("--slo: give ttft=S and/or tpot=MS")
    if any(v is not None and not v > 0 for v in (ttft, tpot)):
        raise ValueError(f"--slo: '{text}': limits must be positive")
    return Slo(ttft, tpot, percentile_name)


def slo_option(text: str | None) -> Slo | None:
    """--slo as any command got it (None: not given), parsed; malformed, a one-line
    UserError (exit status 2), so every command refuses it in the same words and before
    anything runs."""
    if text is None:
        return None
    try:
        return parse_slo(text)
    except ValueError as exc:
        raise UserError(str(exc)) from None
