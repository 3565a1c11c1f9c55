"""The trainer's scoring pass on SmolLM2-135M + LoRA: a group's prompt run once and shared by its
completions, against the one-pass layout that runs the prompt once per completion.

What a LoRA trainer step of the real-model join spends its time on is
``completion_logprobs``: with gradients for the loss, without for the KL anchor's reference
log-probs. Its rows are GRPO groups, G completions of one prompt, and the real-model example's
prompts (the program and one inspiration) are several times longer than its replies. Both layouts are
measured in one process on the same batch, one after the other in each round (the order
alternates by round), so a load swing touches both:

* **one-pass**: ``B`` rows of ``prompt + completion`` tokens, logits for the completion positions
  only (``share_prompts=False``);
* **shared**: the ``U`` distinct prompts once with a KV cache, indexed out to the rows, then the
  completions (``share_prompts=True``; what ``completion_logprobs`` picks for such a batch).

Per round and layout: wall seconds of the forward and backward pass of the summed log-probs
(what the loss step costs) and of a forward pass without gradients (the reference and old-policy
log-probs), and the largest difference between the two layouts' log-probs. The batch: the
example's seed program with one inspiration (1,200 characters) as the prompt, a second prompt
7 tokens shorter, ``--groups`` groups of ``--group`` completions of ``--completion-tokens``
random tokens (the content does not change the cost).

    python benchmarks/bench_trainer_step.py                 # 2 groups x 4 completions, 3 rounds, 1 thread
    python benchmarks/bench_trainer_step.py --groups 4 --rounds 2 --threads 2 --raw trainer_step_g4

Raw file: ``benchmarks/results/trainer_step.json``; table: ``benchmarks/reports/trainer_step.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from _raw import start_meta, write_raw  # noqa: E402

LAYOUTS = ("one_pass", "shared")


def build_batch(tok: Any, groups: int, group: int, completion_tokens: int, seed: int) -> tuple[list, list]:
    """Prompts (one per row) and random completions of the example's shapes."""
    import torch

    program = (ROOT / "examples" / "small_model_knapsack" / "initial_program.py").read_text()
    text = ("Improve the EVOLVE-BLOCK of this program.\n\n" + program + "\n\nAn earlier program:\n"
            + program[:1200] + "\n\nWrite the new body of the block:")
    base = list(tok(text)["input_ids"])
    prompts = [base[: len(base) - 7 * k] for k in range(groups)]
    g = torch.Generator().manual_seed(seed)
    comps = [torch.randint(10, tok.vocab_size - 10, (completion_tokens,), generator=g).tolist()
             for _ in range(groups * group)]
    return [prompts[i // group] for i in range(groups * group)], comps


def measure(model: Any, prompts: list, comps: list, pad: int, share: bool) -> dict[str, Any]:
    import torch

    from qdevolve.rl.sampling import completion_logprobs

    model.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    lp, mask, _ = completion_logprobs(model, prompts, comps, pad_id=pad, share_prompts=share)
    (lp * mask).sum().backward()
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.no_grad():
        lp_ng, _, _ = completion_logprobs(model, prompts, comps, pad_id=pad, share_prompts=share)
    return {"train_s": round(train_s, 3), "no_grad_s": round(time.perf_counter() - t0, 3),
            "logp": (lp_ng * mask).detach()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=2, help="GRPO groups in the batch (distinct prompts)")
    ap.add_argument("--group", type=int, default=4, help="completions per group (G)")
    ap.add_argument("--completion-tokens", type=int, default=115,
                    help="tokens per completion (the real-model join's mean reply was about 115)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the join's --jobs 2 gives each run 1)")
    ap.add_argument("--lora-r", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--raw", default="trainer_step", help="raw file name under benchmarks/results/")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qdevolve.backends.models import resolve_model
    from qdevolve.rl.config import TrainerConfig
    from qdevolve.rl.lora import wrap_lora

    meta = start_meta(ROOT)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    path = resolve_model("smollm2-135m-instruct")
    tok = AutoTokenizer.from_pretrained(path)
    model = wrap_lora(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
                      TrainerConfig(use_lora=True, lora_r=args.lora_r))
    model.train()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    prompts, comps = build_batch(tok, args.groups, args.group, args.completion_tokens, args.seed)
    measure(model, prompts[:2], [c[:4] for c in comps[:2]], pad, share=False)  # warm-up, not recorded
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = LAYOUTS if r % 2 == 0 else LAYOUTS[::-1]
        row: dict[str, Any] = {"round": r, "order": list(order)}
        logps = {}
        for layout in order:
            load = [round(x, 2) for x in os.getloadavg()]
            m = measure(model, prompts, comps, pad, share=layout == "shared")
            logps[layout] = m.pop("logp")
            row[layout] = {**m, "load": load[0]}
            print(f"round {r} {layout:8s} forward+backward {m['train_s']:7.2f} s   no-grad forward "
                  f"{m['no_grad_s']:6.2f} s   load {load[0]}", flush=True)
        row["max_abs_logp_diff"] = float((logps["one_pass"] - logps["shared"]).abs().max())
        rounds.append(row)
    settings = {"model": "smollm2-135m-instruct", "lora_r": args.lora_r, "groups": args.groups,
                "group": args.group, "completion_tokens": args.completion_tokens,
                "prompt_tokens": sorted({len(p) for p in prompts}), "threads": args.threads,
                "dtype": "float32", "torch": torch.__version__}
    out = write_raw(args.raw, {"settings": settings, "rounds": rounds}, seeds=[args.seed], meta=meta)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
