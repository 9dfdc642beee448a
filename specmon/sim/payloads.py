"""Per-request spec-decode objects in each engine's wire shape, built from a SequencePlan.

vllm         response-root `metrics.speculative_decoding` (vLLM 0.32, dense histogram)
vllm-legacy  per-choice `speculative_decoding_stats`, sparse string-keyed histogram
trtllm       per-choice `speculative_decoding` (TensorRT-LLM), absent when nothing was drafted
sglang       root `sglext.spec_tokens_details` (object for n = 1, list for n > 1); also
             `--shape sglext`
openai-predictions  `usage.completion_tokens_details` accepted / rejected prediction
             tokens (counts only; a gateway's shape, smg #2481)
llamacpp     root `timings` with `draft_n` / `draft_n_accepted` (counts only; llama.cpp
             writes the two keys only when the request drafted)

The per-choice shapes are declared in CHOICE_PAYLOADS (the choice's key, the builder, any
other keys on the choice), so a new engine whose stats ride on each choice is one
`register_choice_payload` beside its engine entry; the server reads the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from specmon.sim.model import SequencePlan

# vLLM's per-request timing keys; null without --enable-per-request-metrics.
VLLM_TIMING_KEYS = (
    "time_to_first_token_ms",
    "generation_time_ms",
    "queue_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
)


def _rates(plan: SequencePlan) -> tuple[float, float]:
    steps, accepted, drafted = plan.steps, plan.accepted, plan.drafted
    mean = 1.0 + accepted / steps if steps else 1.0
    rate = accepted / drafted if drafted else 0.0
    return mean, rate


def vllm_object(plan: SequencePlan, k: int, level: str, streaming: bool) -> dict[str, Any]:
    """`metrics.speculative_decoding` as vLLM 0.32 writes it.

    Non-streaming bodies keep null keys (per_step_* null at summary level or with no steps);
    the streaming usage chunk is exclude_none, so those keys are absent there.
    """
    mean, rate = _rates(plan)
    obj: dict[str, Any] = {
        "mean_acceptance_length": mean,
        "draft_acceptance_rate": rate,
        "acceptance_histogram": plan.histogram(k),
        "num_spec_steps": plan.steps,
        "num_accepted_draft_tokens": plan.accepted,
        "num_draft_tokens": plan.drafted,
        "num_spec_tokens": k,
    }
    return _with_per_step(obj, plan, level, streaming)


def vllm_metrics(
    spec: dict[str, Any] | None, streaming: bool, timing: dict[str, float] | None = None
) -> dict[str, Any] | None:
    """The root `metrics` object around the spec-decode one.

    Without per-request timing the five timing keys are null in bodies and absent in the
    (exclude_none) streaming chunk.
    """
    if spec is None:
        return None
    if timing is not None:
        return {**timing, "speculative_decoding": spec}
    if streaming:
        return {"speculative_decoding": spec}
    metrics: dict[str, Any] = dict.fromkeys(VLLM_TIMING_KEYS)
    metrics["speculative_decoding"] = spec
    return metrics


def timing_metrics(
    t_start: float, t_first: float, t_last: float, completion_tokens: int
) -> dict[str, float]:
    """vLLM's per-request timing keys from perf_counter seconds.

    Relations read off a real vLLM body (ttft 5.41, generation 56.4, itl 0.90, 1034.5 tok/s
    for 64 tokens): mean_itl = generation / (tokens - 1), tokens/s = tokens / (ttft + generation).
    """
    ttft = (t_first - t_start) * 1000.0
    generation = (t_last - t_first) * 1000.0
    itl = generation / (completion_tokens - 1) if completion_tokens > 1 else 0.0
    total_s = (ttft + generation) / 1000.0
    return {
        "time_to_first_token_ms": ttft,
        "generation_time_ms": generation,
        "queue_time_ms": 0.0,
        "mean_itl_ms": itl,
        "tokens_per_second": completion_tokens / total_s if total_s > 0 else 0.0,
    }


def legacy_object(plan: SequencePlan, level: str, streaming: bool) -> dict[str, Any]:
    """The superseded per-choice `speculative_decoding_stats` (sparse histogram, string keys)."""
    mean, rate = _rates(plan)
    sparse: dict[str, int] = {}
    for j in plan.per_step_accepted:
        sparse[str(j)] = sparse.get(str(j), 0) + 1
    obj: dict[str, Any] = {
        "mean_acceptance_length": mean,
        "draft_acceptance_rate": rate,
        "acceptance_histogram": dict(sorted(sparse.items(), key=lambda kv: int(kv[0]))),
        "num_spec_steps": plan.steps,
        "num_accepted_draft_tokens": plan.accepted,
        "num_draft_tokens": plan.drafted,
    }
    return _with_per_step(obj, plan, level, streaming)


def trtllm_object(plan: SequencePlan, k: int) -> dict[str, Any] | None:
    """TensorRT-LLM's per-choice `speculative_decoding`; absent (None) when nothing was drafted."""
    if plan.steps == 0:
        return None
    _, rate = _rates(plan)
    return {
        "acceptance_rate": rate,
        "total_accepted_draft_tokens": plan.accepted,
        "total_draft_tokens": plan.drafted,
        "num_spec_steps": plan.steps,
        "acceptance_histogram": plan.histogram(k),
        "num_spec_tokens": k,
    }


