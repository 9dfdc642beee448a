"""Registry, auto-detection and reasons: priorities, contests, isolation of broken adapters,
the n > 1 guard, counted reasons, every malformed fixture, and real entry points."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.adapters_support import PAYLOADS, load_capture, parsed, responses_of, wrap

from specmon.specdecode import adapters as registry
from specmon.specdecode.adapters import (
    ParsedResponse,
    detect,
    load_entry_points,
    many_sequences,
    reason_counts,
    register_adapter,
    registered_adapters,
    reset_reason_counts,
    unregister_adapter,
)
from specmon.specdecode.adapters.llamacpp import LlamaCppSpecDecodeAdapter
from specmon.specdecode.adapters.openai import OpenAIPredictionsAdapter
from specmon.specdecode.adapters.sglang import SGLangSpecDecodeAdapter
from specmon.specdecode.adapters.trtllm import TensorRTLLMSpecDecodeAdapter
from specmon.specdecode.adapters.vllm import VLLMSpecDecodeAdapter
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

LOGGER = "specmon.specdecode.adapters"
MALFORMED = sorted((PAYLOADS / "malformed").glob("*.json"))
BUILTINS = {
    "vllm": VLLMSpecDecodeAdapter,
    "trtllm": TensorRTLLMSpecDecodeAdapter,
    "sglang": SGLangSpecDecodeAdapter,
    "llamacpp": LlamaCppSpecDecodeAdapter,
    "openai": OpenAIPredictionsAdapter,
}
VALID = {  # fixture prefix -> engine that must be the only claimant
    "vllm_merged": "vllm",
    "vllm_legacy": "vllm",
    "trtllm": "trtllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "openai": "openai",
}
# Fixtures of these engines' answers that carry nothing about drafting: no adapter claims
# them (llama.cpp writes no draft keys without drafts; OpenAI sends 0 / 0 on every answer).
UNCLAIMED = ("llamacpp_no_drafts", "openai_predictions_zero_counts")


@pytest.fixture(autouse=True)
def clean_counts():
    reset_reason_counts()
    yield
    reset_reason_counts()


@pytest.fixture
def temporary():
    """Register adapters for one test and remove them afterwards."""
    names = []

    def add(cls, name, priority):
        names.append(name)
        return register_adapter(cls, name=name, priority=priority)

    yield add
    for name in names:
        unregister_adapter(name)


def record(engine="greedy"):
    return SpecDecodeAcceptanceRecord(
        engine=engine,
        mean_acceptance_length=2.0,
        draft_acceptance_rate=0.5,
        acceptance_histogram={1: 2},
        num_accepted_draft_tokens=2,
        num_draft_tokens=4,
        num_spec_steps=2,
    )


class Greedy:
    """Claims everything (the AIPerf autodetect test's 'greedy' adapter)."""

    @classmethod
    def can_adapt(cls, responses):
        return True

    @classmethod
    def adapt(cls, responses):
        return record()


class Raising:
    @classmethod
    def can_adapt(cls, responses):
        raise RuntimeError("boom")

    @classmethod
    def adapt(cls, responses):  # pragma: no cover - never reached
        raise AssertionError


def test_builtins_registered_in_priority_order():
    order = [(e.name, e.priority) for e in registered_adapters()][:5]
    assert order == [
        ("vllm", 100),
        ("trtllm", 90),
        ("sglang", 80),
        ("llamacpp", 20),
        ("openai", 10),
    ]
    assert {e.name: e.cls for e in registered_adapters()}.items() >= BUILTINS.items()


def test_register_rejects_a_non_adapter():
    with pytest.raises(TypeError):
        register_adapter(object, name="nope")


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.stem)
def test_every_malformed_fixture_gives_no_record_and_its_reason(path):
    capture = json.loads(path.read_text())
    outcome = detect(parsed(capture), capture["request"])
    assert outcome.record is None and not outcome.zero_step
    assert outcome.reason == capture["expect_reason"], outcome.detail
    engine = next(e for prefix, e in VALID.items() if path.stem.startswith(prefix.split("_")[0]))
    assert outcome.engine == engine
    assert reason_counts() == {capture["expect_reason"]: 1}


def test_malformed_inventory_covers_each_engine():
    stems = [p.stem for p in MALFORMED]
    for prefix in ("vllm_merged_", "vllm_legacy_", "trtllm_", "sglang_", "llamacpp_", "openai_"):
        assert sum(s.startswith(prefix) for s in stems) >= 3


def valid_fixtures():
    return sorted(
        p.stem
        for p in PAYLOADS.glob("*.json")
        if any(p.stem.startswith(prefix) for prefix in VALID)
        and "n2" not in p.stem
        and p.stem not in UNCLAIMED
    )


@pytest.mark.parametrize("name", UNCLAIMED)
def test_answers_without_drafting_are_claimed_by_no_adapter(name):
    responses, request = responses_of(name)
    assert not any(cls.can_adapt(responses) for cls in BUILTINS.values())
    assert detect(responses, request).reason == "absent"


