"""Record AIPerf 0.13 runs against `specmon sim` as committed fixtures (tests/peer/fixtures/).

So the side-by-side comparison also runs where AIPerf cannot be installed. Regenerate with
    bash .ci/setup_aiperf.sh && python tests/peer/capture_aiperf.py
Each case keeps AIPerf's profile_export_raw.jsonl, profile_export.jsonl,
profile_export_aiperf.json and the Spec Decode section it printed (spec_section.txt).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest does
from peer.aiperf_peer import run_aiperf, spec_section
from specmon.sim.process import start_sim

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODEL = "peer-specdec"
SIM_ARGS = [
    "--model", MODEL, "--seed", "11", "--num-spec-tokens", "3", "--acceptance", "0.8,0.6,0.4",
    "--ttft-ms", "5", "--step-ms", "2",
]  # fmt: skip
# case -> (streaming, requests, output tokens)
CASES = {
    "chat_stream": (True, 12, 32),
    "chat_nonstream": (False, 12, 32),
    "zero_step_stream": (True, 4, 1),
}
KEEP = ("profile_export_raw.jsonl", "profile_export.jsonl", "profile_export_aiperf.json")


def capture(case: str, url: str) -> None:
    streaming, requests, osl = CASES[case]
    with tempfile.TemporaryDirectory() as tmp:
        proc = run_aiperf(url, MODEL, Path(tmp), streaming=streaming, requests=requests, osl=osl)
        if proc.returncode != 0:
            raise SystemExit(
                f"aiperf failed for {case}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )
        dest = FIXTURES / case
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in KEEP:
            shutil.copy(Path(tmp) / name, dest / name)
        (dest / "spec_section.txt").write_text(spec_section(proc.stdout) + "\n")


def main() -> int:
    with start_sim(SIM_ARGS) as sim:
        for case in CASES:
            capture(case, sim.url)
            print("recorded", case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
