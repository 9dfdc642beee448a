"""The speculative method and drafter (issue 36 item 6): read from a server's info (vLLM's
dev-mode /server_info, SGLang's /get_server_info), --spec-method, or a server command line;
written under the exports' input_config `specmon` key, named by `compare` and sweep.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specmon.sim.presets import method_of_command
from specmon.sim.process import start_sim
from specmon.specdecode.method import SpecMethod, of_command, of_server_info, parse_method

EAGLE3_HEAD = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
# vLLM's VllmConfig.__str__ (config_format=text), its speculative part as vLLM's
# SpeculativeConfig.__repr__ writes it: f"SpeculativeConfig({method=}, {model=}, ...)"
VLLM_TEXT = (
    "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig("
    f"method='eagle3', model='{EAGLE3_HEAD}', num_spec_tokens=3), tokenizer='x'"
)


def test_labels_are_the_names_users_compare():
    assert SpecMethod("eagle3", EAGLE3_HEAD, "server").text == f"EAGLE-3 ({EAGLE3_HEAD})"
    assert SpecMethod("eagle", None, "server").label == "EAGLE"
    assert SpecMethod("draft_model", "m", "server").label == "draft model"
    assert SpecMethod("deepseek_mtp", None, "server").label == "MTP"  # any *_mtp
    assert SpecMethod("ngram", None, "server").text == "ngram"


def test_vllm_dev_mode_server_info_text_and_json():
    assert of_server_info({"vllm_config": VLLM_TEXT}) == SpecMethod("eagle3", EAGLE3_HEAD, "server")
    ngram = "speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4)"
    assert of_server_info({"vllm_config": ngram}) == SpecMethod("ngram", None, "server")
    assert of_server_info({"vllm_config": "model='m', speculative_config=None"}) is None
    as_json = {"vllm_config": {"speculative_config": {"method": "draft_model", "model": "d"}}}
    assert of_server_info(as_json) == SpecMethod("draft_model", "d", "server")


def test_sglang_server_args():
    args = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "h"}
    assert of_server_info({"server_args": args}) == SpecMethod("eagle3", "h", "server")
    nextn = {"server_args": {"speculative_algorithm": "NEXTN"}}
    assert of_server_info(nextn) == SpecMethod("mtp", None, "server")
    assert of_server_info({"server_args": {"speculative_algorithm": None}}) is None
    assert of_server_info(["not", "a", "dict"]) is None


def test_command_lines():
    vllm = (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8001 --speculative-config "
        f'\'{{"method": "eagle3", "model": "{EAGLE3_HEAD}", "num_speculative_tokens": 3}}\''
    )
    assert of_command(vllm) == SpecMethod("eagle3", EAGLE3_HEAD, "--serve")
    assert of_command("""vllm serve m --speculative_config='{"method":"ngram"}'""") == SpecMethod(
        "ngram", None, "--serve"
    )
    sglang = "python -m sglang.launch_server --speculative-algorithm STANDALONE "
    sglang += "--speculative-draft-model-path small"
    assert of_command(sglang) == SpecMethod("draft_model", "small", "--serve")
    assert of_command("vllm serve m --port 1") is None
    assert of_command("vllm serve 'unbalanced") is None


def test_sim_command_lines_name_their_preset():
    default = method_of_command("specmon sim --port {port} --num-spec-tokens {k}")
    assert default == SpecMethod("eagle3", EAGLE3_HEAD, "--serve")  # h200-8b-eagle
    ngram = method_of_command("{python} -m specmon sim --preset h200-8b-ngram --port 1")
    assert ngram == SpecMethod("ngram", None, "--serve")
    own = method_of_command("specmon sim --preset zero --spec-method mtp --port 1")
    assert own == SpecMethod("mtp", None, "--serve")
    assert method_of_command("specmon sim --step-ms 3") is None  # no preset: it names none
    assert method_of_command("specmon sim --preset zero") is None
    assert method_of_command("vllm serve m") is None


@pytest.mark.e2e
def test_flag_text_and_bad_text():
    assert parse_method("EAGLE3:h/x") == SpecMethod("eagle3", "h/x", "--spec-method")
    assert parse_method("") is None
    with pytest.raises(ValueError, match="give METHOD"):
        parse_method("two words")
    bad = subprocess.run(
        [sys.executable, "-m", "specmon", "--url", "http://127.0.0.1:9", "--spec-method", "a b"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def _run(url: str, out, *extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "specmon", "--url", url, "--headless", "--request-count", "6"]
        + ["--artifact-dir", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((out / "profile_export_aiperf.json").read_text())


@pytest.mark.e2e
def test_run_exports_and_compare_name_the_method(tmp_path):
    """The simulator tells its preset's method in /server_info, as vLLM's dev mode does:
    the server's word wins over --spec-method; a server that tells none keeps the flag."""
    with start_sim(["--preset", "h200-8b-eagle", "--seed", "3"]) as sim:
        told = _run(sim.url, tmp_path / "told", "--spec-method", "ngram")
    with start_sim(["--preset", "zero", "--seed", "3"]) as sim:
        flag = _run(sim.url, tmp_path / "flag", "--spec-method", "draft_model:small-1b")
    assert told["input_config"]["specmon"] == {
        "spec_method": "eagle3",
        "drafter": EAGLE3_HEAD,
        "source": "server",
    }
    assert flag["input_config"]["specmon"] == {
        "spec_method": "draft_model",
        "drafter": "small-1b",
        "source": "--spec-method",
    }
    assert flag["input_config"]["concurrency"] == told["input_config"]["concurrency"]
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "specmon",
            "compare",
            str(tmp_path / "told"),
            str(tmp_path / "flag"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert compare.returncode == 0, compare.stderr
    assert f"  told: EAGLE-3 ({EAGLE3_HEAD})\n  flag: draft model (small-1b)\n" in compare.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "specmon", "compare", "--json"]
        + [str(tmp_path / "told"), str(tmp_path / "flag")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    runs = json.loads(as_json.stdout)["runs"]
    assert [r["spec_method"]["spec_method"] for r in runs] == ["eagle3", "draft_model"]


@pytest.mark.e2e
def test_sweep_records_the_method_of_its_serve_line(tmp_path):
    serve = "specmon sim --preset zero --spec-method ngram --port {port} --num-spec-tokens {k}"
    done = subprocess.run(
        [sys.executable, "-m", "specmon", "sweep", "--serve", serve, "--num-spec-tokens", "2"]
        + ["--concurrency", "1", "--repeats", "1", "--segment-requests", "4"]
        + ["--artifact-dir", str(tmp_path / "sw"), "--headless"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    ngram = {"spec_method": "ngram", "drafter": None, "source": "--serve"}
    assert [run["spec_method"] for run in doc["arm_runs"]] == [ngram]
    summaries = list((tmp_path / "sw").rglob("profile_export_aiperf.json"))
    assert summaries
    for path in summaries:
        assert json.loads(path.read_text())["input_config"]["specmon"] == ngram