@pytest.mark.parametrize("name", valid_fixtures())
def test_only_the_own_adapter_claims_each_payload(name):
    engine = next(e for prefix, e in VALID.items() if name.startswith(prefix))
    responses, _ = responses_of(name)
    claims = {n: cls.can_adapt(responses) for n, cls in BUILTINS.items()}
    assert claims == {n: n == engine for n in BUILTINS}


def test_signature_key_sets_disjoint():
    from specmon.specdecode.adapters import sglang, trtllm, vllm

    sigs = [
        set(vllm.SIGNATURE),
        set(trtllm.SIGNATURE),
        set(sglang.SIGNATURE["sglext"]),
        set(sglang.SIGNATURE["meta_info"]),
    ]
    assert not (sigs[0] & sigs[1]) and not (sigs[0] & sigs[2]) and not (sigs[1] & sigs[2])
    assert not (sigs[0] & sigs[3]) and not (sigs[1] & sigs[3])


def test_each_engine_resolves_to_its_own_record_with_completion_tokens():
    # the autodetect case: completion_tokens 7 in both
    trt = load_capture("trtllm_summary")
    vllm = load_capture("vllm_merged_summary_chat")
    vllm["responses"][0]["usage"]["completion_tokens"] = 7
    for capture, engine in ((trt, "tensorrt_llm"), (vllm, "vllm")):
        r = detect(parsed(capture)).record
        assert r.engine == engine and r.completion_tokens == 7


def test_equal_priority_claimants_are_contested(temporary):
    temporary(Greedy, "greedy", 100)  # same level as vllm
    outcome = detect(*responses_of("vllm_merged_summary_chat"))
    assert outcome.record is None and outcome.reason == "contested"
    assert "vllm" in outcome.detail and "greedy" in outcome.detail


def test_priority_resolves_a_contest(temporary):
    temporary(Greedy, "greedy", 0)  # below vllm: vllm wins its own payloads
    assert detect(*responses_of("vllm_merged_summary_chat")).record.engine == "vllm"
    assert detect(*responses_of("vllm_spec_flag_off_stream")).record.engine == "greedy"
    unregister_adapter("greedy")
    temporary(Greedy, "greedy", 1000)  # above: greedy wins everything
    assert detect(*responses_of("vllm_merged_summary_chat")).record.engine == "greedy"


def test_raising_can_adapt_is_isolated_and_logged_once(temporary, caplog):
    temporary(Raising, "raising", 1000)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            outcome = detect(*responses_of("vllm_merged_summary_chat"))
            assert outcome.record.engine == "vllm"
    assert sum("can_adapt raised RuntimeError" in m for m in caplog.messages) == 1


@pytest.mark.parametrize(
    "adapt, reason",
    [
        (lambda cls, r: (_ for _ in ()).throw(ValueError("bad")), "malformed:adapter_error"),
        (lambda cls, r: None, "malformed:rejected"),
        (lambda cls, r: {"not": "a record"}, "malformed:adapter_error"),
    ],
)
def test_foreign_adapt_failures_become_reasons(temporary, adapt, reason):
    cls = type(
        "Foreign", (), {"can_adapt": classmethod(lambda c, r: True), "adapt": classmethod(adapt)}
    )
    temporary(cls, "foreign", 1000)
    outcome = detect(wrap({"choices": []}))
    assert outcome.record is None and outcome.reason == reason and outcome.engine == "foreign"


@pytest.mark.parametrize(
    "responses",
    [
        None,
        "text",
        [None, 3, "x"],
        [ParsedResponse(["a", "list", "body"])],
        [ParsedResponse({"choices": [None, 3, {"speculative_decoding_stats": [1]}]})],
        [ParsedResponse({"metrics": {"speculative_decoding": [39, 1]}, "sglext": [1]})],
    ],
)
def test_junk_never_raises(responses):
    outcome = detect(responses, {"n": "many"})
    assert outcome.record is None and outcome.reason == "absent"


@pytest.mark.parametrize(
    "request_body, many",
    [
        ({"n": 2}, True),
        ({"n": 1}, False),
        ({"n": None}, False),
        ({"n": "2"}, False),
        ({"n": True}, False),
        ({"prompt": ["a", "b"]}, True),
        ({"prompt": ["a"]}, False),
        ({"prompt": "a b"}, False),
        ({"prompt": [1, 2, 3]}, False),  # one tokenized prompt
        ({"prompt": [[1, 2], [3]]}, True),  # two tokenized prompts
        ({"text": ["a", "b"]}, True),
        ({"sampling_params": {"n": 3}}, True),
        (None, False),
        ([1, 2], False),
    ],
)
def test_many_sequences(request_body, many):
    assert many_sequences(request_body) is many


def test_request_taken_from_parsed_responses_when_not_given():
    capture = load_capture("vllm_merged_summary_chat")
    capture["request"]["n"] = 2
    assert detect(parsed(capture)).reason == "n_gt_1"  # ParsedResponse.request carries it


