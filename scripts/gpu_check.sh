#!/usr/bin/env bash
# GPU check (issue 6): HF (and vLLM, if installed) generation tokens/s, and step time, peak memory and MFU of a GSPO
# and a HACPO step with 2 agents on one GPU; an FSDP2 step (W = 1, NCCL) with CPU offload off and on, its peak memory
# next to the resource planner's prediction. Needs one CUDA GPU and only torch + transformers (+ tokenizers,
# safetensors, which transformers brings; peft for the LoRA row): no internet, no download, no `pip install`.
# Budget: at most 8 minutes (GPU_CHECK_TIMEOUT seconds, default 480); an H200 takes about 1-2.
# Prints one table and writes JSON to --out (default $OUT/gpu_check.json, else benchmarks/results/gpu_check.json).
#
#   scripts/gpu_check.sh                 # the GPU run
#   scripts/gpu_check.sh --smoke         # tiny sizes on CPU, seconds
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
exec timeout --signal=INT --kill-after=20 "${GPU_CHECK_TIMEOUT:-480}" "$PYTHON" -m benchmarks.gpu_check "$@"
