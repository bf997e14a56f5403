#!/usr/bin/env bash
# GPU check (issues 6, 25): HF generation tokens/s (bf16 weights; dynamic, then static compiled cache), step time, MFU and
# peak memory of a GSPO and a HACPO step (2 agents on one GPU) next to the planner's peak, an FSDP2 step (W = 1, NCCL)
# with CPU offload off and on next to the planner, and our GSPO step next to TRL's GRPOTrainer in GSPO mode.
# Needs one CUDA GPU and torch + transformers (+ tokenizers, safetensors); the trl row also trl and datasets, carried as
# wheels (docs/gpu.md), else it prints one line saying it was skipped. No internet, no download.
# Every row runs in its own process with a time budget (benchmarks/gpu_check.py: BUDGET_S, 180 s in all) and appends
# each measurement, as it is taken, to $OUT/gpu_check.jsonl (else benchmarks/results/gpu_check.jsonl) and to stdout;
# a kill at any moment keeps every line already written. A summary table against the targets comes last.
#
#   benchmarks/gpu_check.sh                       # every row: gen,gspo,hacpo,fsdp,trl
#   benchmarks/gpu_check.sh --rows gspo,trl       # some rows
#   benchmarks/gpu_check.sh --rows share          # two agents sharing the GPU: wake/sleep s, bytes left, planner
#   benchmarks/gpu_check.sh --smoke               # tiny sizes on CPU
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false
export TRL_EXPERIMENTAL_SILENCE=1 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
exec timeout --signal=TERM --kill-after=10 "${GPU_CHECK_TIMEOUT:-225}" "$PYTHON" -m benchmarks.gpu_check "$@"
