"""The generation backend on the Ray cluster: one policy actor shared by two controllers,
updated by a real trainer step (weights through the object store); a joined run with
``train.backend.placement: ray`` samples every mutation from the actor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="the policy actor needs the 'rl' extra (torch, transformers)")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

CONTROLLER = """
import asyncio, json, sys, time
from qdevolve.backends.base import GenerationRequest
from qdevolve.backends.ray_policy import RayPolicyBackend

address, actor, until = sys.argv[1], sys.argv[2], float(sys.argv[3])
b = RayPolicyBackend(actor=actor, address=address)  # joins the running actor: no model given
seen = []
while time.time() < until:
    out = asyncio.run(b.generate([GenerationRequest(prompt="a:", n=2, temperature=1.0, max_tokens=3)]))
    seen += [c.policy_version for c in out[0]]
    if seen[-1] == 1:
        break
    time.sleep(0.2)
print(json.dumps(seen))
"""


@pytest.fixture()
def actor_name(ray_address: str):  # noqa: ANN201
    import ray

    from qdevolve.backends.ray_policy import stop_policy_actor

    name = f"test-policy-{uuid.uuid4().hex[:8]}"
    if not ray.is_initialized():
        ray.init(address=ray_address, log_to_driver=False)
    yield name
    stop_policy_actor(name)


def _greedy(backend, prompt: str = "a:"):  # noqa: ANN001, ANN202
    import asyncio

    from qdevolve.backends.base import GenerationRequest

    return asyncio.run(backend.generate([GenerationRequest(prompt=prompt, n=1, temperature=0.0, max_tokens=3)]))[0][0]


def test_two_controllers_share_one_actor_and_see_the_trained_version(ray_address: str, actor_name: str,
                                                                     tmp_path: Path) -> None:
    import torch

    from qdevolve import registry
    from qdevolve.backends.ray_policy import RayPolicyBackend
    from qdevolve.backends.transformers_backend import TransformersBackend
    from qdevolve.db.store import LineageStore
    from qdevolve.rl import RolloutGroup
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.tiny import build_model, build_tokenizer
    from qdevolve.rl.trainer import PolicyTrainer

    torch.manual_seed(0)
    tok = build_tokenizer("0123456789:ab")
    model = build_model(tok, n_embd=32, n_layer=2, n_head=2, n_positions=32, seed=0)
    store = LineageStore(tmp_path / "t.sqlite", create=True)
    trainer = PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(learning_rate=3e-2, max_completion_length=3), store=store)
    assert trainer.save_version() == 0
    v0 = store.policy_versions(trainer.run_id)[0]["path"]
    mine = RayPolicyBackend(actor=actor_name, model=v0, version=0, address=ray_address, num_cpus=0)
    before = _greedy(mine)
    assert before.policy_version == 0 and before.token_ids
    other = subprocess.Popen([sys.executable, "-c", CONTROLLER, ray_address, actor_name, str(time.time() + 120)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(8.0)  # the other controller samples version 0 meanwhile
    ids = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in ("12", "7", "12", "7")]
    trainer.step([RolloutGroup(rewards=[1.0, 0.0, 1.0, 0.0], token_ids=ids, prompt="a:",
                               outcome_keys=["12", "7", "12", "7"])])
    assert trainer.save_version() == 1
    mine.load_policy(1, store.policy_versions(trainer.run_id)[1]["path"])  # through the object store
    after = _greedy(mine)
    assert after.policy_version == 1 and mine.info()["version"] == 1
    local = TransformersBackend(trainer.model, tok)  # the trained weights, sampled in this process
    same = _greedy(local)
    assert same.token_ids == after.token_ids  # the actor serves the trained weights
    assert np.allclose(same.logprobs, after.logprobs, atol=1e-4), (same.logprobs, after.logprobs)
    assert after.logprobs != before.logprobs or after.token_ids != before.token_ids
    out, err = other.communicate(timeout=180)
    assert other.returncode == 0, err[-3000:]
    seen = json.loads(out)
    assert seen[0] == 0 and seen[-1] == 1, seen  # the other controller crossed to the new version
    assert seen == sorted(seen), seen  # never back to an older version
    assert mine.push_weights(0, trainer.model.state_dict()) == 1  # a stale push never rolls back
    store.close()


def test_joined_run_on_ray_samples_from_the_policy_actor(ray_address: str, actor_name: str, tmp_path: Path) -> None:
    import sqlite3

    from qdevolve.backends.ray_policy import RayPolicyBackend

    example = ROOT / "examples" / "expr_evolution"
    d = tmp_path / "expr"
    d.mkdir()
    for f in ("initial_program.py", "evaluator.py"):
        (d / f).write_text((example / f).read_text())
    cfg = (example / "config.yaml").read_text().replace(
        "  every: 64\n", f"  every: 16\n  backend: {{placement: ray, actor: {actor_name}, num_cpus: 0}}\n")
    (d / "config.yaml").write_text(cfg)
    db = tmp_path / "j.sqlite"
    r = subprocess.run([sys.executable, "-m", "qdevolve", "run", str(d), "--db", str(db), "--iterations", "32",
                        "--executor", "ray", "--ray-address", ray_address, "--workers", "2", "--no-progress"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,  # Ray workers import from the driver's cwd
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    con = sqlite3.connect(db)
    versions = [v for (v,) in con.execute("SELECT version FROM policy_versions ORDER BY version")]
    assert len(versions) >= 2, versions
    labels = {v for (v,) in con.execute("SELECT DISTINCT policy_version FROM rollouts")}
    assert 0 in labels and len(labels) >= 2, labels  # rollouts sampled before and after a trainer step
    workers = {w.split(":")[0] for (w,) in con.execute("SELECT worker FROM evaluations")}
    assert workers == {"ray"}, workers
    served = RayPolicyBackend(actor=actor_name, address=ray_address).info()
    assert served["version"] == max(versions) and served["served"] >= 32, served
