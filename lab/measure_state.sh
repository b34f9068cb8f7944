#!/usr/bin/env bash
# Measure a world model on the rows the state-keeping runs are compared by (lab/runs/st*.md):
#   lab/measure_state.sh NAME [ADAPTER.gguf] [ROWS]
# NAME: the output folder under $OUT (default lab-out/); ADAPTER: a LoRA (none: the bundled
# default with its own profile); ROWS: a comma list of state, templates, fixed, os, everyday
# (default: all). MODEL (default qwen2.5-coder-0.5b) and THREADS (default 1) from the
# environment. One position a step (--speculative off), as every st row was measured.
# Resumable: closed-loop runs resume by episode; a finished row is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

name=${1:?usage: lab/measure_state.sh NAME [ADAPTER.gguf] [ROWS]}
adapter=${2:-}
rows=${3:-state,templates,fixed,os,everyday}
out=${OUT:-lab-out}/$name
model=${MODEL:-qwen2.5-coder-0.5b}
common=(--model "$model" --threads "${THREADS:-1}" --speculative off --quiet)
[ -n "$adapter" ] && common+=(--lora "$adapter")
mkdir -p "$out"

closed_loop() {  # ROW RECORDS EPISODES [extra args]
  local row=$1 records=$2 limit=$3
  shift 3
  [ -s "$out/$row.score.txt" ] && return
  aw-mcp eval closed-loop --records "$records" --output-dir "$out/$row" --limit "$limit" \
    "${common[@]}" "$@"
  aw-mcp eval score --predictions "$out/$row/predictions.jsonl" >"$out/$row.score.txt"
}

everyday() {  # SESSION
  local session=$1
  [ -s "$out/$session.score.txt" ] && return
  aw-mcp eval everyday --session "$session" --output-dir "$out/$session" "${common[@]}" \
    >"$out/$session.log" 2>&1 || true
  aw-mcp eval score --predictions "$out/$session/predictions.jsonl" >"$out/$session.score.txt"
}

for row in ${rows//,/ }; do
  case $row in
    state) closed_loop state data/terminal/state/heldout 8 ;;
    templates) closed_loop templates data/terminal/state/templates-heldout 12 ;;
    fixed) closed_loop fixed data/terminal/heldout 16 ;;
    os) closed_loop os data/os-heldout 6 --simulator os ;;
    everyday) for session in everyday first-look keeps-state; do everyday "$session"; done ;;
    *) echo "unknown row: $row" >&2 && exit 2 ;;
  esac
done
# Each row's overall line (exact / similarity / exit code, model / empty / previous).
grep -H -m1 "^| (all)" "$out"/*.score.txt || true
