"""A made-up engine, added the way a new engine is (specmon/specdecode/engines.py): one
registry entry, its adapter and the simulator's payload builder. Its per-request stats ride
on each choice as `toy_stats: {"drafted": D, "accepted": A}` (counts only); its records say
`toy_llm` (its AIPerf-style record name), its short name is `toy`.

`install()` is called in every process that needs it (the test, `specmon sim`, `specmon
run`): a plugin would do the same from its entry point."""

from __future__ import annotations

from typing import Any

from specmon.sim.model import SequencePlan
from specmon.sim.payloads import ChoicePayload, register_choice_payload
from specmon.specdecode.adapters import add_engine, registered_adapters
from specmon.specdecode.adapters.base import (
    ParsedResponse,
    SpecDecodeAdapter,
    choice_dicts,
    completion_tokens,
    response_data,
)
from specmon.specdecode.engines import Engine
from specmon.specdecode.fidelity import COUNTS
from specmon.specdecode.record import SpecDecodeAcceptanceRecord

KEY = "toy_stats"
TOY = Engine(
    "toy",
    "Toy engine",
    "tests/specdecode/toy_engine.py",
    ("toy_engine:ToyAdapter",),
    COUNTS,
    owned_by=("toy-owner",),
    record_name="toy_llm",
    sim_shapes=("toy",),
)


class ToyAdapter(SpecDecodeAdapter):
    engine = "toy"
    priority = 50

    @classmethod
    def payloads(cls, responses: list[ParsedResponse]) -> list[dict[str, Any]]:
        return [
            c[KEY]
            for data in response_data(responses)
            for c in choice_dicts(data)
            if isinstance(c.get(KEY), dict)
        ]

    @classmethod
    def build(
        cls, stats: dict[str, Any], responses: list[ParsedResponse]
    ) -> SpecDecodeAcceptanceRecord:
        accepted, drafted = stats["accepted"], stats["drafted"]
        return SpecDecodeAcceptanceRecord.checked(
            engine=cls.record_engine(),
            draft_acceptance_rate=accepted / drafted,
            num_accepted_draft_tokens=accepted,
            num_draft_tokens=drafted,
            completion_tokens=completion_tokens(responses),
        )


def toy_stats(plan: SequencePlan, k: int, level: str, streaming: bool) -> dict[str, Any] | None:
    """The simulator's payload builder: the counts, none when nothing was drafted."""
    return {"drafted": plan.drafted, "accepted": plan.accepted} if plan.drafted else None


def install() -> None:
    if any(entry.name == "toy" for entry in registered_adapters()):
        return
    add_engine(TOY)
    register_choice_payload("toy", ChoicePayload(KEY, toy_stats))
