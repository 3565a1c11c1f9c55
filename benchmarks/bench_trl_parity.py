"""Parity with TRL's ``GRPOTrainer`` (trl==1.16.0) on one fixed batch, and one step's time.

A tiny GPT-2 (built from config, saved locally: no downloads) generates one batch through
TRL's own ``_generate_and_score_completions`` (2 prompts x G = 4, max 4 new tokens); the
same prompt and completion ids and the same rewards then go through qdevolve's ``grpo``
objective and :class:`PolicyTrainer`. We compare the advantages and the loss for matching
settings (``loss_type``, ``scale_rewards``, ``beta``, ``epsilon``) after moving the policy off
the sampling policy by fixed-seed weight noise (so ratios, clipping and the KL term all
matter; TRL runs with ``num_iterations=2`` so it records old log-probs), and time one full step
of each: TRL's ``training_step`` (generation, scoring, loss, backward) plus its optimiser
step, against ``sample_batch`` + verification + ``PolicyTrainer.step``.

    python benchmarks/bench_trl_parity.py [--repeats 20] [--warmup 1] [--raw trl_parity]

The timed setting (the first of ``SETTINGS``) runs ``--warmup`` unrecorded steps of each side,
then ``--repeats`` timed steps; in each timed step both sides run back to back, TRL first in
even steps and qdevolve first in odd ones, and every step's seconds are kept.

Raw file: ``benchmarks/results/trl_parity.json`` (``--raw NAME`` for another): per setting the
advantage and loss differences and both losses, the tolerance the parity is judged against, and
the per-step seconds of both sides; its tables are rendered by ``benchmarks/reports/trl_parity.py``.
The exit status is 1 when a difference exceeds the tolerance. The test
``tests/rl/test_trl_parity.py`` calls :func:`run_parity`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _raw import start_meta, write_raw  # noqa: E402

PROMPTS = ["a1:", "b2:"]  # equal length: no left padding, so position ids agree without position_ids
G = 4
#: The parity claim: every advantage and loss difference at most this (float32 arithmetic on both sides).
TOLERANCE = 1e-6


def reward_fn(completions: list[str], **_: Any) -> list[float]:
    """A deterministic reward with in-group variance: digit count of the completion, mod 3."""
    return [float(sum(c.isdigit() for c in text) % 3) for text in completions]


def _build(tmp: Path, seed: int = 0) -> Path:
    from qdevolve.rl.tiny import build_model, build_tokenizer

    tok = build_tokenizer("0123456789ab:")
    model = build_model(tok, n_embd=32, n_layer=2, n_head=2, n_positions=32, seed=seed)
    path = tmp / "tiny"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _trl_trainer(path: Path, out: Path, *, loss_type: str, beta: float, scale_rewards: str, epsilon: float,
                 lr: float, seed: int) -> Any:
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=len(PROMPTS) * G, num_generations=G,
        max_completion_length=4, learning_rate=lr, beta=beta, epsilon=epsilon, loss_type=loss_type,
        scale_rewards=scale_rewards, bf16=False, fp16=False, use_cpu=True, report_to=[],
        gradient_checkpointing=False, logging_steps=1, save_strategy="no", temperature=1.0, seed=seed,
        max_steps=1, num_iterations=2, gradient_accumulation_steps=1, max_grad_norm=1.0,
        adam_beta1=0.9, adam_beta2=0.99, adam_epsilon=1e-8, weight_decay=0.0, lr_scheduler_type="constant",
        warmup_steps=0, disable_tqdm=True)
    dataset = Dataset.from_dict({"prompt": PROMPTS * 4})
    tok = AutoTokenizer.from_pretrained(path)
    return GRPOTrainer(model=str(path), reward_funcs=reward_fn, args=args, train_dataset=dataset,
                       processing_class=tok)


def _groups_from_trl_batch(batch: dict[str, Any], tok: Any) -> list[Any]:
    from qdevolve.rl import RolloutGroup

    groups = []
    p_ids, p_mask = batch["prompt_ids"], batch["prompt_mask"]
    c_ids, c_mask = batch["completion_ids"], batch["completion_mask"]
    for s in range(0, p_ids.shape[0], G):
        comps, texts = [], []
        for i in range(s, s + G):
            ids = c_ids[i][c_mask[i].bool()].tolist()
            comps.append(ids)
            texts.append(tok.decode(ids, skip_special_tokens=True))
        prompt_ids = p_ids[s][p_mask[s].bool()].tolist()
        old = batch["old_per_token_logps"]
        olds = [old[i][c_mask[i].bool()].tolist() for i in range(s, s + G)]
        groups.append(RolloutGroup(rewards=reward_fn(texts), token_ids=comps, old_logprobs=olds,
                                   prompt=tok.decode(prompt_ids),
                                   metadata={"prompt_token_ids": prompt_ids, "texts": texts}))
    return groups


def run_parity(tmp: Path, *, loss_type: str = "grpo", beta: float = 0.04, scale_rewards: str = "group",
               epsilon: float = 0.2, lr: float = 1e-3, seed: int = 0, noise: float = 0.05,
               timing_steps: int = 0, warmup_steps: int = 0) -> dict[str, Any]:
    """Advantage / loss differences between TRL and qdevolve on one batch, and with ``timing_steps``
    the seconds of each of that many full steps of both sides (``steps_s_trl``, ``steps_s_ours``;
    their medians ``step_s_trl``, ``step_s_ours``), after ``warmup_steps`` unrecorded ones; in
    step ``i`` TRL runs first when ``i`` is even, qdevolve first when it is odd."""
    from transformers import AutoModelForCausalLM

    from qdevolve import registry
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.sampling import sample_batch
    from qdevolve.rl.trainer import PolicyTrainer

    torch.manual_seed(seed)
    path = _build(tmp, seed)
    trl = _trl_trainer(path, tmp / "trl", loss_type=loss_type, beta=beta, scale_rewards=scale_rewards,
                       epsilon=epsilon, lr=lr, seed=seed)
    tok = trl.processing_class
    trl.model.train()
    trl.current_gradient_accumulation_steps = 1  # set by Trainer's train loop; one window here
    inputs = [{"prompt": p} for p in PROMPTS for _ in range(G)]
    batch = trl._generate_and_score_completions(inputs)
    # Move the policy off the sampling policy (as after an update), so ratios, clipping and the
    # KL term are all exercised: fixed-seed noise on every weight.
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in trl.model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * noise)
    trl_loss = float(trl.compute_loss(trl.model, batch).detach())
    groups = _groups_from_trl_batch(batch, tok)

    objective = registry.objective.create({"type": "grpo", "scale": scale_rewards})
    ours_adv = np.concatenate(objective.advantages_batch(groups))
    config = TrainerConfig(learning_rate=lr, beta=beta, epsilon=epsilon, loss_type=loss_type,
                           max_completion_length=4, adam_beta1=0.9, adam_beta2=0.99, weight_decay=0.0,
                           recompute_old_logprobs=False)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.load_state_dict(trl.model.state_dict())
    ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32) if beta else None
    ours = PolicyTrainer(model, tok, objective, config, ref_model=ref)
    our_loss = float(ours.compute_loss(groups).detach())
    res = {"adv_max_abs_diff": float(np.abs(ours_adv - batch["advantages"].double().numpy()).max()),
           "loss_trl": trl_loss, "loss_ours": our_loss, "loss_abs_diff": abs(trl_loss - our_loss),
           "n_completions": float(len(inputs)), "reward_std": float(np.std([g.rewards for g in groups]))}
    if timing_steps:
        from qdevolve.rl import RolloutGroup

        ours.config = config.replace(recompute_old_logprobs=True)
        trl.args.num_iterations = trl.num_iterations = 1
        trl.create_optimizer_and_scheduler(num_training_steps=warmup_steps + timing_steps + 1)
        gen = torch.Generator().manual_seed(seed)

        def trl_step() -> float:
            t0 = time.perf_counter()
            trl.training_step(trl.model, inputs, None)
            trl.optimizer.step()
            trl.optimizer.zero_grad()
            return time.perf_counter() - t0

        def our_step() -> float:
            t0 = time.perf_counter()
            samples = sample_batch(ours.model, tok, PROMPTS, G, 4, 1.0, gen)
            step_groups = [RolloutGroup(rewards=reward_fn([t for t, _, _ in grp]), token_ids=[i for _, i, _ in grp],
                                        old_logprobs=[lp for _, _, lp in grp], prompt=p)
                           for p, grp in zip(PROMPTS, samples, strict=True)]
            ours.step(step_groups)
            return time.perf_counter() - t0

        for _ in range(warmup_steps):
            trl_step()
            our_step()
        t_trl, t_ours = [], []
        for i in range(timing_steps):
            if i % 2 == 0:
                t_trl.append(trl_step())
                t_ours.append(our_step())
            else:
                t_ours.append(our_step())
                t_trl.append(trl_step())
        res["steps_s_trl"] = [round(x, 6) for x in t_trl]
        res["steps_s_ours"] = [round(x, 6) for x in t_ours]
        res["step_s_trl"] = float(np.median(t_trl))
        res["step_s_ours"] = float(np.median(t_ours))
    return res


SETTINGS = [
    {"loss_type": "grpo", "beta": 0.04, "scale_rewards": "group"},
    {"loss_type": "grpo", "beta": 0.0, "scale_rewards": "none"},
    {"loss_type": "bnpo", "beta": 0.04, "scale_rewards": "batch"},
    {"loss_type": "dr_grpo", "beta": 0.0, "scale_rewards": "none"},
    {"loss_type": "dapo", "beta": 0.04, "scale_rewards": "group"},
]


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for dist in ("trl", "transformers", "torch", "datasets", "accelerate"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", "--timing-steps", dest="repeats", type=int, default=20,
                    help="timed steps of each side in the first setting (every one is recorded)")
    ap.add_argument("--warmup", type=int, default=1, help="unrecorded steps of each side before the timed ones")
    ap.add_argument("--raw", default="trl_parity", help="raw file name under benchmarks/results/")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0:
        ap.error("--repeats must be >= 1 and --warmup >= 0")
    try:
        import trl  # noqa: F401
    except ImportError:
        print("skipped: trl is not installed; install the 'parity' extra (trl==1.16.0) to run the TRL parity check")
        return 0
    meta = start_meta()
    meta["versions"] = _versions()
    rows: list[dict[str, Any]] = []
    timing: dict[str, Any] = {}
    for i, setting in enumerate(SETTINGS):
        with tempfile.TemporaryDirectory() as tmp:
            res = run_parity(Path(tmp), **setting, timing_steps=args.repeats if i == 0 else 0,
                             warmup_steps=args.warmup if i == 0 else 0)
        if i == 0:
            timing = {"setting": setting, "trl_s": res.pop("steps_s_trl"), "ours_s": res.pop("steps_s_ours")}
            res.pop("step_s_trl"), res.pop("step_s_ours")
        rows.append({**setting, **res})
        print(setting, {k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in res.items()}, flush=True)
    settings = {"model": "tiny GPT-2 built from config (2 layers, n_embd 32, 2 heads), no downloads",
                "prompts": len(PROMPTS), "group_size": G, "max_new_tokens": 4, "epsilon": 0.2, "lr": 1e-3,
                "noise": 0.05, "device": "cpu", "tolerance": TOLERANCE, "timed_steps": args.repeats,
                "warmup_steps": args.warmup, "order": "TRL first in even steps, qdevolve first in odd ones",
                "step": {"trl": "GRPOTrainer.training_step (generation, scoring, loss, backward) + optimiser step",
                         "ours": "sample_batch + verification + PolicyTrainer.step"}}
    path = write_raw(args.raw, {"settings": settings, "rows": rows, "timing": timing}, seeds=[0], meta=meta)
    print(f"wrote {path}")
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from trl_parity import render  # the tables BENCHMARKS.md shows

    out = render(json.loads(path.read_text()))
    print("\n\n".join(out[k] for k in ("setup", "parity", "timing", "summary")))
    worst = max(max(r["adv_max_abs_diff"], r["loss_abs_diff"]) for r in rows)
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    raise SystemExit(main())
