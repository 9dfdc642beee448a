"""The sweep's pure parts: placeholder substitution, --url labels, settings and their hash."""

from __future__ import annotations

import shlex
import sys

import pytest

from specmon.errors import UserError
from specmon.run.sweep.measure import k_mismatch
from specmon.run.sweep.servers import substitute
from specmon.run.sweep.settings import SweepSettings, parse_url_labels


def settings(**changes) -> SweepSettings:
    base = dict(
        ks=[1, 2], concurrencies=[1, 4], serve="srv --k {k} --port {port}", segment_requests=8
    )
    base.update(changes)
    return SweepSettings(**base)


def test_substitute_fills_placeholders_and_leaves_json_braces() -> None:
    template = """vllm serve M --port {port} --speculative-config '{"method": "ngram", "num_speculative_tokens": {k}}'"""
    command = substitute(template, 3, 8123)
    assert shlex.split(command) == [
        "vllm",
        "serve",
        "M",
        "--port",
        "8123",
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 3}',
    ]


def test_substitute_quotes_the_python_path() -> None:
    command = substitute("{python} -m specmon sim --port {port} --num-spec-tokens {k}", 2, 1)
    assert shlex.split(command)[0] == sys.executable
    assert shlex.split(command)[-1] == "2"


def test_url_labels_name_k() -> None:
    assert parse_url_labels(["k2=http://h:1/", "k0=http://h:2"]) == {
        2: "http://h:1",
        0: "http://h:2",
    }
    with pytest.raises(UserError, match="label it with its k"):
        parse_url_labels(["gpu0=http://h:1"])
    with pytest.raises(UserError, match="label it with its k"):
        parse_url_labels(["http://h:1"])
    with pytest.raises(UserError, match="k2 given twice"):
        parse_url_labels(["k2=http://h:1", "k2=http://h:2"])


def test_settings_need_the_placeholders_and_one_length() -> None:
    with pytest.raises(UserError, match=r"\{port\}"):
        settings(serve="srv --k {k}")
    with pytest.raises(UserError, match=r"\{k\}"):
        settings(serve="srv --port {port}")
    with pytest.raises(UserError, match="--baseline-serve needs the {port}"):
        settings(baseline_serve="srv")
    with pytest.raises(UserError, match="exactly one of"):
        settings(segment_duration=2.0)
    with pytest.raises(UserError, match="k=0 is the baseline"):
        settings(ks=[0, 2])
    with pytest.raises(UserError, match="either --serve"):
        settings(urls={2: "http://h:1"})


def test_baseline_runs_first() -> None:
    assert settings(baseline_serve="b --port {port}").grid_ks == [0, 1, 2]
    assert settings().grid_ks == [1, 2]
    assert settings(serve=None, urls={4: "u", 0: "v"}).grid_ks == [0, 4]


def test_hash_ignores_the_grid_but_not_what_is_measured() -> None:
    h = settings().settings_hash()
    assert settings(ks=[1, 2, 3], concurrencies=[1, 4, 16], stop_on_error=True).settings_hash() == h
    assert settings(segment_requests=9).settings_hash() != h
    assert settings(load={"output_tokens_mean": 64}).settings_hash() != h
    assert settings(serve="other --k {k} --port {port}").settings_hash() != h


def test_settings_round_trip() -> None:
    s = settings(serve=None, urls={2: "http://h:1"}, load={"streaming": True})
    assert SweepSettings.from_dict(s.to_dict()) == s


def test_k_mismatch() -> None:
    assert k_mismatch(2, 2, 5) is None
    assert k_mismatch(2, 3, 5) == "the server for k=2 reports num_spec_tokens 3"
    assert k_mismatch(0, None, 0) is None
    assert "baseline (k=0) server reports speculation" in k_mismatch(0, 3, 4)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--serve", "srv {k}", "--num-spec-tokens", "1"], "--serve needs the {port} placeholder"),
        (
            ["--serve", "s {k} {port}", "--num-spec-tokens", "1", "--request-count", "5"],
            "--request-count",
        ),
        (["--url", "gpu=http://127.0.0.1:1"], "label it with its k"),
        (["--num-spec-tokens", "1,1"], "give distinct whole numbers"),
        (["--resume", "/nonexistent/sweep"], "no sweep.json there"),
    ],
)
def test_bad_command_lines_are_one_line_errors(argv, message, capsys) -> None:
    from specmon.cli import main

    try:
        status = main(["sweep", *argv])
    except SystemExit as exc:  # argparse's type errors exit from parse_args
        status = exc.code
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert message in err
    assert len(err.splitlines()) == 1


def test_serve_without_num_spec_tokens_measures_k_1_to_5(capsys) -> None:
    """issue 36: `specmon sweep --serve 'specmon sim --port {port} --num-spec-tokens {k}'`
    with no other option is a whole sweep: k = 1..5, and it says so."""
    import argparse

    from specmon.commands import sweep as sweep_command

    parser = argparse.ArgumentParser()
    sweep_command.add_arguments(parser)
    args = parser.parse_args(["--serve", "specmon sim --port {port} --num-spec-tokens {k}"])
    built, _ = sweep_command._settings_from_args(args)
    assert built.ks == [1, 2, 3, 4, 5]
    assert "no --num-spec-tokens given: measuring k=1,2,3,4,5" in capsys.readouterr().err
