"""Policy versions of a LoRA run are adapter directories naming their base by content hash:
saved and loaded through the real trainer and checkpoint code (tiny random Llama and GPT-2),
resumed with their optimiser state, refused over a different base, exported merged by
``qdevolve policy export`` (a real subprocess), and read as data, never as instructions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    ByT5Tokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)

from qdevolve import registry  # noqa: E402
from qdevolve.backends.adapters import (  # noqa: E402
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    VERSION_FILE,
    attach_adapter,
    base_identity,
    read_meta,
)
from qdevolve.db.store import LineageStore  # noqa: E402
from qdevolve.errors import ConfigError  # noqa: E402
from qdevolve.rl import checkpoints  # noqa: E402
from qdevolve.rl.config import TrainerConfig  # noqa: E402
from qdevolve.rl.group import RolloutGroup  # noqa: E402
from qdevolve.rl.sampling import sample_group  # noqa: E402
from qdevolve.rl.trainer import PolicyTrainer  # noqa: E402

IDS = torch.tensor([[5, 9, 17, 33, 65, 101]])


def llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=384, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        bos_token_id=1, eos_token_id=1, pad_token_id=0))


def save_base(path: Path, seed: int = 0) -> Path:
    llama(seed).save_pretrained(path)
    ByT5Tokenizer().save_pretrained(path)
    return path


def logits(model) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(input_ids=IDS).logits


def grpo():
    return registry.objective.create({"type": "grpo"})


def train(trainer: PolicyTrainer, steps: int) -> None:
    """``steps`` updates on sampled completions with a fixed reward spread (so the adapter moves)."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        s = sample_group(trainer.model, trainer.tokenizer, "hello", 2, 4, generator=gen)
        trainer.step([RolloutGroup(rewards=np.array([1.0, 0.0]), token_ids=[x[1] for x in s], prompt="hello")])
        trainer.save_version()


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _lora_run(tmp: Path, steps: int = 3):
    base = save_base(tmp / "base")
    store = LineageStore(tmp / "run.sqlite")
    trainer = PolicyTrainer(AutoModelForCausalLM.from_pretrained(base), ByT5Tokenizer(), grpo(),
                            TrainerConfig(use_lora=True, lora_r=2, learning_rate=5e-2), store=store)
    trainer.save_version()
    train(trainer, steps)
    return store, trainer, base


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """A LoRA run of 3 steps over a base loaded from a directory: (store, trainer, base dir).
    Shared by the tests that only read it."""
    return _lora_run(tmp_path_factory.mktemp("lora-run"))


def test_lora_versions_are_adapter_directories_naming_their_base(lora_run):
    store, trainer, base = lora_run
    rows = store.policy_versions(trainer.run_id)
    assert [r["version"] for r in rows] == [0, 1, 2, 3]
    ident = base_identity(base)
    for r in rows:
        p = Path(r["path"])
        assert {ADAPTER_CONFIG, ADAPTER_WEIGHTS, VERSION_FILE} <= {f.name for f in p.iterdir()}
        assert not (p / "model.safetensors").exists() and not (p / "config.json").exists()  # no base copy
        meta = read_meta(p)
        assert meta.kind == "adapter" and meta.version == r["version"] and meta.run_id == trainer.run_id
        assert meta.base == ident
        assert dir_bytes(p) < dir_bytes(base) / 3  # the adapter, not the model
    # resume needs only the latest trainer state: earlier ones are dropped once a newer row exists
    assert [(Path(r["path"]) / "trainer_state.pt").is_file() for r in rows] == [False, False, False, True]
    assert store.get_state(trainer.run_id, "trainer")["base"]["sha256"] == ident.sha256
    # the versions differ: training moved the adapter
    tensors = [Path(r["path"], ADAPTER_WEIGHTS).read_bytes() for r in rows]
    assert len(set(tensors)) == 4


