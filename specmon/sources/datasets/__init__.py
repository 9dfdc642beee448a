"""Published prompt sets (SpecBench, MT-Bench, SPEED-Bench, ShareGPT) as request sources.

`prepare_run(config)` reads and validates the file before anything else happens (no server
contacted, no artifact dir), then fills in what the dataset decides: max_tokens as the
peers default it and, when no bound was given, one pass over the rows as the request count.
`dataset_source(config, rng)` is what the load generator draws prompts from.
"""

from __future__ import annotations

import os
import random

from specmon.config import RunConfig
from specmon.errors import UserError
from specmon.sources.datasets.conversations import ConversationSource, answer_text
from specmon.sources.datasets.formats import (
    DATASETS,
    DEFAULT_OUTPUT_TOKENS,
    DatasetRow,
    load_dataset,
    reference_tokens,
    select_categories,
)

__all__ = [
    "DATASETS",
    "DEFAULT_OUTPUT_TOKENS",
    "ConversationSource",
    "DatasetRow",
    "answer_text",
    "dataset_source",
    "load_dataset",
    "load_selected",
    "prepare_run",
    "reference_tokens",
    "select_categories",
]

_cache: dict[tuple, list[DatasetRow]] = {}  # the last file read: prepare_run, then the load


def load_selected(config: RunConfig) -> list[DatasetRow]:
    """The rows of --input-file in the --dataset format, filtered by --dataset-category."""
    assert config.dataset is not None and config.input_file is not None
    path = config.input_file
    try:
        info = os.stat(path)
        key: tuple | None = (config.dataset, path, info.st_mtime_ns, info.st_size, info.st_ino)
    except OSError:
        key = None  # load_dataset says what is wrong with it
    rows = _cache.get(key) if key else None
    if rows is None:
        rows = load_dataset(config.dataset, path)
        _cache.clear()
        if key:
            _cache[key] = rows
    rows = select_categories(rows, config.dataset_category, path)
    index, count = parse_shard(config.dataset_shard)
    if index >= len(rows):
        raise UserError(
            f"{path}: {len(rows)} rows cannot be shared {count} ways (shard {index}/{count} "
            f"is empty); use fewer --workers / servers"
        )
    return rows[index::count]


def parse_shard(shard: str | None) -> tuple[int, int]:
    """`--dataset-shard I/N` as (I, N); None is the whole set, (0, 1)."""
    if shard is None:
        return 0, 1
    index, count = (int(part) for part in shard.split("/"))
    if index >= count:
        raise UserError(f"--dataset-shard {shard}: I must be less than N (0-based)")
    return index, count


def sub_shard(shard: str | None, index: int, count: int) -> str | None:
    """Part `index` of `count` of a shard: rows[i::n][index::count] is rows[i + n*index::n*count]
    (worker i of N takes rows i, i+N, ...; --split does the same across servers)."""
    if count <= 1:
        return shard
    i, n = parse_shard(shard)
    return f"{i + n * index}/{n * count}"


def dataset_source(
    config: RunConfig, rng: random.Random, *, warmup: bool = False
) -> ConversationSource:
    """Warmup reads the file on its own (first turns, file order), so profiling still
    starts at the first row."""
    return ConversationSource(
        load_selected(config),
        random.Random(rng.random()),
        all_turns=config.dataset_turns == "all" and not warmup,
        sampling="sequential" if warmup else config.dataset_sampling,
    )


def prepare_run(config: RunConfig) -> ConversationSource | None:
    """Validate the dataset and settle the settings it decides (see the module docstring)."""
    if config.dataset is None:
        return None
    source = ConversationSource(
        load_selected(config), random.Random(0), all_turns=config.dataset_turns == "all"
    )
    if "output_tokens_mean" not in config.model_fields_set:
        # sharegpt: each row's reference length (None lets the rows' lengths through)
        config.output_tokens_mean = (
            None if config.dataset == "sharegpt" else DEFAULT_OUTPUT_TOKENS[config.dataset]
        )
    if (
        config.request_count is None
        and config.benchmark_duration is None
        and config.segments is None
    ):
        config.request_count = source.requests_per_pass
    return source