def trtllm_decoded_per_iter(plan: SequencePlan) -> float:
    """TRT-LLM's `avg_decoded_tokens_per_iter`: tokens / every iteration (not acceptance length)."""
    iterations = 1 + plan.steps + plan.nonspec_steps
    return plan.completion_tokens / iterations


def sglang_object(plan: SequencePlan, k: int) -> dict[str, Any]:
    """SGLang's `spec_tokens_details` (spec_accept_length counts the prefill token, as SGLang's)."""
    _, rate = _rates(plan)
    return {
        "spec_accept_rate": rate,
        "spec_accept_length": plan.completion_tokens / plan.steps if plan.steps else 0.0,
        "spec_num_correct_drafts": plan.accepted,
        "spec_num_proposed_drafts": plan.drafted,
        "spec_verify_ct": plan.steps,
        "spec_correct_drafts_histogram": plan.histogram(k),
    }


def openai_details(plan: SequencePlan) -> dict[str, int]:
    """`usage.completion_tokens_details`: accepted drafts and the rest of the proposed ones.

    Sent on every answer, 0 / 0 without drafts, as OpenAI's own API does."""
    return {
        "reasoning_tokens": 0,
        "accepted_prediction_tokens": plan.accepted,
        "rejected_prediction_tokens": plan.drafted - plan.accepted,
    }


def llamacpp_timings(plan: SequencePlan, prompt_tokens: int, elapsed_ms: float) -> dict[str, Any]:
    """llama.cpp's `timings` (server-task.cpp `result_timings::to_json`); the draft keys
    only when something was drafted."""
    predicted = plan.completion_tokens
    timings: dict[str, Any] = {
        "cache_n": 0,
        "prompt_n": prompt_tokens,
        "prompt_ms": 0.0,
        "prompt_per_token_ms": 0.0,
        "prompt_per_second": 0.0,
        "predicted_n": predicted,
        "predicted_ms": elapsed_ms,
        "predicted_per_token_ms": elapsed_ms / predicted if predicted else 0.0,
        "predicted_per_second": 1000.0 * predicted / elapsed_ms if elapsed_ms > 0 else 0.0,
    }
    if plan.drafted > 0:
        timings["draft_n"] = plan.drafted
        timings["draft_n_accepted"] = plan.accepted
    return timings


def corrupt(obj: dict[str, Any]) -> dict[str, Any]:
    """Make the histogram contradict the step count (fault injection: --malformed-rate)."""
    if "draft_n" in obj:  # counts only: accept more than was drafted
        obj["draft_n_accepted"] = obj["draft_n"] + 1
    if "rejected_prediction_tokens" in obj:
        obj["rejected_prediction_tokens"] = -1
    for key in ("acceptance_histogram", "spec_correct_drafts_histogram"):
        hist = obj.get(key)
        if isinstance(hist, list):
            obj[key] = [hist[0] + 1, *hist[1:]]
        elif isinstance(hist, dict):
            obj[key] = {**hist, "0": hist.get("0", 0) + 1}
    return obj


def _with_per_step(
    obj: dict[str, Any], plan: SequencePlan, level: str, streaming: bool
) -> dict[str, Any]:
    """vLLM's per-step arrays: filled at `detailed` level when steps ran; otherwise null in a
    non-streaming body (not exclude_none) and left out of the stream's usage chunk."""
    if level == "detailed" and plan.steps > 0:
        obj["per_step_accepted"] = list(plan.per_step_accepted)
        obj["per_step_drafted"] = list(plan.per_step_drafted)
    elif not streaming:
        obj["per_step_accepted"] = None
        obj["per_step_drafted"] = None
    return obj


# (plan, k, level, streaming) -> the object, or None when this request sends none
ChoiceBuilder = Callable[[SequencePlan, int, str, bool], dict[str, Any] | None]


@dataclass(frozen=True)
class ChoicePayload:
    """A shape whose per-request stats ride on each choice: the choice's key for them, how
    they are built, and the other keys the engine adds to a finished choice."""

    key: str
    build: ChoiceBuilder
    extras: Callable[[SequencePlan], dict[str, Any]] | None = None


CHOICE_PAYLOADS: dict[str, ChoicePayload] = {}


def register_choice_payload(shape: str, payload: ChoicePayload) -> None:
    """The simulator's payload builder for `shape` (one of an engine entry's sim_shapes)."""
    CHOICE_PAYLOADS[shape] = payload


register_choice_payload(
    "vllm-legacy",
    ChoicePayload(
        "speculative_decoding_stats",
        lambda plan, k, level, streaming: legacy_object(plan, level, streaming),
    ),
)
register_choice_payload(
    "trtllm",
    ChoicePayload(
        "speculative_decoding",
        lambda plan, k, level, streaming: trtllm_object(plan, k),
        lambda plan: {"avg_decoded_tokens_per_iter": trtllm_decoded_per_iter(plan)},
    ),
)
