"""`specmon sim --preset NAME` and the simulator's default when no latency option is given."""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request

import pytest
from support.cli import start_specmon

from specmon.commands import demo as demo_command
from specmon.commands import sim as sim_command
from specmon.errors import UserError
from specmon.sim.config import SIM_OPTIONS, with_preset

NO_PRESET_ENV = {k: v for k, v in os.environ.items() if k != "SPECMON_SIM_PRESET"}


def sim_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sim_command.add_arguments(parser)
    return parser.parse_args(argv)


def build(argv: list[str], environ: dict[str, str] | None = None):
    return with_preset(SIM_OPTIONS.build(sim_args(argv), environ=environ or {}))


def test_no_latency_option_gives_the_default_preset_and_says_it_is_implicit():
    cfg, preset, implicit = build(["--num-spec-tokens", "3"])
    assert preset is not None and preset.name == "h200-8b-eagle" and implicit
    assert cfg.preset == "h200-8b-eagle" and cfg.latency_model == "roofline"
    assert (cfg.step_floor_ms, cfg.compute_ms_per_token) == (4.0, 0.05)
    assert (cfg.draft_ms_per_token, cfg.ttft_ms) == (0.2, 5.0)
    # a_i = 0.8 x 0.95^(i-1): 0.8, 0.76, 0.722
    assert cfg.acceptance == pytest.approx([0.8, 0.76, 0.722])
    # the roofline step at k=3, B=1: max(4, 0.05 * 1 * 4) + 0.2 * 3 = 4.6 ms
    assert cfg.latency().step_ms_at(3, 1) == pytest.approx(4.6)


def test_a_latency_option_turns_the_default_off():
    cfg, preset, implicit = build(["--step-ms", "2"])
    assert preset is None and not implicit and cfg.preset is None
    assert (cfg.latency_model, cfg.step_ms, cfg.ttft_ms) == ("linear", 2.0, 0.0)
    assert cfg.acceptance == [0.7, 0.7, 0.7]


def test_explicit_options_win_over_the_named_preset():
    cfg, preset, implicit = build(
        ["--preset", "h200-70b-draft", "--ttft-ms", "10", "--acceptance", "0.6"]
    )
    assert preset is not None and preset.name == "h200-70b-draft" and not implicit
    assert (cfg.step_floor_ms, cfg.compute_ms_per_token, cfg.draft_ms_per_token) == (
        16.0,
        0.4,
        1.5,
    )
    assert cfg.ttft_ms == 10.0 and cfg.acceptance == [0.6, 0.6, 0.6]


def test_zero_preset_from_the_environment_is_the_instant_server():
    cfg, preset, implicit = build([], environ={"SPECMON_SIM_PRESET": "zero"})
    assert preset is not None and preset.name == "zero" and not implicit
    assert cfg.latency().step_ms_at(3, 8) == 0.0 and cfg.ttft_ms == 0.0
    assert cfg.acceptance == [0.7, 0.7, 0.7]  # zero leaves acceptance at its default


def test_k0_takes_only_the_latency():
    cfg, _, _ = build(["--preset", "h200-8b-ngram", "--num-spec-tokens", "0"])
    assert cfg.acceptance == [] and cfg.draft_ms_per_token == 0.02


def test_a_preset_passes_to_a_child_simulator_unchanged():
    cfg, _, _ = build(["--preset", "h200-70b-draft", "--num-spec-tokens", "5"])
    again, _, _ = with_preset(SIM_OPTIONS.build(sim_args(SIM_OPTIONS.to_argv(cfg)), environ={}))
    assert again == cfg


def test_unknown_preset_is_one_line_naming_the_presets():
    with pytest.raises(UserError) as err:
        build(["--preset", "a100"])
    assert "unknown preset 'a100' (available: h200-8b-eagle, h200-8b-ngram" in str(err.value)


def test_help_lists_every_preset():
    parser = argparse.ArgumentParser()
    sim_command.add_arguments(parser)
    text = parser.format_help()
    for name in ("h200-8b-eagle", "h200-8b-ngram", "h200-70b-draft", "zero"):
        assert f"  {name}" in text
    assert "[default when no latency option is given]" in text


def test_demo_preset_replaces_the_demo_latency_defaults():
    parser = argparse.ArgumentParser()
    demo_command.add_arguments(parser)
    plain = demo_command.sim_config(parser.parse_args([]), 1, 2)
    assert (plain.ttft_ms, plain.step_ms, plain.latency_model) == (15.0, 3.0, "linear")
    named = demo_command.sim_config(parser.parse_args(["--preset", "h200-70b-draft"]), 1, 2)
    assert (named.ttft_ms, named.step_floor_ms, named.latency_model) == (40.0, 16.0, "roofline")


def test_demo_sweep_serves_a_named_preset():
    serve, baseline = demo_command.demo_templates(None, 7)
    assert "--preset h200-8b-eagle" in serve and "--num-spec-tokens {k}" in serve
    assert "--preset h200-8b-eagle" in baseline and "--num-spec-tokens 0" in baseline
    assert "--acceptance" not in serve  # the preset's own


@pytest.mark.e2e
def test_sim_without_options_announces_its_preset_and_takes_gpu_time(tmp_path):
    """A 9-token answer at k=3 from the default preset takes at least its TTFT and steps:
    5 ms, then at most 8 verify steps of 4.6 ms but at least 2 (9 tokens, at most 4 a step):
    5 + 2 * 4.6 = 14.2 ms is the floor whatever the acceptance drew."""
    proc = start_specmon("sim", "--port", "0", env=NO_PRESET_ENV)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().split()[-1]
        announce = proc.stderr.readline()
        assert "using preset h200-8b-eagle" in announce and "--preset zero" in announce
        body = {"model": "specmon-sim", "prompt": "hi", "max_tokens": 9, "ignore_eos": True}
        request = urllib.request.Request(
            url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.load(response)
        took_ms = (time.perf_counter() - start) * 1000
        assert answer["usage"]["completion_tokens"] == 9
        assert took_ms >= 14.2
    finally:
        proc.terminate()
        proc.wait(timeout=30)
