"""The model path on one device, with random-weight models of real configs: sampling with the
``transformers`` backend, one LoRA trainer step, adapter versions saved and switched in place.

Made for a GPU machine with torch, transformers and peft but no vLLM, no weights and no
network: the models are built from SmolLM2-135M's config and a 1.5 B Qwen2 config (written
below), the tokenizer is a word-level one built in code. Every check that fails raises, so
the script exits non-zero rather than printing a partial table.

    python benchmarks/gpu_smoke.py                       # CUDA, the real sizes
    python benchmarks/gpu_smoke.py --device cpu --small  # the same code, 2-layer models

With ``--raw NAME`` the table's rows (model, parameters, sampling tokens/s, LoRA step seconds,
adapter MB, adapter swap seconds, device, dtype, small flag) go to
``benchmarks/results/NAME.json`` once every check has passed (``--raw gpu_smoke_cpu`` for the CPU
table of BENCHMARKS.md, rendered by ``benchmarks/reports/gpu_smoke_cpu.py``); without it nothing
is written. Each figure is one measurement (one sampling call, one step, one switch), not a median.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import start_meta, write_raw  # noqa: E402

#: SmolLM2-135M-Instruct's architecture (the config.json `qdevolve models prepare` writes).
SMOLLM2_135M = {"architecture": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
                "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                "max_position_embeddings": 8192, "rope_theta": 100000.0, "tie_word_embeddings": True}
#: A Qwen2-1.5B-shaped config (1.5 B parameters).
QWEN2_1_5B = {"architecture": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
              "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
              "max_position_embeddings": 32768, "rope_theta": 1000000.0, "tie_word_embeddings": True}

#: LoRA rank of the trainer step.
LORA_R = 8


def build(spec: dict, small: bool, device: str, dtype: str):
    """A random-weight model of ``spec`` (2 layers and a 64-wide hidden state with ``small``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    kw = {k: v for k, v in spec.items() if k != "architecture"}
    if small:
        kw.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, vocab_size=min(kw["vocab_size"], 4096))
        kw["num_attention_heads"], kw["num_key_value_heads"] = 4, 2
    cfg_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[
        spec["architecture"]]
    torch.manual_seed(0)
    model = model_cls(cfg_cls(bos_token_id=1, eos_token_id=2, pad_token_id=2, **kw))
    return model.to(device=device, dtype=getattr(torch, dtype))


