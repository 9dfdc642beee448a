"""The speculative method and its drafter (EAGLE, EAGLE-3, a draft model, n-gram, MTP): what
users compare, read from wherever it is told.

In order of trust: the server's own word (SGLang's /get_server_info `server_args`, vLLM's
dev-mode /server_info `vllm_config`), then what the user says (`--spec-method
METHOD[:DRAFTER]`), then a sweep's `--serve` line (vLLM's `--speculative-config` JSON,
SGLang's `--speculative-algorithm`, `specmon sim`'s preset). vLLM's /metrics has no
speculative-config info gauge (only `vllm:cache_config_info`), so a plain vLLM server
tells nothing and the flag is the source. Names are vLLM's `method` values where one fits.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

# vLLM's method names (vllm/config/speculative.py SpeculativeMethod) -> how a screen says it
LABELS = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE-3",
    "draft_model": "draft model",
    "ngram": "ngram",
    "ngram_gpu": "ngram",
    "mtp": "MTP",
    "medusa": "Medusa",
    "mlp_speculator": "MLP speculator",
    "suffix": "suffix",
}
# SGLang's --speculative-algorithm values -> vLLM's names
SGLANG_ALGORITHMS = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "STANDALONE": "draft_model",
    "NGRAM": "ngram",
    "LOOKAHEAD": "ngram",
}
SERVER, FLAG, SERVE_LINE = "server", "--spec-method", "--serve"
# vLLM's SpeculativeConfig.__repr__: SpeculativeConfig(method='eagle3', model='x', ...)
_VLLM_REPR = re.compile(r"SpeculativeConfig\(method='([^']*)', model=(?:'([^']*)'|None)")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class SpecMethod:
    method: str  # vLLM's name where one fits (eagle3, draft_model, ngram, mtp, ...)
    drafter: str | None  # the draft model or head, where there is one
    source: str  # where it was read: SERVER, FLAG or SERVE_LINE

    @property
    def label(self) -> str:
        """The method as a screen names it: EAGLE-3, draft model, MTP (any *_mtp)."""
        if self.method in LABELS:
            return LABELS[self.method]
        return "MTP" if self.method.endswith("_mtp") else self.method

    @property
    def text(self) -> str:
        """Method and drafter: 'EAGLE-3 (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)'."""
        return f"{self.label} ({self.drafter})" if self.drafter else self.label

    def to_json(self) -> dict[str, str | None]:
        return {"spec_method": self.method, "drafter": self.drafter, "source": self.source}


def parse_method(text: str | None, source: str = FLAG) -> SpecMethod | None:
    """'METHOD[:DRAFTER]' (--spec-method eagle3:yuhuili/EAGLE3-LLaMA3.1-Instruct-8B); None
    for none. A method that is not a plain name is a one-line error (ValueError)."""
    if text is None or not text.strip():
        return None
    method, _, drafter = text.strip().partition(":")
    if not _NAME.fullmatch(method):
        raise ValueError(f"'{text}': give METHOD[:DRAFTER], e.g. eagle3 or draft_model:MODEL")
    return SpecMethod(method.lower(), drafter.strip() or None, source)


def of_server_info(info: Any) -> SpecMethod | None:
    """The method a /get_server_info (SGLang) or dev-mode /server_info (vLLM) body names."""
    if not isinstance(info, dict):
        return None
    if "vllm_config" in info:
        return _of_vllm_config(info["vllm_config"])
    args = info.get("server_args")
    if isinstance(args, dict):
        return _of_sglang_args(args.get("speculative_algorithm"), args, SERVER)
    return None


def _of_vllm_config(config: Any) -> SpecMethod | None:
    if isinstance(config, str):  # config_format=text: the VllmConfig's str()
        found = _VLLM_REPR.search(config)
        return SpecMethod(found[1], found[2], SERVER) if found and found[1] else None
    spec = config.get("speculative_config") if isinstance(config, dict) else None
    return _of_vllm_spec(spec, SERVER)


def _of_vllm_spec(spec: Any, source: str) -> SpecMethod | None:
    """vLLM's speculative config as JSON: method, and model (the drafter) where it has one."""
    if not isinstance(spec, dict) or not isinstance(spec.get("method"), str):
        return None
    model = spec.get("model")
    return SpecMethod(spec["method"], model if isinstance(model, str) and model else None, source)


def _of_sglang_args(algorithm: Any, args: dict[str, Any], source: str) -> SpecMethod | None:
    if not isinstance(algorithm, str) or not algorithm:
        return None
    method = SGLANG_ALGORITHMS.get(algorithm.upper(), algorithm.lower())
    drafter = args.get("speculative_draft_model_path")
    return SpecMethod(method, drafter if isinstance(drafter, str) and drafter else None, source)


def of_command(command: str) -> SpecMethod | None:
    """The method a server command line names: vLLM's --speculative-config JSON ("method",
    "model") or SGLang's --speculative-algorithm (and --speculative-draft-model-path);
    `specmon sim` lines: sim/presets.py method_of_command."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: the command itself will fail and say so
        return None
    flags = command_flags(words)
    for name in ("--speculative-config", "--speculative_config"):
        if name in flags:
            try:
                return _of_vllm_spec(json.loads(flags[name]), SERVE_LINE)
            except ValueError:
                return None
    algorithm = flags.get("--speculative-algorithm", flags.get("--speculative-algo"))
    if algorithm is not None:
        drafter = {"speculative_draft_model_path": flags.get("--speculative-draft-model-path")}
        return _of_sglang_args(algorithm, drafter, SERVE_LINE)
    return None


def command_flags(words: list[str]) -> dict[str, str]:
    """--flag value and --flag=value pairs of a command line (the last one wins)."""
    out: dict[str, str] = {}
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, eq, value = word.partition("=")
        if eq:
            out[name] = value
        elif i + 1 < len(words):
            out[name] = words[i + 1]
    return out


__all__ = ["SpecMethod", "command_flags", "of_command", "of_server_info", "parse_method"]
