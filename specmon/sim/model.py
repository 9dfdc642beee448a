"""The simulator's acceptance model, token plan and latency model.

Acceptance: each verify step drafts up to k tokens; position i (1..k) is accepted with
conditional probability a_i given positions 1..i-1 were accepted, so a step walks the
positions until the first rejection and accepts j drafts. It then emits j + 1 tokens (the
accepted drafts plus the target's bonus/corrected token).

Token plan of one sequence of L completion tokens: the first token comes from prefill;
then verify steps until L tokens exist. So that max_tokens is respected exactly, the drafter
never proposes more than the tokens still allowed minus the bonus token (remaining - 1): a
final step may draft fewer than k, and when only one token is left the step drafts nothing
and is a non-spec decode step (vLLM does not count steps without drafts as spec steps).
Hence, always: sum(hist) = steps, sum(j*h_j) = accepted <= drafted, and
completion_tokens = 1 + steps + accepted + nonspec_steps.

Latency (all milliseconds; B = requests running on all engines, including this one; k = drafts
per step, k = 0 meaning no speculation). Two models (`--latency-model`):

    linear:   step_time(k, B) = step_ms * (1 + batch_slope * (B - 1) * (k + 1))
                                + draft_ms_per_token * k
    roofline: step_time(k, B) = max(step_floor_ms, compute_ms_per_token * B * (k + 1))
                                + draft_ms_per_token * k

Context (both off by default; docs/simulator.md "Context effect"):

    acceptance: a_i(c) = a_i * 2 ** (-c / acceptance_context_halflife)
    step time:  step_time(k, B) + kv_ms_per_ktoken * C / 1000

c is the request's prompt tokens (the context it brought: fixed for the request, so its
acceptance is a known constant); C is the context tokens held by the running batch at the
step (every running request's prompt plus what it has generated so far: the KV reads of
attention).

linear: step_ms is the target's step time at batch 1 (memory bound: verifying k+1 tokens
costs about one step); batch_slope is the fractional growth of the step time per extra
verified token in flight, so at high concurrency a smaller k gives more tokens/s.
roofline: a memory-bound floor until the batch's verified tokens B*(k+1) make the step
compute bound; the knee moves the best k, and step time is not a straight line in k or B.
Time to first token is ttft_ms. With every latency at 0 the simulator answers as fast as it
can (no sleeps at all). `LatencyModel.step_ms(k, B)` is the one implementation of both; the
steady-state throughput per request is E(k) / step_time(k, B) (see tokens_per_second).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class SequencePlan:
    """What one choice (sequence) of a request produces, drawn step by step (lazily: a step
    is drawn when the engine runs it, so a huge max_tokens costs nothing up front)."""

    completion_tokens: int
    finish_reason: str
    # Tokens emitted by each decode step after the prefill token (spec and non-spec steps).
    step_tokens: list[int] = field(default_factory=list)
    per_step_accepted: list[int] = field(default_factory=list)
    per_step_drafted: list[int] = field(default_factory=list)
    nonspec_steps: int = 0
    emitted: int = 1  # tokens drawn so far (the first comes from prefill)
    # decode-step indices that drafted nothing (the last step, or a schedule's K = 0)
    nonspec_at: list[int] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.per_step_accepted)

    @property
    def accepted(self) -> int:
        return sum(self.per_step_accepted)

    @property
    def drafted(self) -> int:
        return sum(self.per_step_drafted)

    @property
    def done(self) -> bool:
        return self.emitted >= self.completion_tokens

    def spec_steps_in(self, decode_steps: int) -> int:
        """Spec (drafting) steps among the first `decode_steps` decode steps."""
        decode_steps = min(decode_steps, len(self.step_tokens))
        return decode_steps - sum(1 for i in self.nonspec_at if i < decode_steps)

    def histogram(self, k: int) -> list[int]:
        """Dense histogram, index j = steps that accepted exactly j drafts (length k+1)."""
        hist = [0] * (k + 1)
        for j in self.per_step_accepted:
            hist[j] += 1
        return hist

    def draw_step(self, rng: random.Random, k: int, acceptance: list[float]) -> int:
        """Draw the next decode step drafting up to k (module docstring); its token count."""
        remaining = self.completion_tokens - self.emitted
        drafted = min(k, remaining - 1)
        if drafted <= 0:
            self.nonspec_steps += 1
            self.nonspec_at.append(len(self.step_tokens))
            tokens = 1
        else:
            accepted = draw_accepted(rng, acceptance, drafted)
            self.per_step_accepted.append(accepted)
            self.per_step_drafted.append(drafted)
            tokens = accepted + 1
        self.step_tokens.append(tokens)
        self.emitted += tokens
        return tokens


def draw_accepted(rng: random.Random, acceptance: list[float], drafted: int) -> int:
    """Walk positions 1..drafted with conditional probabilities; stop at the first rejection."""
    accepted = 0
    for position in range(drafted):
        if rng.random() >= acceptance[position]:
            break
        accepted += 1
    return accepted


def output_length(rng: random.Random, max_tokens: int, ignore_eos: bool) -> tuple[int, str]:
    """Exactly max_tokens with ignore_eos; otherwise an EOS may come earlier (finish 'stop')."""
    if ignore_eos:
        return max_tokens, "length"
    length = rng.randint(max(1, max_tokens // 2), max_tokens)
    return length, ("length" if length == max_tokens else "stop")


def start_sequence(rng: random.Random, max_tokens: int, ignore_eos: bool) -> SequencePlan:
    """A plan with its length drawn and no step yet (steps come from draw_step)."""
    length, finish = output_length(rng, max_tokens, ignore_eos)
    return SequencePlan(completion_tokens=length, finish_reason=finish)


def plan_sequence(
    rng: random.Random, k: int, acceptance: list[float], max_tokens: int, ignore_eos: bool
) -> SequencePlan:
    """Draw the whole token plan of one sequence at a fixed k (see the module docstring)."""
    plan = start_sequence(rng, max_tokens, ignore_eos)
    while not plan.done:
        plan.draw_step(rng, k, acceptance)
    return plan


def step_time_ms(
    k: int, in_flight: int, step_ms: float, draft_ms_per_token: float, batch_slope: float
) -> float:
    """Time of one verify step drafting k tokens with `in_flight` requests running."""
    extra = max(in_flight, 1) - 1
    return step_ms * (1.0 + batch_slope * extra * (k + 1)) + draft_ms_per_token * k


LATENCY_MODELS = ("linear", "roofline")


@dataclass(frozen=True)
class LatencyModel:
    """Step time of one verify step (module docstring): `kind` is linear or roofline."""

    kind: str = "linear"
    step_ms: float = 0.0  # linear: step time at batch 1
    batch_slope: float = 0.0  # linear
    step_floor_ms: float = 0.0  # roofline: memory-bound floor
    compute_ms_per_token: float = 0.0  # roofline: cost per verified token in the batch
    draft_ms_per_token: float = 0.0  # both: cost per drafted token
    kv_ms_per_ktoken: float = 0.0  # both: cost per 1000 context tokens held by the batch

    def step_ms_at(self, k: int, in_flight: int, context_tokens: float = 0.0) -> float:
        """step_time(k, B) in ms, plus the KV reads of `context_tokens` held by the batch;
        B < 1 counts as batch 1."""
        batch = max(in_flight, 1)
        kv = self.kv_ms_per_ktoken * context_tokens / 1000.0
        if self.kind == "roofline":
            verify = max(self.step_floor_ms, self.compute_ms_per_token * batch * (k + 1))
            return verify + self.draft_ms_per_token * k + kv
        steps = step_time_ms(k, batch, self.step_ms, self.draft_ms_per_token, self.batch_slope)
        return steps + kv

    def tokens_per_second(
        self, acceptance: list[float], k: int, in_flight: int, context: float = 0.0
    ) -> float:
        """Server-wide steady-state decode tokens/s: B * E(k) / step_time(k, B), with each
        of the B requests holding `context` tokens (the batch holds B * context)."""
        batch = max(in_flight, 1)
        step = self.step_ms_at(k, in_flight, batch * context)
        if step <= 0:
            return float("inf")
        return batch * expected_tokens_per_step(acceptance, k) * 1000.0 / step

    def best_k(self, acceptance: list[float], in_flight: int, context: float = 0.0) -> int:
        """The k in 0..len(acceptance) with the highest tokens/s (ties to the smaller k)."""
        rates = [
            self.tokens_per_second(acceptance, k, in_flight, context)
            for k in range(len(acceptance) + 1)
        ]
        return max(range(len(rates)), key=lambda k: (rates[k], -k))

    @property
    def sleeps(self) -> bool:
        return any(
            v > 0
            for v in (
                self.step_ms,
                self.step_floor_ms,
                self.compute_ms_per_token,
                self.draft_ms_per_token,
                self.kv_ms_per_ktoken,
            )
        )


def latency_step_ms(model: str, k: int, in_flight: int, **params: float) -> float:
    """step_time(k, B) of the named model: latency_step_ms("roofline", 4, 16, step_floor_ms=8,
    compute_ms_per_token=0.1, draft_ms_per_token=0.5). Parameters are LatencyModel's fields."""
    return LatencyModel(kind=model, **params).step_ms_at(k, in_flight)


def context_acceptance(acceptance: list[float], prompt_tokens: int, halflife: float) -> list[float]:
    """a_i(c) = a_i * 2 ** (-c / halflife): every position's acceptance halves each
    `halflife` tokens of the request's prompt (halflife 0: no context effect)."""
    if halflife <= 0 or prompt_tokens <= 0:
        return acceptance
    factor = 2.0 ** (-prompt_tokens / halflife)
    return [a * factor for a in acceptance]


def expected_tokens_per_step(acceptance: list[float], k: int) -> float:
    """E(k) = 1 + S_1 + ... + S_k with S_i = a_1 * ... * a_i (bonus token included)."""
    total, survival = 1.0, 1.0
    for position in range(k):
        survival *= acceptance[position]
        total += survival
    return total


def expected_tokens_per_second(
    acceptance: list[float],
    k: int,
    in_flight: int,
    step_ms: float,
    draft_ms_per_token: float,
    batch_slope: float,
) -> float:
    """Server-wide decode throughput the latency model gives at steady state."""
    step = step_time_ms(k, in_flight, step_ms, draft_ms_per_token, batch_slope)
    if step <= 0:
        return float("inf")
    return max(in_flight, 1) * expected_tokens_per_step(acceptance, k) * 1000.0 / step
