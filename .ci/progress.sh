# shellcheck shell=bash
# Sourced by the peer set-ups. with_progress EVERY TOTAL_MB CMD...: runs CMD with its output in
# $LOG, saying on stderr (the caller's `say`) every EVERY seconds how far $VENV is against the
# TOTAL_MB it reaches, so a slow first install is visibly alive. Returns CMD's status.
with_progress() {
  local every=$1 total=$2
  shift 2
  "$@" >"$LOG" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % every)) -eq 0 ]; then
      say "still installing after ${waited} s: venv $(du -sm "$VENV" 2>/dev/null | cut -f1) MB of ~${total} MB"
    fi
  done
  wait "$pid"
}
