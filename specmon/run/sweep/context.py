"""The sweep's context axis (`specmon sweep --input-tokens 512,8192,32768`): the whole k x
concurrency sweep once per prompt length, then one table of decisions per (concurrency,
input length) (docs/tuning.md §11).

Each length L is an ordinary sweep in `DIR/ctx{L}/` (its own sweep.json, cells, decisions
and schedule), measured with synthetic prompts of exactly L tokens, so every cell is decided
by the same measured-first rule as any other sweep (decision/cells.py: the best measured
arm, ties to the smaller k). `DIR/sweep.json` (schema `specmon-sweep-context/1`) holds the
2-D table, the lengths where the selected k differs, and which length's schedule was kept:
`DIR/speculative_k_schedule.json` is the `--context` length's own (vLLM's merged
`num_speculative_tokens_per_batch_size`; no unmerged context key is ever written).
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from specmon.config import RunConfig
from specmon.decision.schedule import SCHEDULE_NAME
from specmon.decision.sweep_types import SWEEP_JSON
from specmon.errors import UserError
from specmon.export.common import atomic_write
from specmon.run.sweep.settings import SCHEMA, SweepSettings

CONTEXT_SCHEMA = "specmon-sweep-context/1"
# the run options a length sets: synthetic prompts of exactly that many tokens
PROMPT_FIELDS = ("prompt_source", "synthetic_input_tokens_mean", "synthetic_input_tokens_stddev")

# one length's sweep: (settings, load config, its directory, its earlier cells) -> exit status
RunOne = Callable[[SweepSettings, RunConfig, str, list[dict[str, Any]] | None], int]


def length_dir(length: int) -> str:
    return f"ctx{length}"


def chosen_context(lengths: list[int], context: int | None) -> int:
    """--context, which must be one of the lengths; default their median (the lower
    middle one of an even count, so it is a length that was measured)."""
    if context is None:
        return int(statistics.median_low(lengths))
    if context not in lengths:
        raise UserError(
            f"--context {context}: give one of the --input-tokens lengths "
            f"({','.join(map(str, lengths))})"
        )
    return context


def check_prompts(config: RunConfig) -> None:
    """--input-tokens makes its own prompts: a dataset or prompt file would be ignored."""
    if config.dataset or config.input_file:
        raise UserError(
            "--input-tokens measures synthetic prompts of each length: drop --dataset / "
            "--input-file"
        )


def for_length(
    settings: SweepSettings, config: RunConfig, length: int
) -> tuple[SweepSettings, RunConfig]:
    """The sweep's settings and load config with synthetic prompts of `length` tokens."""
    prompts = {
        "prompt_source": "synthetic",
        "synthetic_input_tokens_mean": length,
        "synthetic_input_tokens_stddev": 0.0,
    }
    return replace(settings, load={**settings.load, **prompts}), config.model_copy(update=prompts)


def run_context_sweep(
    settings: SweepSettings,
    config: RunConfig,
    artifact_dir: str,
    lengths: list[int],
    context: int | None,
    run_one: RunOne,
    out: TextIO,
) -> int:
    """Every length's sweep in turn (cells already in `ctx{L}/sweep.json` are kept, as
    --resume keeps them), then the table and the schedule. The worst exit status wins; a
    stop (128 + signal) ends the lengths still to run."""
    check_prompts(config)
    chosen = chosen_context(lengths, context)
    root = Path(artifact_dir)
    status = 0
    for length in lengths:
        where = root / length_dir(length)
        print(f"specmon sweep: input length {length} tokens -> {where}", file=out, flush=True)
        one_settings, one_config = for_length(settings, config, length)
        code = run_one(one_settings, one_config, str(where), _earlier_cells(where))
        status = max(status, code)
        if code >= 128:  # stopped: the lengths left are not started
            break
    doc = context_document(settings, root, lengths, chosen)
    _write(root, doc)
    print(render_context_table(doc), file=out, flush=True)
    return status


