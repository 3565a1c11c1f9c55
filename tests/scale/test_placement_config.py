"""Fast checks of the scale-out settings: the policy actor's options and where weights go."""

from __future__ import annotations

from pathlib import Path

import pytest

from qdevolve.db.store import LineageStore
from qdevolve.errors import ConfigError


def test_ray_policy_refuses_an_unknown_inner_backend_or_transfer() -> None:
    from qdevolve.backends.ray_policy import RayPolicyBackend

    with pytest.raises(ConfigError, match="inner must be 'transformers' or 'vllm'"):
        RayPolicyBackend(actor="x", inner="openai")
    with pytest.raises(ConfigError, match="transfer must be 'weights' or 'path'"):
        RayPolicyBackend(actor="x", transfer="nfs")


def test_read_state_dict_round_trips_a_saved_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from qdevolve.backends.ray_policy import read_state_dict
    from qdevolve.rl.tiny import build_model, build_tokenizer

    model = build_model(build_tokenizer("0123456789:"), n_embd=16, n_layer=1, n_head=2, n_positions=16, seed=0)
    model.save_pretrained(tmp_path / "v0")
    state = read_state_dict(tmp_path / "v0")
    own = model.state_dict()
    assert state and all(torch.equal(own[k], v) for k, v in state.items())
    with pytest.raises(ConfigError, match="not a policy version"):
        read_state_dict(tmp_path)  # neither a model's config.json nor an adapter's
    bare = tmp_path / "config-only"
    bare.mkdir()
    (bare / "config.json").write_text((tmp_path / "v0" / "config.json").read_text())
    with pytest.raises(ConfigError, match="holds no weights"):
        read_state_dict(bare)


def test_checkpoint_root_follows_train_checkpoint_dir_then_the_database_file(tmp_path: Path) -> None:
    from qdevolve.rl.checkpoints import checkpoint_root, policy_dir

    st = LineageStore(tmp_path / "r.sqlite", create=True)
    plain = st.create_run(name="plain", config={})
    configured = st.create_run(name="c", config={"train": {"checkpoint_dir": str(tmp_path / "ck")}})
    assert policy_dir(st, plain, 3) == tmp_path / "r.policies" / plain / "v3"
    assert checkpoint_root(st, configured) == tmp_path / "ck" / configured
    st.close()