def test_load_version_and_resume_reproduce_the_trained_policy(lora_run):
    store, trainer, base = lora_run
    expected = logits(trainer.model)
    loaded = checkpoints.load_version(store, trainer.run_id)
    assert loaded.kind == "adapter" and loaded.base == base_identity(base)
    assert torch.allclose(logits(loaded.model), expected, atol=1e-6)
    v0 = checkpoints.load_version(store, trainer.run_id, 0)
    assert torch.allclose(logits(v0.model), logits(AutoModelForCausalLM.from_pretrained(base)), atol=1e-6)
    assert not torch.allclose(logits(v0.model), expected, atol=1e-4)
    # resume: the same adapter keeps training, with its optimiser moments (they line up)
    resumed = PolicyTrainer.from_store(store, trainer.run_id, grpo(), TrainerConfig(learning_rate=5e-2))
    assert resumed.config.use_lora and resumed.version == 3 and resumed.base == trainer.base
    assert torch.allclose(logits(resumed.model), expected, atol=1e-6)
    a = resumed.optimizer.state_dict()["state"]
    b = trainer.optimizer.state_dict()["state"]
    assert a.keys() == b.keys() and all(torch.equal(a[k]["exp_avg"], b[k]["exp_avg"]) for k in a)
    gen = torch.Generator().manual_seed(1)
    s = sample_group(resumed.model, resumed.tokenizer, "hello", 2, 4, generator=gen)
    resumed.step([RolloutGroup(rewards=np.array([1.0, 0.0]), token_ids=[x[1] for x in s], prompt="hello")])
    assert not torch.allclose(logits(resumed.model), expected, atol=1e-6)


def test_a_version_never_loads_over_another_base(tmp_path):
    store, trainer, base = _lora_run(tmp_path / "run", steps=1)
    moved = Path(shutil.copytree(base, tmp_path / "moved"))
    before = base_identity(base)
    other = save_base(tmp_path / "other", seed=1)
    with pytest.raises(ConfigError) as info:
        checkpoints.load_version(store, trainer.run_id, 1, base=other)
    msg = str(info.value)
    after = base_identity(other)
    assert trainer.run_id[:12] in msg and "policy version 1" in msg
    assert before.sha256[:16] in msg and after.sha256[:16] in msg
    # the recorded directory re-prepared with other weights: refused too
    llama(seed=2).save_pretrained(base)
    with pytest.raises(ConfigError, match=r"policy version 1 .* was trained on base .*but the base here is"):
        checkpoints.load_version(store, trainer.run_id)
    # the base moved: the error says where it was and how to name the new place, which is then checked
    shutil.rmtree(base)
    with pytest.raises(ConfigError, match="that directory is gone; pass the base's new directory"):
        checkpoints.load_version(store, trainer.run_id)
    assert torch.allclose(logits(checkpoints.load_version(store, trainer.run_id, base=moved).model),
                          logits(trainer.model), atol=1e-6)
    r = _export(trainer.run_id, "--out", str(tmp_path / "out"), "--base", str(moved), "--db", str(store.path))
    assert r.exit_code == 0, r.output
    assert torch.allclose(logits(AutoModelForCausalLM.from_pretrained(tmp_path / "out")), logits(trainer.model),
                          atol=1e-5)


def test_a_base_built_in_memory_is_saved_once_beside_the_versions(tmp_path):
    store = LineageStore(tmp_path / "run.sqlite")
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=384, n_layer=1, n_embd=32, n_head=2, n_positions=64,
                                      bos_token_id=1, eos_token_id=1))
    trainer = PolicyTrainer(gpt2, ByT5Tokenizer(), grpo(), TrainerConfig(use_lora=True, lora_r=2, learning_rate=5e-2),
                            store=store)
    assert trainer.base is None  # no directory holds it
    trainer.save_version()
    train(trainer, 2)
    root = checkpoints.checkpoint_root(store, trainer.run_id)
    assert sorted(p.name for p in root.iterdir()) == ["base", "v0", "v1", "v2"]
    metas = [read_meta(r["path"]) for r in store.policy_versions(trainer.run_id)]
    assert {m.base.path for m in metas} == {str(root / "base")}
    assert json.loads((Path(store.policy_versions(trainer.run_id)[0]["path"]) / ADAPTER_CONFIG).read_text())[
        "fan_in_fan_out"] is True  # GPT-2's Conv1D layout
    loaded = checkpoints.load_version(store, trainer.run_id)
    assert torch.allclose(logits(loaded.model), logits(trainer.model), atol=1e-6)


