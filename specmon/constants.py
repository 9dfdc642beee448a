"""Numbers more than one module needs, each declared once."""

from __future__ import annotations

from typing import Final

NS_PER_S: Final = 1_000_000_000
# AIPerf converts units as value * (target per-second / source per-second), so specmon
# multiplies by these factors rather than dividing (docs/metrics.md §1).
MS_PER_NS: Final = 1_000 / NS_PER_S  # 1e-06
S_PER_NS: Final = 1 / NS_PER_S  # 1e-09

# The console histogram line and the monitor fold accepted-draft buckets >= this into one
# ">=8" entry, as AIPerf's console does (docs/metrics.md §8.4). Exports stay uncapped.
HIST_FOLD_CAP: Final = 8

# The percentiles specmon computes for every record metric (AIPerf's set); the console
# tables show the ones --metric-percentiles names.
PERCENTILES: Final[tuple[int, ...]] = (1, 5, 10, 25, 50, 75, 90, 95, 99)

# Draft cost c = draft step time / target step time assumed when neither --draft-cost nor
# runs at several k give one: a typical small-drafter ratio, always labelled "assumed"
# (docs/tuning.md §5).
DEFAULT_DRAFT_COST: Final = 0.1

# The garbage collector's thresholds in a specmon process (cli.py, from before the command's
# imports; run/assemble.py for a run started in-process). Imports and every request allocate
# many objects that live long or not at all; at the default gen-0 threshold (700) the
# collector runs thousands of times a second under load. These cut specmon's CPU per request
# by about 10% (benchmarks/bench_load.py) and the imports of `specmon run` by 30-70 ms of
# 0.45 s, for a little garbage that lives longer.
GC_THRESHOLDS = (10_000, 50, 1_000)
