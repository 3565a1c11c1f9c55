#!/usr/bin/env bash
# GPU smoke test of the joined system (about 10 minutes on one GPU):
#   a short joined run on examples/circle_packing with the vLLM backend, a small open code
#   model, LoRA updates every 16 evaluations and adapter hot-swap; prints throughput
#   (tokens/s generated, evaluations/s, seconds per trainer step).
#
#   QDEVOLVE_GPU_MODEL=/path/to/hf/code-model bash benchmarks/gpu_smoke.sh
#
# The model directory must be local (no downloads on the GPU machine). The CPU test suite
# covers the same code paths with the transformers backend (tests/evolve/test_joined.py).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${QDEVOLVE_GPU_MODEL:-}"
if [ -z "$MODEL" ] || [ ! -f "$MODEL/config.json" ]; then
  echo "gpu_smoke: set QDEVOLVE_GPU_MODEL to a local Hugging Face model directory (got '${MODEL}')" >&2
  exit 2
fi
PY="${PYTHON:-.venv/bin/python}"
"$PY" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__, 'vllm', vllm.__version__, torch.cuda.get_device_name(0))"
OUT="${OUT:-/tmp}/qdevolve-gpu-smoke"
rm -rf "$OUT"; mkdir -p "$OUT"
start=$(date +%s)
timeout 600 "$PY" -m qdevolve run examples/circle_packing --config benchmarks/gpu_smoke.yaml \
  --policy "vllm:$MODEL" --db "$OUT/smoke.sqlite" --no-progress
end=$(date +%s)
"$PY" - "$OUT/smoke.sqlite" "$((end - start))" <<'PYEOF'
import json, sqlite3, sys
db, wall = sys.argv[1], float(sys.argv[2])
con = sqlite3.connect(db)
tokens = con.execute("SELECT COALESCE(SUM(completion_tokens), 0) FROM rollouts").fetchone()[0]
evals = con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
versions = con.execute("SELECT version, metrics FROM policy_versions ORDER BY version").fetchall()
step_s = [json.loads(m).get("step_seconds") for _, m in versions if json.loads(m).get("step_seconds")]
gen_s = con.execute("SELECT MAX(created_at) - MIN(created_at) FROM rollouts").fetchone()[0] or wall
print(f"wall {wall:.0f} s | tokens generated {tokens} ({tokens / max(gen_s, 1e-9):.0f} tokens/s over the run) | "
      f"evaluations {evals} ({evals / wall:.2f}/s) | policy versions {len(versions)} | "
      f"trainer step {sum(step_s) / max(len(step_s), 1):.1f} s")
PYEOF
