"""A 16-step LoRA run on the real SmolLM2-135M through the real trainer and checkpoint code:
every version is an adapter of the prepared base, all 17 together stay under 100 MB on disk
(a merged version alone is 517 MB), and the latest one loads over the base and switches in
place in the ``transformers`` backend, sampling what the trainer's model samples."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from qdevolve import registry  # noqa: E402
from qdevolve.backends.adapters import base_identity, read_meta  # noqa: E402
from qdevolve.backends.base import GenerationRequest  # noqa: E402
from qdevolve.backends.transformers_backend import TransformersBackend  # noqa: E402
from qdevolve.db.store import LineageStore  # noqa: E402
from qdevolve.rl import checkpoints  # noqa: E402
from qdevolve.rl.config import TrainerConfig  # noqa: E402
from qdevolve.rl.group import RolloutGroup  # noqa: E402
from qdevolve.rl.sampling import sample_group  # noqa: E402
from qdevolve.rl.trainer import PolicyTrainer  # noqa: E402

STEPS = 16  # the default rank (4): 4.9 MB an adapter (rank 8 is 9.8 MB and would not fit: docs/backends.md)


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@pytest.mark.slow
def test_a_16_step_lora_run_on_smollm2_keeps_all_its_versions_under_100_mb(smollm2_dir, tmp_path):
    torch.set_num_threads(1)
    store = LineageStore(tmp_path / "run.sqlite")
    loaded = checkpoints.load_model_dir(smollm2_dir)
    tok = checkpoints._tokenizer(smollm2_dir)
    trainer = PolicyTrainer(loaded, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(use_lora=True, learning_rate=2e-3,
                                          max_completion_length=6), store=store)
    assert trainer.base == base_identity(smollm2_dir)  # named by content, not copied
    trainer.save_version(metrics={"base": True})
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    for _ in range(STEPS):  # tiny groups, short completions: the CPU cost stays modest
        s = sample_group(trainer.model, tok, "def add(a, b):", 2, 6, generator=gen)
        trainer.step([RolloutGroup(rewards=np.array([1.0, 0.0]), token_ids=[x[1] for x in s],
                                   prompt="def add(a, b):")])
        trainer.save_version()
    seconds = time.perf_counter() - t0
    rows = store.policy_versions(trainer.run_id)
    root = checkpoints.checkpoint_root(store, trainer.run_id)
    total = dir_bytes(root)
    sizes = [dir_bytes(Path(r["path"])) for r in rows]
    print(f"\n{len(rows)} versions in {total / 1e6:.1f} MB (each {min(sizes) / 1e6:.2f} to {max(sizes) / 1e6:.2f} MB; "
          f"base {dir_bytes(Path(smollm2_dir)) / 1e6:.0f} MB); {STEPS} steps + saves in {seconds:.0f} s")
    assert len(rows) == STEPS + 1
    assert sorted(p.name for p in root.iterdir()) == sorted(f"v{i}" for i in range(STEPS + 1))  # no base copy
    assert all(read_meta(r["path"]).kind == "adapter" for r in rows)
    assert total < 100e6, f"{len(rows)} versions take {total / 1e6:.1f} MB"
    # the latest version loads over the prepared base and samples what the trainer's model samples
    req = GenerationRequest(prompt="def add(a, b):", temperature=0.0, max_tokens=4)
    own = TransformersBackend(trainer.model, tok, max_new_tokens=4).generate_sync([req])[0][0]
    del loaded
    backend = TransformersBackend(str(smollm2_dir), max_new_tokens=4)
    q = backend.model.model.layers[0].self_attn.q_proj.weight
    backend.load_policy(STEPS, rows[-1]["path"])
    c = backend.generate_sync([req])[0][0]
    assert c.token_ids == own.token_ids and np.allclose(c.logprobs, own.logprobs, atol=1e-4)
    backend.load_policy(0, rows[0]["path"])  # switched in place over the same base tensors
    assert backend.model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight is q
