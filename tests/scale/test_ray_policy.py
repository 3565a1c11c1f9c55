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

address, actor, until, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
b = RayPolicyBackend(actor=actor, address=address)  # joins the running actor: no model given
seen = []
while time.time() < until:
    out = asyncio.run(b.generate([GenerationRequest(prompt="a:", n=2, temperature=1.0, max_tokens=3)]))
    seen += [c.policy_version for c in out[0]]
    open(ready, "w").close()  # sampled at least once
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
    ready = tmp_path / "ready"
    other = subprocess.Popen([sys.executable, "-c", CONTROLLER, ray_address, actor_name, str(time.time() + 240),
                              str(ready)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 180
    while not ready.exists() and time.time() < deadline and other.poll() is None:
        time.sleep(0.2)  # the other controller samples version 0 first
    assert ready.exists(), other.stderr.read()[-3000:] if other.poll() is not None else "no sample in 180 s"
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


PLAIN = """\
run: {{iterations: 24, seed: 1, workers: 2, children_per_parent: 8}}
archive: {{type: map_elites, feature_dimensions: [length, multiplications], ranges: [[1, 10], [0, 4]], bins: [9, 4]}}
selection: {{type: uniform}}
limits: {{wall_s: 10}}
mutation:
  - {{type: policy, prompt_template: "0>1,1>4,2>7,3>10,5>16|{{parent}}|{{tests}}:",
     block_template: "EXPR = \\"{{completion}}\\"\\n", temperature: 1.0, max_tokens: 12}}
backend: {{type: ray_policy, actor: {actor}}}
"""
# The installed package finds ray_policy through its entry point; importing the module first
# registers it the same way in a checkout whose entry points predate it.
CLI = "import sys, qdevolve.backends.ray_policy; from qdevolve.cli import main; sys.argv[0] = 'qdevolve'; main()"


def _example(tmp_path: Path, name: str, config: str) -> Path:
    src, d = ROOT / "examples" / "expr_evolution", tmp_path / name
    d.mkdir()
    for f in ("initial_program.py", "evaluator.py"):
        (d / f).write_text((src / f).read_text())
    (d / "config.yaml").write_text(config)
    return d


def test_joined_run_on_ray_trains_the_actor_another_run_samples_from(ray_address: str, actor_name: str,
                                                                      tmp_path: Path) -> None:
    import sqlite3

    from qdevolve.backends.ray_policy import RayPolicyBackend

    cfg = (ROOT / "examples" / "expr_evolution" / "config.yaml").read_text().replace(
        "  every: 32\n", f"  every: 16\n  backend: {{placement: ray, actor: {actor_name}, num_cpus: 0}}\n")
    assert "placement: ray" in cfg, "the example's config no longer has the line this test replaces"
    joined, plain = _example(tmp_path, "joined", cfg), _example(tmp_path, "plain", PLAIN.format(actor=actor_name))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    common = ["--executor", "ray", "--ray-address", ray_address, "--workers", "2", "--no-progress"]
    trainer = subprocess.Popen([sys.executable, "-c", CLI, "run", str(joined), "--db", str(tmp_path / "j.sqlite"),
                                "--iterations", "32", *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT, env=env)  # Ray workers import from the driver's cwd
    deadline = time.time() + 300
    while time.time() < deadline and trainer.poll() is None:  # the joined run creates the actor
        try:
            RayPolicyBackend(actor=actor_name, address=ray_address, connect_timeout_s=5)
            break
        except Exception:
            time.sleep(1.0)
    sampler = subprocess.run([sys.executable, "-c", CLI, "run", str(plain), "--db", str(tmp_path / "p.sqlite"),
                              *common], capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    _out, err = trainer.communicate(timeout=900)
    assert trainer.returncode == 0, err[-3000:]
    assert sampler.returncode == 0, sampler.stderr[-3000:]
    con = sqlite3.connect(tmp_path / "j.sqlite")
    versions = [v for (v,) in con.execute("SELECT version FROM policy_versions ORDER BY version")]
    assert len(versions) >= 2, versions
    labels = {v for (v,) in con.execute("SELECT DISTINCT policy_version FROM rollouts")}
    assert 0 in labels and len(labels) >= 2, labels  # rollouts sampled before and after a trainer step
    # a child the parser refused (an empty completion) is stored 'invalid' without running anywhere
    unrun = {st for (st,) in con.execute("SELECT status FROM evaluations WHERE worker IS NULL")}
    assert unrun <= {"invalid"}, unrun
    workers = {w.split(":")[0] for (w,) in con.execute("SELECT worker FROM evaluations WHERE worker IS NOT NULL")}
    assert workers == {"ray"}, workers
    other = sqlite3.connect(tmp_path / "p.sqlite")
    seen = [v for (v,) in other.execute("SELECT policy_version FROM rollouts ORDER BY seq")]
    # every mutation of the second run was sampled by the actor, from a version the trainer saved
    assert len(seen) >= 24 and None not in seen and set(seen) <= set(versions), (seen, versions)
    served = RayPolicyBackend(actor=actor_name, address=ray_address).info()
    assert served["version"] == max(versions) and served["served"] >= 32 + len(seen), served
