#!/usr/bin/env bash
# Create (or validate) the cached AIPerf 0.13.0 venv and its offline tokenizer, outside the clone.
#   venv:      ${SPECMON_CACHE:-$HOME/.cache/specmon}/aiperf-venv   (~1.2 GB, no torch)
#   tokenizer: $CACHE/aiperf-hf (an HF_HOME with hub/models--specmon--shakespeare-bpe)
# Idempotent. Before each slow first-time step it says on stderr what it is doing and how long
# that usually takes, and every 15 s while the venv installs how far it is; on stdout it
# prints ONE line "aiperf: ready ..." or "aiperf: unavailable: <why>" (the last stdout line
# is what callers read) and writes it to $CACHE/aiperf.status
# (tests/interop/test_aiperf_peer.py shows it when it skips). Always exits 0.
set -uo pipefail
CACHE=${SPECMON_CACHE:-$HOME/.cache/specmon}
VENV=$CACHE/aiperf-venv
HF=$CACHE/aiperf-hf
STATUS=$CACHE/aiperf.status
LOG=$CACHE/setup_aiperf.log
HERE=$(cd "$(dirname "$0")/.." && pwd)
PIN=aiperf==0.13.0
mkdir -p "$CACHE"

finish() { echo "$1" | tee "$STATUS"; exit 0; }
# Progress goes to stderr so that stdout stays the one status line.
say() { echo "aiperf: $1" >&2; }

venv_ok() {
  [ -x "$VENV/bin/aiperf" ] && [ "$(cat "$VENV/.specmon-pins" 2>/dev/null)" = "$PIN" ] \
    && "$VENV/bin/python" -c 'import aiperf, transformers' >/dev/null 2>&1
}

install_venv() {
  rm -rf "$VENV"
  python3 -m venv "$VENV" || return 1
  "$VENV/bin/pip" install -q --upgrade pip || return 1
  "$VENV/bin/pip" install -q "$PIN" || return 1
  echo "$PIN" > "$VENV/.specmon-pins"
}

# with_progress: the venv's size every 15 s while it installs (.ci/progress.sh)
. "$HERE/.ci/progress.sh"

exec 9>"$CACHE/setup_aiperf.lock"
if ! flock -n 9; then
  say "waiting for another setup_aiperf.sh to finish (holds $CACHE/setup_aiperf.lock)"
  flock 9   # two concurrent setups would otherwise both rebuild the venv
fi
t0=$(date +%s)
if ! venv_ok; then
  say "installing $PIN into $VENV (first time only, usually ~1 min, 1.2 GB; log: $LOG)"
  if ! with_progress 15 1200 install_venv || ! venv_ok; then
    why=$(grep -E 'ERROR|Error' "$LOG" | tail -1 | cut -c1-200)
    finish "aiperf: unavailable: could not install $PIN (${why:-see $LOG})"
  fi
fi
t1=$(date +%s)
if ! ls "$HF"/hub/models--specmon--shakespeare-bpe/snapshots/*/tokenizer.json >/dev/null 2>&1; then
  say "building the offline tokenizer into $HF (first time only, usually ~10 s)"
  if ! HF_HUB_OFFLINE=1 "$VENV/bin/python" "$HERE/tests/peer/make_tokenizer.py" "$HF" \
      >>"$LOG" 2>&1; then
    finish "aiperf: unavailable: offline tokenizer build failed (see $LOG)"
  fi
fi
t2=$(date +%s)
finish "aiperf: ready venv=$VENV HF_HOME=$HF tokenizer=specmon/shakespeare-bpe (venv $((t1 - t0))s, tokenizer $((t2 - t1))s)"