def test_full_fine_tuning_versions_stay_full_directories(tmp_path):
    base = save_base(tmp_path / "base")
    store = LineageStore(tmp_path / "run.sqlite")
    trainer = PolicyTrainer(AutoModelForCausalLM.from_pretrained(base), ByT5Tokenizer(), grpo(),
                            TrainerConfig(learning_rate=1e-2), store=store)
    trainer.save_version()
    train(trainer, 1)
    for r in store.policy_versions(trainer.run_id):
        p = Path(r["path"])
        assert (p / "model.safetensors").is_file() and not (p / ADAPTER_CONFIG).exists()
        assert read_meta(p).kind == "full" and (p / "trainer_state.pt").is_file()  # every version keeps it
    loaded = checkpoints.load_version(store, trainer.run_id)
    assert loaded.kind == "full" and torch.allclose(logits(loaded.model), logits(trainer.model), atol=1e-6)


def _export(*args: str):
    from click.testing import CliRunner

    from qdevolve.cli import cli

    return CliRunner().invoke(cli, ["policy", "export", *args])


def test_policy_export_writes_a_merged_plain_directory(lora_run, tmp_path):
    store, trainer, base = lora_run
    db = str(store.path)
    r = _export(trainer.run_id[:8], "--version", "2", "--out", str(tmp_path / "v2"), "--db", db)
    assert r.exit_code == 0, r.output
    assert "policy version 2" in r.output and str(tmp_path / "v2") in r.output
    out = tmp_path / "v2"
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert not (out / ADAPTER_CONFIG).exists()  # plain: loads without PEFT
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert type(merged).__name__ == "LlamaForCausalLM"
    v2 = checkpoints.load_version(store, trainer.run_id, 2)
    assert torch.allclose(logits(merged), logits(v2.model), atol=1e-5)
    assert not torch.allclose(logits(merged), logits(AutoModelForCausalLM.from_pretrained(base)), atol=1e-4)
    again = _export(trainer.run_id, "--out", str(out), "--db", db)
    assert again.exit_code != 0 and "not an empty directory" in str(again.exception)


@pytest.mark.slow
def test_policy_export_from_the_shell(lora_run, tmp_path):
    """The installed command line, as a user types it (a real subprocess; the latest version)."""
    store, trainer, base = lora_run
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "qdevolve", "policy", "export", trainer.run_id, "--out",
                        str(tmp_path / "latest"), "--db", str(store.path)], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "policy version 3" in r.stdout
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "latest")
    assert torch.allclose(logits(merged), logits(trainer.model), atol=1e-5)


