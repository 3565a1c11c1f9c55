"""A ``trainer_state.pt`` named by a database is plain data: a pickle that would run code on
load is refused and never executed; honest checkpoints still resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from qdevolve import registry
from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError, DatabaseError
from qdevolve.rl.checkpoints import load_trainer_state, plain_state
from qdevolve.rl.config import TrainerConfig
from qdevolve.rl.tiny import build_model, build_tokenizer
from qdevolve.rl.trainer import PolicyTrainer


class _Payload:
    """Unpickling this calls ``exec`` on code that writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: D105
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def _trainer(store: LineageStore) -> PolicyTrainer:
    torch.manual_seed(0)
    tok = build_tokenizer("0123456789:ab")
    model = build_model(tok, n_embd=16, n_layer=1, n_head=2, n_positions=16, seed=0)
    return PolicyTrainer(model, tok, registry.objective.create({"type": "grpo"}),
                         TrainerConfig(learning_rate=1e-3, beta=0.05), store=store)


@pytest.mark.slow
def test_malicious_trainer_state_is_refused_and_never_runs(tmp_db: Path, tmp_path: Path) -> None:
    store = LineageStore(tmp_db)
    trainer = _trainer(store)
    assert trainer.save_version() == 0
    state_file = Path(store.policy_versions(trainer.run_id)[-1]["path"]) / "trainer_state.pt"
    assert state_file.is_file()

    # The payload really runs under an unrestricted load (our own payload, a marker in tmp_path):
    # the test fails if the loader stops refusing it.
    control = tmp_path / "control-marker"
    bait = tmp_path / "bait.pt"
    torch.save({"global_step": 0, "x": _Payload(control)}, bait)
    torch.load(bait, weights_only=False)
    assert control.read_text() == "pwned"

    marker = tmp_path / "marker"
    torch.save({"global_step": 0, "version": 0, "optimizer": _Payload(marker)}, state_file)
    with pytest.raises(DatabaseError, match=r"trainer_state\.pt: refused .*weights_only=True"):
        PolicyTrainer.from_store(store, trainer.run_id, registry.objective.create({"type": "grpo"}),
                                 TrainerConfig(learning_rate=1e-3, beta=0.05))
    with pytest.raises(DatabaseError, match="refused"):
        load_trainer_state(state_file)
    assert not marker.exists()


def test_honest_checkpoint_resumes_with_generator_and_optimizer(tmp_db: Path) -> None:
    store = LineageStore(tmp_db)
    trainer = _trainer(store)
    trainer.save_version()
    trainer.generator.manual_seed(1234)
    state_before = trainer.generator.get_state().clone()
    assert trainer.save_version() == 1
    resumed = PolicyTrainer.from_store(store, trainer.run_id, registry.objective.create({"type": "grpo"}),
                                       TrainerConfig(learning_rate=1e-3, beta=0.05))
    assert resumed.version == 1
    assert torch.equal(resumed.generator.get_state(), state_before)
    assert resumed.optimizer.state_dict()["param_groups"][0]["lr"] == pytest.approx(1e-3)


def test_a_state_that_could_not_be_resumed_safely_is_never_written() -> None:
    assert plain_state({"a": [1, 2.0, "x", None, torch.zeros(2)], "b": (True,)})["b"] == (True,)
    with pytest.raises(ConfigError, match=r"trainer_state\['opt'\]\[1\] is a set"):
        plain_state({"opt": [1, {2}]})


def test_every_torch_load_in_the_package_is_weights_only() -> None:
    """Every ``torch.load`` in qdevolve passes ``weights_only=True`` (the files it reads are named
    by databases, run directories or Ray objects: any of them can be an adversary's)."""
    import ast

    root = Path(__file__).resolve().parents[2] / "qdevolve"
    sites = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"):
                kw = {k.arg: k.value for k in node.keywords}
                ok = isinstance(kw.get("weights_only"), ast.Constant) and kw["weights_only"].value is True
                sites.append((f"{path.relative_to(root)}:{node.lineno}", ok))
    assert sites, "no torch.load found: the scan is broken"
    assert all(ok for _, ok in sites), [s for s, ok in sites if not ok]
