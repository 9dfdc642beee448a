"""specmon/text_guard.py: the control characters a category may not hold, and the secrets a
server command line shows masked (issue 35 items 1 and 8). Expected texts written by hand."""

from __future__ import annotations

import pytest

from specmon.text_guard import control_character, mask_secrets, secret_values


@pytest.mark.parametrize(
    ("text", "named"),
    [("wri\r\nting", "U+000D (CR)"), ("a\nb", "U+000A (LF)"), ("\x00", "U+0000 (NUL)"),
     ("x\x1b[2J", "U+001B (ESC)"), ("tab\there", "U+0009 (TAB)"), ("del\x7f", "U+007F (DEL)"),
     ("c1\x85", "U+0085"), ("plain text, ünïcode ✓", None)],
)  # fmt: skip
def test_control_character_names_the_first_one(text, named):
    assert control_character(text) == named


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("vllm serve m --api-key sk-1234 --port {port}", "vllm serve m --api-key *** --port {port}"),
        ("x --api_key=sk-1234 --hf-token hf_abcd", "x --api_key=*** --hf-token ***"),
        ("x --password 'a b c' --client-secret \"d e\"", "x --password '***' --client-secret \"***\""),
        ("curl -H 'Authorization: Bearer tok-5678'", "curl -H 'Authorization: Bearer ***'"),
        ("HF_TOKEN=hf_abcd OPENAI_API_KEY=sk-9999 vllm", "HF_TOKEN=*** OPENAI_API_KEY=*** vllm"),
        ("KEY=sk-1234; vllm --api-key sk-1234", "KEY=***; vllm --api-key ***"),
        ("args: {'api_key': 'sk-1234', 'port': 8}", "args: {'api_key': '***', 'port': 8}"),
        # counts and other options are not secrets
        ("vllm --num-speculative-tokens 3 --max-num-batched-tokens 8192 MAX_TOKENS=5",
         "vllm --num-speculative-tokens 3 --max-num-batched-tokens 8192 MAX_TOKENS=5"),
    ],
)  # fmt: skip
def test_mask_secrets_hides_values_and_keeps_the_rest(command, shown):
    assert mask_secrets(command) == shown


def test_secret_values_are_the_literal_values_longest_first():
    command = "x --api-key sk-12345678 -H 'Authorization: Bearer tok-1' HF_TOKEN=hf_abcd"
    assert secret_values(command) == ["sk-12345678", "hf_abcd", "tok-1"]


def test_prose_with_a_hyphenated_secret_word_is_not_masked():
    # a sweep's cell line: "per-token time" once masked every "time" on stdout
    line = (
        "server behind its step model (+4.0% of its formula's time > 2%); "
        "off the simulator's formula (per-token time +5.0%, beyond 2%)"
    )
    assert mask_secrets(line) == line
    assert mask_secrets("serve.sh --hf-token abcd1234 x") == "serve.sh --hf-token *** x"