def word_tokenizer(vocab_size: int):
    """A word-level fast tokenizer over ``vocab_size`` ids, built without files or network."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="</s>")


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"gpu_smoke: FAILED: {what}")


def smoke(name: str, spec: dict, args: argparse.Namespace, out: Path) -> dict:
    import numpy as np
    import torch

    from qdevolve import registry
    from qdevolve.backends.base import GenerationRequest
    from qdevolve.backends.transformers_backend import TransformersBackend
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.group import RolloutGroup
    from qdevolve.rl.trainer import PolicyTrainer

    model = build(spec, args.small, args.device, args.dtype)
    params = sum(p.numel() for p in model.parameters())
    tok = word_tokenizer(model.config.vocab_size)
    backend = TransformersBackend(model, tok, device=args.device, batch_size=args.batch,
                                  max_new_tokens=args.new_tokens, name=name)
    prompts = [" ".join(f"w{3 + (i * 7 + j) % 50}" for j in range(8 + i)) for i in range(args.batch // args.group)]
    reqs = [GenerationRequest(prompt=p, n=args.group, temperature=1.0, max_tokens=args.new_tokens, seed=i)
            for i, p in enumerate(prompts)]
    backend.generate_sync(reqs[:1])  # warm-up (kernels, allocator)
    t = time.perf_counter()
    outs = backend.generate_sync(reqs)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t
    tokens = sum(c.completion_tokens for comps in outs for c in comps)
    check(all(len(c.logprobs) == len(c.token_ids) > 0 for comps in outs for c in comps), f"{name}: completions")

    trainer = PolicyTrainer(backend.model, tok, registry.objective.create({"type": "grpo"}),
                            TrainerConfig(use_lora=True, lora_r=LORA_R, beta=0.0, learning_rate=1e-3,
                                          max_completion_length=args.new_tokens))
    check(next(trainer.model.parameters()).device.type == torch.device(args.device).type, f"{name}: trainer device")
    groups = [RolloutGroup(rewards=np.arange(len(comps), dtype=float), token_ids=[c.token_ids for c in comps],
                           prompt=p) for p, comps in zip(prompts, outs, strict=True)]
    lora = [p for n, p in trainer.model.named_parameters() if "lora_B" in n]
    before = [p.detach().clone() for p in lora]
    t = time.perf_counter()
    stats = trainer.step(groups)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    step_s = time.perf_counter() - t
    check(np.isfinite(stats["loss"]) and any(not torch.equal(a, b) for a, b in zip(before, lora, strict=True)),
          f"{name}: the LoRA step changed no adapter weight")

    dirs = []
    for v in (1, 2):
        d = out / name / f"v{v}"
        trainer.model.save_pretrained(d)  # a PeftModel saves its adapter only
        dirs.append(d)
        trainer.step(groups)
    size_mb = sum(f.stat().st_size for f in dirs[0].rglob("*") if f.is_file()) / 1e6
    fresh = TransformersBackend(build(spec, args.small, args.device, args.dtype), tok, device=args.device,
                                batch_size=args.batch, max_new_tokens=4, name=name)
    base_weight = fresh.model.get_input_embeddings().weight
    fresh.load_policy(1, str(dirs[0]))
    t = time.perf_counter()
    fresh.load_policy(2, str(dirs[1]))
    swap_s = time.perf_counter() - t
    check(fresh.model.get_input_embeddings().weight is base_weight, f"{name}: the base was reloaded on a switch")
    check(fresh.model.active_adapter == "v2", f"{name}: adapter v2 is not active after the switch")
    comp = fresh.generate_sync([GenerationRequest(prompt=prompts[0], n=1, max_tokens=4, seed=0)])[0][0]
    check(comp.policy_version == 2 and comp.token_ids, f"{name}: sampling after the switch")
    return {"model": name, "params_M": params / 1e6, "tokens_per_s": tokens / dt, "tokens": tokens,
            "sampling_s": dt, "lora_step_s": step_s, "adapter_MB": size_mb, "swap_s": swap_s,
            "device": args.device, "dtype": args.dtype, "small": bool(args.small)}


def settings(args: argparse.Namespace, torch) -> dict:
    """The run's settings for the raw file: sizes, device (with the CUDA device's name) and versions."""
    from importlib import metadata

    versions = {}
    for dist in ("torch", "transformers", "peft"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    cuda = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None
    return {"device": args.device, "cuda_device": cuda, "dtype": args.dtype, "small": bool(args.small),
            "batch": args.batch, "group": args.group, "new_tokens": args.new_tokens, "models": args.models.split(","),
            "lora_r": LORA_R, "versions": versions,
            "measured": "tokens/s: one generate call of batch // group prompts x group samples after one warm-up "
                        "call; LoRA step: one PolicyTrainer.step; swap: one load_policy switch from v1 to v2"}


def parser() -> argparse.ArgumentParser:
    """The command line (``--raw`` unset: no raw file is written)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="2-layer, 64-wide models of the same architectures.")
    ap.add_argument("--dtype", default=None, help="Default: bfloat16 on CUDA, float32 on CPU.")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--models", default="smollm2-135m,qwen2-1.5b")
    ap.add_argument("--raw", default=None, metavar="NAME",
                    help="write the rows to benchmarks/results/NAME.json (e.g. gpu_smoke_cpu); default: write nothing")
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    import torch
    from rich.console import Console
    from rich.table import Table

    if args.device.startswith("cuda"):
        check(torch.cuda.is_available(), "--device cuda but torch sees no CUDA device")
    args.dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    specs = {"smollm2-135m": SMOLLM2_135M, "qwen2-1.5b": QWEN2_1_5B}
    meta = start_meta() if args.raw else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="qdevolve-gpu-smoke-") as tmp:
        for name in args.models.split(","):
            rows.append(smoke(name, specs[name], args, Path(tmp)))
    table = Table(title=f"gpu_smoke on {args.device} ({args.dtype}{', small' if args.small else ''}; "
                        f"batch {args.batch}, {args.new_tokens} new tokens)")
    for col in ("model", "params (M)", "tokens/s", "LoRA step (s)", "adapter (MB)", "adapter swap (s)"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for r in rows:
        table.add_row(r["model"], f"{r['params_M']:.1f}", f"{r['tokens_per_s']:.1f}", f"{r['lora_step_s']:.2f}",
                      f"{r['adapter_MB']:.2f}", f"{r['swap_s']:.3f}")
    Console(width=120).print(table)
    if args.raw:
        write_raw(args.raw, {"settings": settings(args, torch), "rows": rows}, seeds=[0], meta=meta)
        print(f"gpu_smoke: wrote benchmarks/results/{args.raw}.json")
    print("gpu_smoke: OK")


if __name__ == "__main__":
    main()
