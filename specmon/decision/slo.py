"""Goodput: a latency objective every surface chooses under (docs/tuning.md "SLO").

`--slo ttft=S,tpot=MS[,p=90]`: TTFT in seconds, TPOT in milliseconds, the percentile of
each repeat's requests that must meet them (p50, p90, p95 or p99; default p90, as
guidellm's goodput). A cell that misses it is not selectable (its reasons say by how much);
when no cell at a load meets it, the decision says so instead of picking the fastest.
"""

from __future__ import annotations

from dataclasses import dataclass

PERCENTILES = ("p50", "p90", "p95", "p99")


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    percentile: str = "p90"

    def text(self) -> str:
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


def parse_slo(text: str) -> Slo:
    """'ttft=1,tpot=50' or 'ttft=0.5,p=99' -> Slo; ValueError with a one-line reason."""
    values: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key.strip() not in ("ttft", "tpot", "p"):
            raise ValueError(f"--slo: '{part}' is not ttft=S, tpot=MS or p=90")
        values[key.strip()] = value.strip()
    percentile = "p" + values.get("p", "90").removeprefix("p")
    if percentile not in PERCENTILES:
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
    return Slo(ttft, tpot, percentile)
