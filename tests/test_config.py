"""RunConfig: flag table, TOML file, SPECMON_* env, precedence, one-line errors, save-config."""

from __future__ import annotations

import argparse
import tomllib

import pytest
from support.cli import specmon

from specmon.config import (
    RunConfig,
    add_run_arguments,
    build_config,
    parse_extra_inputs,
    save_config,
)
from specmon.errors import UserError


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_without_any_layer():
    config = build_config(parse([]), environ={})
    assert config.endpoint_type == "chat"
    assert config.streaming is False
    assert config.export_level == "records"
    assert config.refresh_hz == 4.0
    assert config.effective_concurrency == 1  # closed loop of one, as AIPerf
    assert config.effective_prompt_source == "builtin"


def test_precedence_flags_over_env_over_file_over_defaults(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        'concurrency = 3\nrequest-rate = 5.0\nendpoint_type = "completions"\n'
        "warmup-request-count = 7\n"
    )
    env = {"SPECMON_CONCURRENCY": "8", "SPECMON_REQUEST_RATE": "9.5"}
    config = build_config(parse(["--config", str(cfg), "--concurrency", "16"]), environ=env)
    assert config.concurrency == 16  # flag beats env (8) and file (3)
    assert config.request_rate == 9.5  # env beats file (5.0)
    assert config.endpoint_type == "completions"  # file beats default (chat)
    assert config.warmup_request_count == 7
    assert config.refresh_hz == 4.0  # default


