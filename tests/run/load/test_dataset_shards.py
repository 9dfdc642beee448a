"""Dataset rows shared out so each is sent once overall: --workers N and --split give every
worker / server its shard (rows i, i+N, ...), --mirror sends every server the same rows."""

from __future__ import annotations

import pytest
from sources.datasets.test_datasets import spec_bench_file

from specmon.config import build_config
from specmon.errors import UserError
from specmon.run.load.workers import worker_configs
from specmon.run.multi import MultiRun
from specmon.sources.datasets import load_selected, parse_shard, sub_shard


def _config(**overrides):
    return build_config(
        overrides={
            "url": ["http://127.0.0.1:9"],
            "model": "m",
            "dataset": "spec_bench",
            "input_file": str(spec_bench_file()),
            "server_metrics": False,
            **overrides,
        }
    )


def test_sub_shards_cover_every_row_once():
    rows = list(range(23))
    for parent in (None, "1/3"):
        i, n = parse_shard(parent)
        mine = rows[i::n]
        parts = [rows[slice(*_start_step(sub_shard(parent, j, 4)))] for j in range(4)]
        assert sorted(x for part in parts for x in part) == mine  # no row twice, none lost
    assert sub_shard(None, 1, 2) == "1/2" and sub_shard("1/3", 1, 2) == "4/6"
    assert sub_shard("1/3", 0, 1) == "1/3"


def _start_step(shard: str | None) -> tuple[int, None, int]:
    i, n = parse_shard(shard)
    return i, None, n


def test_workers_take_every_nth_question():
    config = _config(workers=3, request_count=480, concurrency=3)
    shards = [share["dataset_shard"] for share, _ in worker_configs(config)]
    assert shards == ["0/3", "1/3", "2/3"]
    ids = [[r.question_id for r in load_selected(_config(dataset_shard=s))] for s in shards]
    assert [len(part) for part in ids] == [160, 160, 160]
    assert sorted(q for part in ids for q in part) == sorted(
        r.question_id for r in load_selected(_config())
    )
    assert ids[1][:2] == [load_selected(_config())[k].question_id for k in (1, 4)]


@pytest.mark.parametrize(
    ("mode", "expected"), [("split", ["0/2", "1/2"]), ("mirror", [None, None])]
)
def test_split_shards_servers_and_mirror_does_not(mode, expected):
    config = _config(url=["a=http://127.0.0.1:9", "b=http://127.0.0.1:8"], concurrency=2)
    setattr(config, mode, True)
    run = MultiRun.__new__(MultiRun)  # only its per-server configuration is under test
    run.config = config
    assert [run._server_config(i, 2).dataset_shard for i in range(2)] == expected


def test_an_empty_shard_is_a_clear_error():
    with pytest.raises(UserError, match="shard 480/481 is empty"):
        load_selected(_config(dataset_shard="480/481"))
    with pytest.raises(UserError, match="less than N"):
        parse_shard("2/2")
