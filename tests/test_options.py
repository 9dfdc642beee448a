"""Every declared option reaches every layer: argparse, TOML file, environment, --save-config.

The tests enumerate the declarations (RunConfig and SimConfig fields), so an option added
later that one layer misses fails here. Each option gets a sample value that differs from
its default; the value read back through each layer must equal the sample's validated form.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
import types
import typing
from typing import Any, Literal

import pytest
import tomli_w

from specmon.commands import demo as demo_command
from specmon.commands import sim as sim_command
from specmon.config import RUN_OPTIONS, OptionSet, OptionSpec, add_run_arguments
from specmon.errors import UserError
from specmon.run.sweep.options import SWEEP_OPTIONS
from specmon.sim.config import SIM_OPTIONS

# Values whose type alone does not give a valid, non-default sample (formats, dependencies).
RUN_SAMPLES: dict[str, str] = {
    "url": "gpu0=http://127.0.0.1:9",
    "extra_inputs": "temperature:0.5",
    "input_file": "prompts.jsonl",  # a path is only opened when the run starts
    "segments": "concurrency=1,4",
    "metric_percentiles": "25,75",
    "dataset_shard": "1/4",
    "slo": "ttft=1,tpot=50,p=95",  # parsed where it decides (decision/slo.py)
    "engine": "trtllm",  # a name from the engine registry
    "server_metrics_from": "prometheus:http://127.0.0.1:9",
}
SIM_SAMPLES: dict[str, str] = {
    "acceptance": "0.8",
    "category_acceptance": "code=0.9",
    "spec_schedule": "[[1, 4, 3], [5, 64, 1]]",
    "preset": "h200-70b-draft",
    "shape": "trtllm",  # one of the engine registry's simulator shapes
}
SWEEP_SAMPLES: dict[str, str] = {
    "num_spec_tokens": "1,3",  # lists of whole numbers, written as on the command line
    "concurrency": "2,8",
    "input_tokens": "512,4096",
    "gpus": "0,1",
}
SETS = [
    pytest.param(RUN_OPTIONS, RUN_SAMPLES, id="run"),
    pytest.param(SIM_OPTIONS, SIM_SAMPLES, id="sim"),
    pytest.param(SWEEP_OPTIONS, SWEEP_SAMPLES, id="sweep"),
]


def sample_text(options: OptionSet[Any], spec: OptionSpec, samples: dict[str, str]) -> str:
    """A flag text for `spec` that validates and differs from its default."""
    if spec.field in samples:
        return samples[spec.field]
    annotation = options.model.model_fields[spec.field].annotation
    base = annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # X | None
        base = next(a for a in typing.get_args(annotation) if a is not type(None))
    default = spec.default
    if typing.get_origin(base) is Literal:
        return str(next(c for c in typing.get_args(base) if c != default))
    if base is bool:
        return "on" if not default else "off"
    if base is int:
        return str((default or 0) + 2) if spec.field != "port" else "0"
    if base is float:
        return str(0.25 if default in (None, 0.0) else default / 2)
    return f"sample-{spec.field}"


def as_argv(spec: OptionSpec, text: str) -> list[str]:
    if spec.kind == "bool":
        return [spec.flag] if text == "on" else ["--no-" + spec.flag[2:]]
    return [spec.flag, text]


def env_text(spec: OptionSpec, text: str) -> str:
    return {"on": "true", "off": "false"}.get(text, text) if spec.kind == "bool" else text


def parser_for(options: OptionSet[Any]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    return parser


# What a lone sample needs to validate: RunConfig's cross-field rules (docs/architecture.md).
NEEDS: dict[str, dict[str, Any]] = {
    "prompt_source": {"input_file": "prompts.jsonl"},
    "synthetic_input_tokens_mean": {"prompt_source": "synthetic"},
    "synthetic_input_tokens_stddev": {"prompt_source": "synthetic"},
    "dataset": {"input_file": "question.jsonl"},
    "dataset_category": {"dataset": "spec_bench", "input_file": "question.jsonl"},
    "segments": {"segment_duration": 5.0},
    "segment_duration": {"segments": "concurrency=1,2"},
    "segment_requests": {"segments": "concurrency=1,2"},
}


def needs_of(options: OptionSet[Any], field: str) -> dict[str, Any]:
    return NEEDS.get(field, {}) if options is RUN_OPTIONS else {}


def expected(options: OptionSet[Any], spec: OptionSpec, text: str) -> Any:
    """The validated value of the sample, built directly on the model (no layer involved)."""
    raw: Any = {"on": True, "off": False}.get(text, text) if spec.kind == "bool" else text
    if spec.kind == "append":
        raw = [raw]
    model = options.model(**{spec.field: raw, **needs_of(options, spec.field)})
    return getattr(model, spec.field)


def test_every_field_is_declared_as_an_option_with_a_distinct_flag_key_and_variable():
    for options in (RUN_OPTIONS, SIM_OPTIONS):
        fields = list(options.model.model_fields)
        assert [spec.field for spec in options.specs] == fields
        for attr in ("flag", "key", "env"):
            values = [getattr(spec, attr) for spec in options.specs]
            assert len(set(values)) == len(values), attr
        assert all(spec.help for spec in options.specs)
    assert RUN_OPTIONS.by_field["request_count"].env == "SPECMON_REQUEST_COUNT"
    assert SIM_OPTIONS.by_field["log_path"].flag == "--log"
    assert SIM_OPTIONS.by_field["log_path"].env == "SPECMON_SIM_LOG"
    assert SIM_OPTIONS.by_field["force_include_usage"].key == "enable-force-include-usage"


@pytest.mark.parametrize(("options", "samples"), SETS)
def test_every_option_through_flags_env_toml_file_and_save_config(options, samples, tmp_path):
    parser = parser_for(options)
    defaults = options.model().model_dump()
    for spec in options.specs:
        text = sample_text(options, spec, samples)
        want = expected(options, spec, text)
        assert want != defaults[spec.field], f"sample for {spec.field} equals its default"
        needs = needs_of(options, spec.field)
        by_flag = options.build(parser.parse_args(as_argv(spec, text)), environ={}, overrides=needs)
        assert getattr(by_flag, spec.field) == want, f"flag {spec.flag}"
        by_env = options.build(environ={spec.env: env_text(spec, text)}, overrides=needs)
        assert getattr(by_env, spec.field) == want, f"env {spec.env}"
        path = tmp_path / f"{spec.field}.toml"
        path.write_text(tomli_w.dumps({spec.key: by_flag.model_dump()[spec.field]}))
        by_file = options.build(environ={options.config_env: str(path)}, overrides=needs)
        assert getattr(by_file, spec.field) == want, f"TOML key {spec.key}"
        saved_path = tmp_path / f"{spec.field}.saved.toml"
        options.save(by_flag, str(saved_path))
        saved = tomllib.loads(saved_path.read_text())
        if spec.secret:
            assert spec.key not in saved, f"--save-config wrote the secret {spec.key}"
            continue
        assert spec.key in saved, f"--save-config left out {spec.key}"
        again = options.build(parser.parse_args(["--config", str(saved_path)]), environ={})
        assert getattr(again, spec.field) == want, f"--save-config round trip of {spec.key}"


def test_save_config_of_every_simulator_option_at_once(tmp_path):
    argv: list[str] = []
    for spec in SIM_OPTIONS.specs:
        argv += as_argv(spec, sample_text(SIM_OPTIONS, spec, SIM_SAMPLES))
    config = SIM_OPTIONS.build(parser_for(SIM_OPTIONS).parse_args(argv), environ={})
    path = tmp_path / "saved.toml"
    SIM_OPTIONS.save(config, str(path))
    saved = tomllib.loads(path.read_text())
    assert set(saved) == {spec.key for spec in SIM_OPTIONS.specs} - {"api-key"}
    assert saved["acceptance"] == [0.8] * 5 and saved["log"] == "sample-log_path"
    again = SIM_OPTIONS.build(parser_for(SIM_OPTIONS).parse_args(["--config", str(path)]), {})
    assert again.model_dump(exclude={"api_key"}) == config.model_dump(exclude={"api_key"})


def test_sim_argv_rebuilds_the_config_in_a_child_parser():
    argv: list[str] = []
    for spec in SIM_OPTIONS.specs:
        argv += as_argv(spec, sample_text(SIM_OPTIONS, spec, SIM_SAMPLES))
    config = SIM_OPTIONS.build(parser_for(SIM_OPTIONS).parse_args(argv), environ={})
    child = argparse.ArgumentParser()
    sim_command.add_arguments(child)
    rebuilt = SIM_OPTIONS.build(child.parse_args(SIM_OPTIONS.to_argv(config)), environ={})
    assert rebuilt == config


def test_sim_layers_precedence_and_messages(tmp_path):
    cfg = tmp_path / "sim.toml"
    cfg.write_text(
        "num-spec-tokens = 4\nttft_ms = 9.0\nstep-ms = 2.0\nacceptance = [0.9, 0.8, 0.7, 0.6]\n"
    )
    env = {"SPECMON_SIM_CONFIG": str(cfg), "SPECMON_SIM_STEP_MS": "5"}
    args = parser_for(SIM_OPTIONS).parse_args(["--ttft-ms", "1"])
    config = SIM_OPTIONS.build(args, environ=env)
    assert (config.num_spec_tokens, config.ttft_ms, config.step_ms) == (4, 1.0, 5.0)
    assert config.acceptance == [0.9, 0.8, 0.7, 0.6]
    with pytest.raises(UserError) as err:
        SIM_OPTIONS.build(environ={"SPECMON_SIM_ERROR_RATE": "2"})
    assert str(err.value).startswith("environment SPECMON_SIM_ERROR_RATE: bad value '2'")
    bad = tmp_path / "bad.toml"
    bad.write_text("log_path = 'x'\n")  # the key is the flag's: log
    with pytest.raises(UserError) as err:
        SIM_OPTIONS.build(environ={"SPECMON_SIM_CONFIG": str(bad)})
    assert str(err.value) == f"config file {bad}: unknown key 'log_path'"
    with pytest.raises(UserError, match="--acceptance: 2 values for 3 draft positions"):
        SIM_OPTIONS.build(environ={"SPECMON_SIM_ACCEPTANCE": "0.5,0.6"})
    # a drafter's profile longer than k: its first k positions (one profile, a sweep over k)
    longer = {"SPECMON_SIM_ACCEPTANCE": "0.9,0.8,0.7,0.6", "SPECMON_SIM_NUM_SPEC_TOKENS": "2"}
    assert SIM_OPTIONS.build(environ=longer).acceptance == [0.9, 0.8]
    by_category = {"SPECMON_SIM_CATEGORY_ACCEPTANCE": "code=0.9:0.8:0.7:0.6,chat=0.5"}
    assert SIM_OPTIONS.build(environ=by_category).category_acceptance == {
        "code": [0.9, 0.8, 0.7],
        "chat": [0.5, 0.5, 0.5],
    }


def demo_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo_command.add_arguments(parser)
    return parser.parse_args(argv)


def test_demo_offers_every_simulator_option_it_does_not_set_itself():
    parser = argparse.ArgumentParser()
    demo_command.add_arguments(parser)
    flags = {opt for action in parser._actions for opt in action.option_strings}
    for spec in SIM_OPTIONS.specs:
        flag = demo_command.DEMO_SIM_FLAGS.get(spec.field, spec.flag)
        if spec.field in demo_command.DEMO_SETS_ITSELF and spec.field != "num_spec_tokens":
            assert flag not in flags or flag in {s.flag for s in RUN_OPTIONS.specs}
        else:
            assert flag in flags, flag
    for spec in RUN_OPTIONS.specs:
        assert spec.flag in flags


def test_demo_sim_config_defaults_overrides_and_category_profile(monkeypatch):
    monkeypatch.delenv("SPECMON_SIM_TTFT_MS", raising=False)
    args = demo_args(["--num-spec-tokens", "2,3", "--step-ms", "7", "--sim-log", "truth"])
    k2 = demo_command.sim_config(args, seed=11, k=2)
    k3 = demo_command.sim_config(args, seed=11, k=3)
    assert (k3.ttft_ms, k3.step_ms, k3.seed, k3.port) == (15.0, 7.0, 11, 0)  # demo default, flag
    assert (k2.log_path, k3.log_path) == ("truth.k2", "truth.k3")
    assert k2.category_acceptance == {}  # the built-in profile has 3 positions
    assert k3.category_acceptance["code"] == [0.9, 0.85, 0.8]
    given = demo_command.sim_config(demo_args(["--acceptance", "0.6"]), seed=1, k=3)
    assert given.category_acceptance == {} and given.acceptance == [0.6, 0.6, 0.6]


@pytest.mark.e2e
def test_demo_bad_simulator_value_is_one_line_before_any_start():
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "demo", "--headless", "--error-rate", "1.5"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "specmon: error: option --error-rate: bad value '1.5' for 'error_rate': "
        "Input should be less than or equal to 1"
    ]


def test_run_parser_helper_still_registers_config_flags():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(["--config", "a.toml", "--save-config", "b.toml"])
    assert (args.config_file, args.save_config) == ("a.toml", "b.toml")
