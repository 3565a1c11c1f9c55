#!/usr/bin/env bash
# GPU smoke test. Stage 1 (always; at most 8 minutes; needs torch, transformers, peft and a
# CUDA device, but no vLLM, no weights, no network): benchmarks/gpu_smoke.py builds
# random-weight models of SmolLM2-135M's and a 1.5 B Qwen2 config and runs qdevolve's own
# code on CUDA: transformers-backend sampling (tokens/s), a LoRA trainer step, adapter
# versions saved and switched in place; it prints a table and exits non-zero on any failed
# check. Extra arguments go to it (`--device cpu --small` runs the same code on a CPU; a slow
# test does that: tests/backends/test_gpu_smoke_cpu.py).
#
#   bash benchmarks/gpu_smoke.sh [gpu_smoke.py arguments]
#
# Stage 2 (only with QDEVOLVE_GPU_MODEL=/path/to/hf/code-model, and then vllm must import): a
# short joined run on examples/circle_packing with the vLLM backend, LoRA updates every 16
# evaluations and adapter hot-swap; prints tokens/s, evaluations/s and seconds per trainer
# step. The model directory must be local (no downloads on the GPU machine).
#
# Stage 3 (skipped with QDEVOLVE_GPU_SKIP_RAY=1, or when ray is not installed): the same
# joined run with the generation backend on a Ray cluster: a one-node cluster started here
# (`ray start --head --num-gpus 1`), evaluations on Ray workers (--executor ray) and vLLM
# served by a named policy actor holding the GPU (train.backend.placement: ray, num_gpus: 1);
# each trainer step makes the actor load the new version, and the stage checks that rollouts
# of at least two versions were sampled from it (tests/scale/test_ray_policy.py on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
timeout 480 "$PY" benchmarks/gpu_smoke.py "$@"
MODEL="${QDEVOLVE_GPU_MODEL:-}"
if [ -z "$MODEL" ]; then
  echo "gpu_smoke: vLLM stages not requested (set QDEVOLVE_GPU_MODEL to a local Hugging Face model directory)"
  exit 0
fi
if [ ! -f "$MODEL/config.json" ]; then
  echo "gpu_smoke: QDEVOLVE_GPU_MODEL='${MODEL}' is not a Hugging Face model directory" >&2
  exit 2
fi
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

if [ "${QDEVOLVE_GPU_SKIP_RAY:-0}" = "1" ] || ! "$PY" -c "import ray" 2>/dev/null; then
  echo "gpu_smoke: Ray stage skipped (QDEVOLVE_GPU_SKIP_RAY=1 or ray not installed)"
  exit 0
fi
RAY_PORT="${QDEVOLVE_GPU_RAY_PORT:-6399}"
RAY="$(dirname "$PY")/ray"
"$RAY" start --head --port "$RAY_PORT" --num-gpus 1 --num-cpus 8 --disable-usage-stats >/dev/null
trap '"$RAY" stop --force >/dev/null 2>&1 || true' EXIT
cat > "$OUT/ray.yaml" <<YAMLEOF
$(sed 's/^  every: 16$/  every: 16\n  backend: {placement: ray, actor: gpu-smoke-policy, num_cpus: 1, num_gpus: 1}/' benchmarks/gpu_smoke.yaml)
YAMLEOF
grep -q "placement: ray" "$OUT/ray.yaml" || { echo "gpu_smoke: could not add train.backend to the Ray config" >&2; exit 1; }
start=$(date +%s)
timeout 900 "$PY" -m qdevolve run examples/circle_packing --config "$OUT/ray.yaml" \
  --policy "vllm:$MODEL" --db "$OUT/ray.sqlite" --executor ray --ray-address "127.0.0.1:$RAY_PORT" \
  --workers 4 --no-progress
end=$(date +%s)
"$PY" - "$OUT/ray.sqlite" "$((end - start))" "127.0.0.1:$RAY_PORT" <<'PYEOF'
import sqlite3, sys
db, wall, address = sys.argv[1], float(sys.argv[2]), sys.argv[3]
con = sqlite3.connect(db)
labels = sorted(v for (v,) in con.execute("SELECT DISTINCT policy_version FROM rollouts") if v is not None)
versions = [v for (v,) in con.execute("SELECT version FROM policy_versions ORDER BY version")]
workers = {w.split(":")[0] for (w,) in con.execute("SELECT worker FROM evaluations") if w}
tokens = con.execute("SELECT COALESCE(SUM(completion_tokens), 0) FROM rollouts").fetchone()[0]
from qdevolve.backends.ray_policy import RayPolicyBackend, stop_policy_actor
info = RayPolicyBackend(actor="gpu-smoke-policy", address=address).info()
stop_policy_actor("gpu-smoke-policy")
print(f"ray stage: wall {wall:.0f} s | tokens {tokens} ({tokens / max(wall, 1e-9):.0f}/s) | versions {versions} | "
      f"rollout versions {labels} | actor serves v{info['version']} on {info['host']} | evaluation workers {workers}")
assert len(labels) >= 2, f"rollouts came from one policy version only: {labels}"
assert info["version"] == max(versions), (info, versions)
assert workers == {"ray"}, workers
PYEOF