def test_reasons_counted_and_logged_once_per_kind(caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(2):
            detect(*responses_of("vllm_n2_metrics_null"))
            detect(*responses_of("vllm_spec_flag_off_stream"))
            detect(*responses_of("vllm_merged_zero_step"))
            detect(*responses_of("vllm_merged_summary_chat"))
        capture = json.loads(
            (PAYLOADS / "malformed" / "trtllm_histogram_not_a_list.json").read_text()
        )
        detect(parsed(capture))
    assert reason_counts() == {"n_gt_1": 2, "absent": 2, "zero_step": 2, "malformed:histogram": 1}
    messages = [r for r in caplog.records if "spec-decode: no record" in r.getMessage()]
    assert len(messages) == 4  # one per kind
    levels = {r.getMessage().split("(")[1].split(")")[0]: r.levelno for r in messages}
    assert levels == {
        "n_gt_1": logging.WARNING,
        "absent": logging.INFO,
        "zero_step": logging.INFO,
        "malformed:histogram": logging.WARNING,
    }
    reset_reason_counts()
    assert reason_counts() == {}


# ------------------------------------------------------------------ real entry points

PLUGIN = textwrap.dedent('''
    """A made-up engine (toy_timings.draft_n / draft_n_accepted), outside specmon."""
    from specmon.specdecode.record import SpecDecodeAcceptanceRecord

    class TimingsAdapter:
        priority = 10

        @classmethod
        def can_adapt(cls, responses):
            return any(isinstance(r.data.get("toy_timings"), dict)
                       and "draft_n_accepted" in r.data["toy_timings"] for r in responses)

        @classmethod
        def adapt(cls, responses):
            t = [r.data["toy_timings"] for r in responses if "toy_timings" in r.data][-1]
            acc, drafted = t["draft_n_accepted"], t["draft_n"]
            steps = t["predicted_n"] - acc
            return SpecDecodeAcceptanceRecord(
                engine="toyengine", mean_acceptance_length=1 + acc / steps,
                draft_acceptance_rate=acc / drafted, acceptance_histogram={1: acc},
                num_accepted_draft_tokens=acc, num_draft_tokens=drafted, num_spec_steps=steps)
''')
# A toy payload: predicted 12, drafted 9, accepted 6 -> steps = 12 - 6 = 6;
# the toy puts every step in bucket 1: H {1: 6} sums to 6 steps and 1*6 = 6 accepted;
# AL = 1 + 6/6 = 2.0.
TIMINGS = {"choices": [], "toy_timings": {"predicted_n": 12, "draft_n": 9, "draft_n_accepted": 6}}


def write_dist(root: Path, entry_points: str) -> None:
    (root / "fake_engine_adapter.py").write_text(PLUGIN)
    dist = root / "specmon_fake_engine-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: specmon-fake-engine\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(f"[specmon.spec_decode_adapters]\n{entry_points}\n")


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    write_dist(
        tmp_path,
        "toyengine = fake_engine_adapter:TimingsAdapter\nbroken = no_such_module_anywhere:Adapter\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    unregister_adapter("toyengine")
    sys.modules.pop("fake_engine_adapter", None)
    load_entry_points(force=True)  # forget the tmp dist for later tests


def test_entry_point_adapter_picked_up_in_process(plugin_path, caplog):
    assert detect(wrap(TIMINGS)).reason == "absent"  # not registered yet
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        load_entry_points(force=True)
        load_entry_points(force=True)  # the broken one is logged once only
    entry = {e.name: e for e in registered_adapters()}
    assert entry["toyengine"].priority == 10 and "broken" not in entry
    assert sum("'broken'" in m for m in caplog.messages) == 1
    r = detect(wrap(TIMINGS)).record
    assert r.engine == "toyengine" and r.num_spec_steps == 6 and r.mean_acceptance_length == 2.0
    # built-ins still win their own payloads (priority 100 > 10)
    assert detect(*responses_of("vllm_merged_summary_chat")).record.engine == "vllm"


@pytest.mark.e2e
def test_entry_point_adapter_picked_up_by_a_fresh_process(tmp_path):
    write_dist(
        tmp_path,
        "toyengine = fake_engine_adapter:TimingsAdapter\nbroken = no_such_module_anywhere:Adapter\n",
    )
    script = (
        "import json, sys\n"
        "from specmon.specdecode.adapters import detect, ParsedResponse\n"
        f"o = detect([ParsedResponse({TIMINGS!r})])\n"
        "print(json.dumps([o.engine, o.record.num_spec_steps]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["toyengine", 6]
    assert "broken" in out.stderr  # logged, skipped, detection still worked


def test_entry_point_never_replaces_a_builtin(tmp_path, monkeypatch):
    write_dist(tmp_path, "vllm = fake_engine_adapter:TimingsAdapter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        load_entry_points(force=True)
        assert {e.name: e.cls for e in registered_adapters()}["vllm"] is VLLMSpecDecodeAdapter
    finally:
        sys.modules.pop("fake_engine_adapter", None)
        monkeypatch.undo()
        load_entry_points(force=True)


def test_registry_module_exposes_the_contract():
    for name in (
        "detect",
        "register_adapter",
        "reason_counts",
        "reset_reason_counts",
        "AdaptOutcome",
        "ENTRY_POINT_GROUP",
    ):
        assert hasattr(registry, name)
    assert registry.ENTRY_POINT_GROUP == "specmon.spec_decode_adapters"
