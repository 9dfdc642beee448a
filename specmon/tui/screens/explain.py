"""`e`: every metric on screen in plain words, with its formula (docs/metrics.md §3-§6)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# One entry a paragraph: the name, its plain words (wrapped freely), then "formula: ...".
# a = accepted drafts, d = proposed drafts, s = verify steps of one request; sums run over
# requests with a spec-decode record.
_GLOSSARY = """
Symbols
for one request: a = accepted draft tokens, d = proposed (drafted) tokens, s =
verify steps; k = draft tokens the server proposes per step (--num-spec-tokens); Σ
sums over the requests with a spec-decode record; h_j = verify steps that accepted
exactly j drafts; S_i, a_i, n_i and E(k') as defined below; c = draft cost (below);
p50 / p90 / p99 = percentiles over requests
formula: AL, rates and histograms all follow from a, d, s and h

Acceptance Length (AL)
tokens the target model emits per verify step, bonus token included; averaged per
request (each request counts once)
formula: AL = 1 + a / s, range 1 .. k+1

Token-Weighted Acceptance Length
the same over all steps pooled, so long requests weigh more
formula: 1 + Σa / Σs

Draft Acceptance Rate
share of proposed draft tokens the target accepted, per request; depends on k
formula: 100 · a / d  (%)

Overall Draft Acceptance Rate
the same pooled over all drafts
formula: 100 · Σa / Σd  (%)

Accepted per Verified
emitted tokens per verified token
formula: (a + s) / (d + s)

Spec Decode Steps
verify steps of a request
formula: s

Zero-Step Requests
requests whose payload had no verify step (excluded from the distributions)
formula: count

Histogram
share of verify steps that accepted exactly j drafts, pooled over the run; buckets
>= 8 folded
formula: h_j / Σ h

P(acc>=i)
unconditional chance that draft position i is accepted (vLLM's per-position rate)
formula: S_i = Σ_{j>=i} h_j / Σ h

P(i|i-1)
chance position i is accepted given i-1 was; with a Wilson 95 % interval over n_i =
Σ_{j>=i-1} h_j trials
formula: a_i = S_i / S_{i-1}

Time series (panel 3)
per time bin of the window (w: 10 s, 60 s, whole run), over the requests that ended
in the bin: token-weighted AL, output tokens/s, median TTFT and the error share;
each labelled with its current (latest bin), min and max
formula: AL 1 + Σa / Σs · tok/s Σ output tokens / bin width · errors % 100 · errors / requests

TTFT
time to first token: first content response minus request start
formula: ms

TPOT
time per output token (AIPerf: inter token latency); token-normalised, so it drops
when more drafts are accepted
formula: (latency - TTFT) / (output tokens - 1)

Request Latency
last content response minus request start
formula: ms

Output tok/s/user
decode speed seen by one user
formula: 1 / TPOT (s)

Output tok/s
run throughput
formula: Σ output tokens / benchmark duration

Requests/s (req/s)
AIPerf's request_throughput, the one request-rate figure (header and table): valid
requests over the benchmark duration, first request start to last response
formula: request count / benchmark duration

Errors
failed requests (HTTP error, timeout, broken stream, cancelled...)
formula: count

What-if E(k')
expected tokens per verify step had the server run k' drafts: exact by truncation up
to the measured k; beyond it (marked *) each further position is accepted with a_k,
the band from a_k's 95 % interval
formula: E(k') = 1 + S_1 + ... + S_k'

Predicted speedup
E(k') over the cost of one step with k' drafts; c = draft step time / target step
time, assumed 0.1 unless --draft-cost is given, +/- change it; best k = the highest
speedup. Batch size moves it: compare TPOT per segment
formula: E(k') / (1 + c k')

Segments
each change of concurrency (< >), request rate (r R) or output length (o O) starts a
segment; per segment: acceptance length, TPOT, throughput and best k
formula: TPOT = mean ITL; out tok/s = Σ output tokens / segment window

Server-wide (/metrics)
vLLM's own spec-decode counters over the run's window, summed over engines; counts
every client of the server, so it may differ from the per-request totals
(reconciliation names likely causes)
formula: AL = 1 + Δaccepted / Δdrafts; position i: ΔP_i / Δdrafts
"""


def _entries(text: str) -> tuple[tuple[str, str, str], ...]:
    """(name, plain words, formula) of each paragraph of the glossary."""
    out = []
    for block in text.strip().split("\n\n"):
        name, *words, formula = block.splitlines()
        out.append((name, " ".join(words), formula.removeprefix("formula: ")))
    return tuple(out)


EXPLANATIONS: tuple[tuple[str, str, str], ...] = _entries(_GLOSSARY)


class ExplainScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,e", "dismiss", "Close"), Binding("s", "app.screenshot", "Save")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="explain-body", classes="modal-body") as body:
            body.border_title = "What the numbers mean (esc closes)"
            for name, words, formula in EXPLANATIONS:
                yield Static(
                    f"[b]{name}[/b]: {words}\n  [i]{formula}[/i]",
                    markup=True,
                    classes="explain-item",
                )

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