def _document(where: Path) -> dict[str, Any]:
    """where/sweep.json as a dict ({} when missing or unreadable)."""
    try:
        doc = json.loads((where / SWEEP_JSON).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def read_context_sweep(artifact_dir: str | Path) -> dict[str, Any] | None:
    """DIR/sweep.json when it is a context sweep's (None otherwise: an ordinary sweep's, or
    none, which read_sweep reports)."""
    doc = _document(Path(artifact_dir))
    return doc if doc.get("schema") == CONTEXT_SCHEMA else None


def _earlier_cells(where: Path) -> list[dict[str, Any]] | None:
    """The cells a length's earlier run measured (kept as --resume keeps them)."""
    doc = _document(where)
    return doc.get("cells") if doc.get("schema") == SCHEMA else None


def _decisions(where: Path) -> dict[int, dict[str, Any]]:
    """concurrency -> the length's decision (empty when it was not decided)."""
    return {int(d["concurrency"]): d for d in _document(where).get("decisions") or []}


def context_document(
    settings: SweepSettings, root: Path, lengths: list[int], chosen: int
) -> dict[str, Any]:
    """DIR/sweep.json of a context sweep: the 2-D table, where k differs, the schedule kept."""
    decided = {length: _decisions(root / length_dir(length)) for length in lengths}
    table = []
    for c in settings.concurrencies:
        for length in lengths:
            d = decided[length].get(c, {})
            table.append(
                {
                    "concurrency": c,
                    "input_tokens": length,
                    "selected_k": d.get("selected_k"),
                    "best_k": d.get("best_k"),
                    "selected_median": d.get("selected_median"),
                    "selected_vs_best_percent": d.get("selected_vs_best_percent"),
                    "reason": d.get("reason"),
                }
            )
    return {
        "schema": CONTEXT_SCHEMA,
        "input_tokens": lengths,
        "context": chosen,
        "settings": settings.to_dict(),
        "sweeps": {str(length): length_dir(length) for length in lengths},
        "table": table,
        "k_differs_by_context": _differs(table, settings.concurrencies),
        "schedule": {
            "file": SCHEDULE_NAME,
            "from_input_tokens": chosen,
            "key": "num_speculative_tokens_per_batch_size",
        },
    }


def _differs(table: list[dict[str, Any]], concurrencies: list[int]) -> list[dict[str, Any]]:
    """The concurrencies where the selected k is not the same at every length."""
    out = []
    for c in concurrencies:
        ks = {str(r["input_tokens"]): r["selected_k"] for r in table if r["concurrency"] == c}
        if len({k for k in ks.values() if k is not None}) > 1:
            out.append({"concurrency": c, "selected_k": ks})
    return out


def _write(root: Path, doc: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    source = root / length_dir(int(doc["context"])) / SCHEDULE_NAME
    target = root / SCHEDULE_NAME
    if source.exists():
        shutil.copyfile(source, target)
    else:
        doc["schedule"]["file"] = None  # no schedule at that length (nothing decided there)
        target.unlink(missing_ok=True)
    atomic_write(root / SWEEP_JSON, json.dumps(doc, indent=2).encode() + b"\n")


def render_context_table(doc: dict[str, Any]) -> str:
    """The selected k per (concurrency, input length), '*' where it differs by length."""
    lengths = doc["input_tokens"]
    differs = {d["concurrency"] for d in doc["k_differs_by_context"]}
    head = "concurrency | " + " | ".join(f"{n} tok" for n in lengths)
    lines = ["selected k by input length (measured-first, per length)", head]
    by_cell = {(r["concurrency"], r["input_tokens"]): r for r in doc["table"]}
    for c in dict.fromkeys(r["concurrency"] for r in doc["table"]):
        cells = []
        for n in lengths:
            row = by_cell[(c, n)]
            k, tps = row["selected_k"], row["selected_median"]
            cells.append("-" if k is None else f"k={k} ({tps:.0f} tok/s)" if tps else f"k={k}")
        lines.append(f"{c}{' *' if c in differs else ''} | " + " | ".join(cells))
    schedule = doc["schedule"]["file"]
    kept = f"{schedule} from input length {doc['context']}" if schedule else "no schedule"
    lines.append(f"schedule (num_speculative_tokens_per_batch_size): {kept}")
    return "\n".join(lines)