# -- adapter_config.json is data ------------------------------------------------------------------
def _copy_version(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


@pytest.mark.parametrize("change, error", [
    ({"layers_to_transform": [0]}, "field 'layers_to_transform'"),
    ({"megatron_config": {"x": 1}, "megatron_core": "subprocess"}, "field 'megatron_c"),
    ({"modules_to_save": ["lm_head"]}, "field 'modules_to_save'"),
    ({"target_modules": ".*proj"}, "no regular expressions"),
    ({"target_modules": ["q_proj", "c_attn"]}, "c_attn are not projection layers"),
    ({"fan_in_fan_out": True}, "fan_in_fan_out=True"),
    ({"peft_type": "PROMPT_TUNING"}, "not a LoRA adapter config"),
    ({"r": 10 ** 6}, "r must be an integer"),
    ({"use_dora": True}, "field 'use_dora'"),
])
def test_a_crafted_adapter_config_is_refused_and_leaves_the_model_unchanged(lora_run, tmp_path, change, error):
    store, trainer, base = lora_run
    bad = _copy_version(Path(store.policy_versions(trainer.run_id)[1]["path"]), tmp_path / "bad")
    cfg = json.loads((bad / ADAPTER_CONFIG).read_text())
    (bad / ADAPTER_CONFIG).write_text(json.dumps({**cfg, **change}))
    model = AutoModelForCausalLM.from_pretrained(base)
    expected = logits(model)
    with pytest.raises(ConfigError, match=error):
        attach_adapter(model, bad, name="v1")
    assert not hasattr(model, "peft_config") and torch.equal(logits(model), expected)


def test_weights_are_safetensors_with_the_adapter_s_names_and_shapes(lora_run, tmp_path):
    store, trainer, base = lora_run
    src = Path(store.policy_versions(trainer.run_id)[1]["path"])
    pickled = _copy_version(src, tmp_path / "pickled")
    (pickled / ADAPTER_WEIGHTS).unlink()
    (pickled / "adapter_model.bin").write_bytes(b"not loaded")
    model = AutoModelForCausalLM.from_pretrained(base)
    expected = logits(model)
    with pytest.raises(ConfigError, match="safetensors only"):
        attach_adapter(model, pickled, name="v1")
    wide = _copy_version(src, tmp_path / "wide")
    cfg = json.loads((wide / ADAPTER_CONFIG).read_text())
    (wide / ADAPTER_CONFIG).write_text(json.dumps({**cfg, "r": 4}))  # the file's tensors have rank 2
    with pytest.raises(ConfigError, match="has shape"):
        attach_adapter(model, wide, name="v1")
    narrow = _copy_version(src, tmp_path / "narrow")
    (narrow / ADAPTER_CONFIG).write_text(json.dumps({**cfg, "target_modules": ["q_proj"]}))
    with pytest.raises(ConfigError, match="unexpected"):
        attach_adapter(model, narrow, name="v1")
    assert not hasattr(model, "peft_config") and torch.equal(logits(model), expected)


def test_export_over_a_base_converted_from_gguf(tmp_path):
    """A prepared known model's config.json keeps its GGUF quantization marker over plain float
    weights; transformers refuses to save a model loaded from it, so export rebuilds it plain."""
    base = save_base(tmp_path / "base")
    cfg = json.loads((base / "config.json").read_text())
    cfg["quantization_config"] = {"dequantize": False, "gguf_file": "m.gguf", "quant_method": "gguf"}
    (base / "config.json").write_text(json.dumps(cfg))
    store = LineageStore(tmp_path / "run.sqlite")
    trainer = PolicyTrainer(checkpoints.load_model_dir(base), ByT5Tokenizer(), grpo(),
                            TrainerConfig(use_lora=True, lora_r=2, learning_rate=5e-2), store=store)
    trainer.save_version()
    train(trainer, 1)
    out = checkpoints.export_version(store, trainer.run_id, None, tmp_path / "out")
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    assert torch.allclose(logits(AutoModelForCausalLM.from_pretrained(out)), logits(trainer.model), atol=1e-5)


def test_full_versions_of_a_base_converted_from_gguf_save(tmp_path):
    """Full fine-tuning of a prepared (GGUF-converted) model stores its versions too."""
    base = save_base(tmp_path / "base")
    cfg = json.loads((base / "config.json").read_text())
    cfg["quantization_config"] = {"dequantize": False, "gguf_file": "m.gguf", "quant_method": "gguf"}
    (base / "config.json").write_text(json.dumps(cfg))
    store = LineageStore(tmp_path / "run.sqlite")
    trainer = PolicyTrainer(checkpoints.load_model_dir(base), ByT5Tokenizer(), grpo(),
                            TrainerConfig(learning_rate=1e-2), store=store)
    trainer.save_version()
    train(trainer, 1)
    loaded = checkpoints.load_version(store, trainer.run_id)
    assert loaded.kind == "full" and torch.allclose(logits(loaded.model), logits(trainer.model), atol=1e-6)
