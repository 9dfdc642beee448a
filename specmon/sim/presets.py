"""Named simulator settings (`specmon sim --preset NAME`): a target model on a GPU, a drafter.

A preset fills the latency options (and, unless --acceptance is given, the acceptance per
position) that the user did not set; every option given explicitly wins over the preset.
Without --preset and without any latency option, `specmon sim` uses DEFAULT_PRESET and says
so on stderr, so a first sweep measures a GPU-like step model rather than the CPU's noise.
The figures and where they come from: docs/simulator.md, "Presets".
"""

from __future__ import annotations

import shlex
import textwrap
from dataclasses import dataclass, field
from typing import Any

from specmon.errors import UserError
from specmon.specdecode.method import SERVE_LINE, SpecMethod, command_flags, parse_method

# The options a preset sets; giving any of them (without --preset) turns the default off.
LATENCY_FIELDS = frozenset(
    {
        "latency_model",
        "step_ms",
        "batch_slope",
        "step_floor_ms",
        "compute_ms_per_token",
        "draft_ms_per_token",
        "ttft_ms",
    }
)
DEFAULT_PRESET = "h200-8b-eagle"


@dataclass(frozen=True)
class Preset:
    """One named setting: latency options plus acceptance a_1 falling by `decay` a position."""

    name: str
    summary: str
    method: str | None  # the speculative method it imitates (vLLM's "method" names)
    latency: dict[str, Any] = field(default_factory=dict)
    first_acceptance: float | None = None  # None: leave --acceptance at its default
    decay: float = 1.0
    drafter: str | None = None  # the draft model or head it imitates (None: none, n-gram)

    @property
    def spec_method(self) -> str | None:
        """METHOD[:DRAFTER], as --spec-method takes it (None: the preset names none)."""
        if self.method is None:
            return None
        return f"{self.method}:{self.drafter}" if self.drafter else self.method

    def acceptance(self, k: int) -> str | None:
        """a_i = first * decay^(i-1) for i = 1..k, as --acceptance text (None: not set)."""
        if self.first_acceptance is None or k < 1:
            return None
        return ",".join(f"{self.first_acceptance * self.decay**i:.4f}" for i in range(k))

    def values(self, k: int) -> dict[str, Any]:
        """The SimConfig fields this preset sets for a simulator drafting k tokens."""
        acceptance = self.acceptance(k)
        method = self.spec_method
        return {
            **self.latency,
            **({"acceptance": acceptance} if acceptance else {}),
            **({"spec_method": method} if method else {}),
        }


def _roofline(floor: float, per_token: float, draft: float, ttft: float) -> dict[str, Any]:
    return {
        "latency_model": "roofline",
        "step_floor_ms": floor,
        "compute_ms_per_token": per_token,
        "draft_ms_per_token": draft,
        "ttft_ms": ttft,
    }


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "h200-8b-eagle",
            "8B-class target in FP8 on one H200, EAGLE-style draft head "
            "(4 ms step floor, 0.05 ms per verified token, 0.2 ms per draft, 5 ms TTFT)",
            "eagle3",
            _roofline(4.0, 0.05, 0.2, 5.0),
            0.8,
            0.95,
            "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        ),
        Preset(
            "h200-8b-ngram",
            "8B-class target in FP8 on one H200, n-gram prompt lookup "
            "(4 ms step floor, 0.05 ms per verified token, 0.02 ms per draft, 5 ms TTFT)",
            "ngram",
            _roofline(4.0, 0.05, 0.02, 5.0),
            0.5,
            0.9,
        ),
        Preset(
            "h200-70b-draft",
            "70B-class target in FP8 on one H200, a 1B draft model "
            "(16 ms step floor, 0.4 ms per verified token, 1.5 ms per draft, 40 ms TTFT)",
            "draft_model",
            _roofline(16.0, 0.4, 1.5, 40.0),
            0.7,
            0.97,
            "meta-llama/Llama-3.2-1B-Instruct",
        ),
        Preset(
            "zero",
            "no latency at all: answers as fast as the CPU allows (tests, throughput checks)",
            None,
            {f: 0.0 for f in LATENCY_FIELDS - {"latency_model"}} | {"latency_model": "linear"},
        ),
    )
}


def method_of_command(command: str) -> SpecMethod | None:
    """The method a `specmon sim` command line runs: its --spec-method, else its preset's
    (the default preset when it names neither a preset nor a latency option); None for
    any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if "sim" not in words or not any(w.rsplit("/", 1)[-1] == "specmon" for w in words):
        return None
    flags = command_flags(words)
    try:
        if "--spec-method" in flags:
            return parse_method(flags["--spec-method"], SERVE_LINE)
        given = {f for f in LATENCY_FIELDS if "--" + f.replace("_", "-") in flags}
        preset, _ = choose(flags.get("--preset"), given)
    except (ValueError, UserError):
        return None  # the command fails on its own and says why
    return parse_method(preset.spec_method, SERVE_LINE) if preset else None


def lookup(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UserError(
            f"--preset: unknown preset '{name}' (available: {', '.join(PRESETS)})"
        ) from None


def choose(name: str | None, given: set[str]) -> tuple[Preset | None, bool]:
    """(the preset to apply, whether it is the implicit default): the named one, else the
    default when no latency option was given, else none."""
    if name:
        return lookup(name), False
    if given & LATENCY_FIELDS:
        return None, False
    return PRESETS[DEFAULT_PRESET], True


def help_text() -> str:
    """The presets as `specmon sim --help` lists them."""
    lines = ["presets (--preset NAME; options given explicitly win over the preset):"]
    for preset in PRESETS.values():
        default = " [default when no latency option is given]" * (preset.name == DEFAULT_PRESET)
        text = f"{preset.name}{default}: {preset.summary}"
        if preset.spec_method:
            text += f"; reports --spec-method {preset.spec_method}"
        if preset.first_acceptance is not None:
            text += (
                f"; acceptance a_i = {preset.first_acceptance} x {preset.decay}^(i-1) at "
                "position i unless --acceptance is given"
            )
        lines += textwrap.wrap(text, 90, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)
