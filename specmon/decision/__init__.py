"""The one place specmon decides k (issue 17; docs/tuning.md): every surface calls it once
and only paints the answer.

* `acceptance.py`: per-position acceptance from the accepted-drafts histogram, E(k') and
  its bands (the acceptance model);
* `stepcost.py`: the step-time models, bounded (verification cost non-decreasing in k and
  batch, draft cost >= 0): batch-aware over sweep cells, per segment at one k;
* `gates.py`: measurement health (errors, a saturated client, a lagging server, too few
  requests) that excludes a point from every selection;
* `choose.py`: the decision: the basis the measurements allow, bounds, P(best), the
  extrapolated k with its band, flags;
* `cells.py`: the sweep's selection over measured cells (median - 1.4826 MAD, the
  unstable-cell rule, P(sel.)), which the sweep table, sweep.json, tune and compare paint;
* `slo.py`: the `--slo` parser and the one check of a point against it;
* `sweep_types.py`: the sweep's inputs (`Cell`, `RepeatMeasurement`), `schedule.py`: vLLM's
  per-batch-size schedule from the cells' decisions.

* `measured.py`: the measured answer at one load (the best arm measured, its margins with
  90% intervals, P(best)) and the proposal's shape;
* `answer.py`: the measurement leads, the model proposes the next k (issue 31): the entry
  point every surface calls.

`advise(measurements, concurrency, draft_cost, slo=None)` is the entry point (a `KChoice`
whose `k` is the best arm measured at that load, k=0 included, and whose `proposal` is the
model's "next: measure k=..."); `choose.choose` is the model alone, which only proposes.
"""

from specmon.decision.answer import advise, advise_per_load
from specmon.decision.choose import KChoice, Measurement
from specmon.decision.gates import Health

__all__ = ["Health", "KChoice", "Measurement", "advise", "advise_per_load"]
