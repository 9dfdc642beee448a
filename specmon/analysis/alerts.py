"""`specmon watch --alert EXPR`: a threshold on one watch figure that must hold for a time.

EXPR is `METRIC OP NUMBER [for Ns]`: METRIC is `al` (the interval's acceptance length),
`acc` (its draft acceptance rate, a fraction 0..1) or `tps` (the server's generation
tokens/s); OP is `<` or `>`; `for 60s` (or `for 60`) is how long the condition must hold
without a break, 0 (the first scrape that meets it) when left out. A scrape whose figure
misses the condition breaks the streak; one without the figure (no verify step counted in
the interval: counters move in bursts as requests finish; a failed scrape) neither breaks
nor confirms it, and the alert fires only on a scrape that has the figure, so a server that
went idle raises nothing.
Pure: `AlertTracker.update` takes one scrape's figure and says when the alert fires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specmon.errors import UserError

METRICS = {
    "al": "acceptance length",
    "acc": "draft acceptance rate",
    "tps": "generation tokens/s",
}
_EXPR = re.compile(
    r"^\s*(\w+)\s*([<>])\s*([0-9]*\.?[0-9]+)\s*(?:for\s+([0-9]*\.?[0-9]+)\s*s?)?\s*$"
)


@dataclass(frozen=True)
class AlertRule:
    metric: str  # a key of METRICS
    op: str  # "<" or ">"
    threshold: float
    for_s: float
    text: str  # as given

    def holds(self, value: float) -> bool:
        return value < self.threshold if self.op == "<" else value > self.threshold


def parse_alert(text: str) -> AlertRule:
    """The rule of `--alert TEXT`; a UserError (one line) naming what is wrong."""
    match = _EXPR.match(text)
    if match is None:
        raise UserError(
            f"--alert '{text}': give METRIC <|> NUMBER [for Ns], e.g. 'al<1.5 for 60s' "
            f"(METRIC: {', '.join(METRICS)})"
        )
    metric, op, number, for_s = match.groups()
    if metric not in METRICS:
        raise UserError(
            f"--alert '{text}': unknown metric '{metric}' (one of {', '.join(METRICS)})"
        )
    threshold = float(number)
    if metric == "acc" and threshold > 1:
        raise UserError(
            f"--alert '{text}': acc is a fraction 0..1 (e.g. acc<0.5), not a percentage"
        )
    return AlertRule(metric, op, threshold, float(for_s or 0), text.strip())


@dataclass
class AlertTracker:
    """Per server: since when the rule has held without a break."""

    rule: AlertRule
    _since: dict[str, float] = field(default_factory=dict)

    def update(self, server: str, t_s: float, value: float | None) -> str | None:
        """One scrape of `server` at `t_s` seconds; the alert line when the rule has now
        held for `for_s` seconds (measured scrape to scrape), else None."""
        if value is None:
            return None
        if not self.rule.holds(value):
            self._since.pop(server, None)
            return None
        since = self._since.setdefault(server, t_s)
        if t_s - since < self.rule.for_s:
            return None
        name = METRICS[self.rule.metric]
        return (
            f"specmon watch: ALERT '{self.rule.text}' on {server}: {name} {value:.3g} "
            f"{self.rule.op} {self.rule.threshold:g} for {t_s - since:.1f} s (since {since:.1f} s)"
        )