def test_bool_flag_can_override_file_true(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text("streaming = true\n")
    assert build_config(parse(["--config", str(cfg)]), environ={}).streaming is True
    assert (
        build_config(parse(["--config", str(cfg), "--no-streaming"]), environ={}).streaming is False
    )


def test_unknown_key_in_file_is_one_line_error(tmp_path):
    cfg = tmp_path / "x.toml"
    cfg.write_text("concurency = 4\n")
    with pytest.raises(UserError) as err:
        build_config(parse(["--config", str(cfg)]), environ={})
    assert str(err.value) == f"config file {cfg}: unknown key 'concurency'"


def test_bad_value_in_file_names_key_and_file(tmp_path):
    cfg = tmp_path / "x.toml"
    cfg.write_text('endpoint-type = "embeddings"\n')
    with pytest.raises(UserError) as err:
        build_config(parse(["--config", str(cfg)]), environ={})
    message = str(err.value)
    assert message.startswith(f"config file {cfg}: bad value 'embeddings' for 'endpoint_type'")
    assert "\n" not in message


def test_bad_env_value_names_the_variable():
    with pytest.raises(UserError) as err:
        build_config(parse([]), environ={"SPECMON_CONCURRENCY": "many"})
    assert "environment SPECMON_CONCURRENCY" in str(err.value)
    assert "'concurrency'" in str(err.value)


def test_bad_flag_value_names_the_flag():
    with pytest.raises(UserError) as err:
        build_config(parse(["--concurrency", "0"]), environ={})
    assert str(err.value).startswith("option --concurrency: bad value '0' for 'concurrency'")


def test_invalid_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("concurrency = = 3\n")
    with pytest.raises(UserError, match="invalid TOML"):
        build_config(parse(["--config", str(bad)]), environ={})
    with pytest.raises(UserError, match="not found"):
        build_config(parse(["--config", str(tmp_path / "nope.toml")]), environ={})


def test_api_key_from_openai_env_and_specmon_env_wins():
    assert build_config(parse([]), environ={"OPENAI_API_KEY": "sk-a"}).api_key == "sk-a"
    env = {"OPENAI_API_KEY": "sk-a", "SPECMON_API_KEY": "sk-b"}
    assert build_config(parse([]), environ=env).api_key == "sk-b"
    assert build_config(parse(["--api-key", "sk-c"]), environ=env).api_key == "sk-c"


def test_urls_repeatable_with_labels_and_env_comma_list():
    config = build_config(parse(["--url", "http://a:1", "--url", "gpu1=http://b:2/"]), environ={})
    assert config.targets() == [("a:1", "http://a:1"), ("gpu1", "http://b:2")]
    config = build_config(parse([]), environ={"SPECMON_URL": "http://a:1,http://c:3"})
    assert config.url == ["http://a:1", "http://c:3"]
    with pytest.raises(UserError, match="not an http"):
        build_config(parse(["--url", "localhost:8000"]), environ={})


def test_extra_inputs_json_and_aiperf_key_value_forms():
    config = build_config(
        parse(
            [
                "--extra-inputs",
                "ignore_eos:true",
                "--extra-inputs",
                "temperature:0.5",
                "--extra-inputs",
                '{"stream_options": {"include_usage": false}}',
                "--extra-inputs",
                "user:alice",
            ]
        ),
        environ={},
    )
    assert config.extra_inputs == {
        "ignore_eos": True,
        "temperature": 0.5,
        "stream_options": {"include_usage": False},
        "user": "alice",
    }
    with pytest.raises(ValueError, match="JSON object or key:value"):
        parse_extra_inputs(["nonsense"])
    with pytest.raises(UserError, match="extra_inputs"):
        build_config(parse(["--extra-inputs", "{broken"]), environ={})


def test_artifact_dir_names_like_aiperf():
    closed = RunConfig(concurrency=16)
    assert (
        closed.default_artifact_dir("specmon-sim")
        == "artifacts/specmon-sim-openai-chat-concurrency16"
    )
    opened = RunConfig(request_rate=10, endpoint_type="completions")
    assert (
        opened.default_artifact_dir("org/model")
        == "artifacts/org_model-openai-completions-request_rate10"
    )


def test_save_config_round_trips_and_omits_secrets(tmp_path):
    config = build_config(
        parse(
            [
                "--url",
                "http://a:1",
                "--concurrency",
                "4",
                "--api-key",
                "sk-x",
                "--extra-inputs",
                "ignore_eos:true",
            ]
        ),
        environ={},
    )
    path = tmp_path / "saved.toml"
    save_config(config, str(path))
    data = tomllib.loads(path.read_text())
    assert data["concurrency"] == 4 and "api-key" not in data
    again = build_config(parse(["--config", str(path)]), environ={})
    assert again.model_dump(exclude={"api_key"}) == config.model_dump(exclude={"api_key"})


def test_prompt_source_file_needs_input_file():
    with pytest.raises(UserError, match="needs --input-file"):
        build_config(parse(["--prompt-source", "file"]), environ={})


@pytest.mark.e2e
def test_cli_reports_unknown_config_key_as_one_line(tmp_path):
    cfg = tmp_path / "x.toml"
    cfg.write_text("concurency = 4\n")
    proc = specmon("run", "--config", str(cfg), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"specmon: error: config file {cfg}: unknown key 'concurency'"


@pytest.mark.e2e
def test_bad_flag_type_is_one_line_not_argparse_usage():
    proc = specmon("run", "--concurrency", "lots", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "specmon: error: option --concurrency: bad value 'lots' for 'concurrency': "
        "Input should be a valid integer, unable to parse string as an integer"
    ]


@pytest.mark.e2e
def test_unknown_flag_is_one_line():
    proc = specmon("--concurency", "4", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "specmon: error: unrecognized arguments: --concurency 4 (see --help)"
    ]


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["run", "sweep", "demo", "sim", "watch", "compare"])
def test_every_commands_help_prints(command):
    """argparse formats help with %: a literal one in an option's help ("more than 1% of
    the requests", --fail-on-errors) made `specmon run --help` a traceback."""
    out = specmon(command, "--help", timeout=60)
    assert out.returncode == 0, out.stderr[-500:]
    assert "usage:" in out.stdout
    if command == "run":
        assert "more than 1% of the requests failed" in " ".join(out.stdout.split())
