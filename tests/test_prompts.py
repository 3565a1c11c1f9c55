"""Prompt building: sections, truncation, redaction, per-example template overrides."""

from __future__ import annotations

import pytest

from qdevolve.errors import ConfigError
from qdevolve.prompts import (
    build_prompt,
    load_template,
    prompt_hash,
    render_artifacts,
    truncate_middle,
)
from qdevolve.types import EvalResult, Program

CODE = "import math\n# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n"
PARENT = Program(code=CODE)
RESULT = EvalResult(score=0.5, metrics={"accuracy": 0.25, "combined_score": 0.5}, features={"length": 3.0},
                    artifacts={"stderr": "Traceback (most recent call last):\nValueError: bad radius\n"})


def user(messages):
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_diff_prompt_has_code_metrics_artifacts_inspirations_and_format():
    insp = [(Program(code="y = 2\n", operator="rewrite"), EvalResult(score=0.9))]
    msgs = build_prompt(PARENT, RESULT, insp, edit_format="diff")
    text = user(msgs)
    assert "EVOLVE-BLOCK" in msgs[0]["content"]
    assert f"```python\n{CODE}```" in text
    assert "- score: 0.5" in text and "- accuracy: 0.25" in text and "- length (feature): 3" in text
    assert "ValueError: bad radius" in text and "## stderr" in text
    assert "## Program 1 (score 0.9, operator rewrite)" in text and "y = 2" in text
    assert "<<<<<<< SEARCH" in text and ">>>>>>> REPLACE" in text
    assert text.index("Program 1") < text.index("# Current program\n")


def test_rewrite_and_crossover_prompts():
    assert "complete program" in user(build_prompt(PARENT, None, [], edit_format="rewrite"))
    other = Program(code="z = 3\n")
    text = user(build_prompt(PARENT, RESULT, [], edit_format="crossover", other_parents=[(other, EvalResult(score=0.7))]))
    assert "# Second parent\n```python\nz = 3\n```" in text and "- score: 0.7" in text and "x = 1" in text
    with pytest.raises(ConfigError, match="second parent"):
        build_prompt(PARENT, RESULT, [], edit_format="crossover")
    with pytest.raises(ConfigError, match="unknown edit_format"):
        build_prompt(PARENT, RESULT, [], edit_format="patch")  # type: ignore[arg-type]


def test_failed_parent_shows_status_and_error():
    res = EvalResult(status="timeout", error="exceeded 10 s", artifacts={})
    text = user(build_prompt(PARENT, res, [], edit_format="diff"))
    assert "Status: timeout (exceeded 10 s)" in text and "- score: none" in text


def test_artifacts_are_truncated_keeping_the_tail_cleaned_and_redacted():
    long = "line\n" * 2000 + "FINAL ERROR\n"
    res = EvalResult(score=1.0, artifacts={
        "stderr": long,
        "feedback": "\x1b[31mred\x1b[0m api_key=abcd1234secret token: sk-abcdefghijklmnop1234",
        "empty": "  ",
    })
    text = render_artifacts(res, {"max_artifact_chars": 400})
    assert "FINAL ERROR" in text and "characters truncated" in text and len(text) < 1200
    assert "\x1b[" not in text and "red" in text
    assert "abcd1234secret" not in text and "sk-abcdefghijklmnop1234" not in text and "[REDACTED]" in text
    assert "## empty" not in text
    assert render_artifacts(res, {"include_artifacts": False}) == ""
    assert render_artifacts(EvalResult(score=1.0), {}) == ""


def test_max_artifact_bytes_caps_all_artifacts_together():
    res = EvalResult(score=1.0, artifacts={"a": "x" * 500, "b": "y" * 500, "c": "z" * 500})
    text = render_artifacts(res, {"max_artifact_bytes": 700})
    assert "x" * 500 in text and "y" * 150 in text and "y" * 260 not in text and "zz" not in text
    assert "## c\n[omitted: max_artifact_bytes reached]" in text


def test_system_message_may_name_a_template(tmp_path):
    (tmp_path / "my_system.txt").write_text("From a template.")
    msgs = build_prompt(PARENT, RESULT, [], edit_format="diff", settings={"template_dir": str(tmp_path), "system_message": "my_system"})
    assert msgs[0]["content"] == "From a template."
    default = build_prompt(PARENT, RESULT, [], edit_format="diff", settings={"system_message": "system_message"})
    assert default == build_prompt(PARENT, RESULT, [], edit_format="diff")
    assert build_prompt(PARENT, RESULT, [], edit_format="diff", settings={"system_message": "Optimise."})[0]["content"] == "Optimise."


def test_all_given_inspirations_are_shown_unless_limited():
    insp = [(Program(code=f"v = {i}\n"), EvalResult(score=float(i))) for i in range(5)]
    assert user(build_prompt(PARENT, RESULT, insp, edit_format="diff")).count("## Program ") == 5
    assert user(build_prompt(PARENT, RESULT, insp, edit_format="diff", settings={"num_inspirations": 2})).count("## Program ") == 2


def test_truncate_middle():
    assert truncate_middle("abc", 10) == "abc"
    out = truncate_middle("a" * 100 + "b" * 100, 40)
    assert out.startswith("a" * 10) and out.endswith("b" * 30) and "160 characters truncated" in out


def test_template_overrides_in_order(tmp_path):
    example = tmp_path / "example"
    (example / "prompts").mkdir(parents=True)
    (example / "prompts" / "system_message.txt").write_text("You pack circles.")
    (example / "prompts" / "diff_user.txt").write_text("EXAMPLE {current_program} {metrics}")
    tdir = tmp_path / "tdir"
    tdir.mkdir()
    (tdir / "diff_user.txt").write_text("TEMPLATE_DIR {language}")
    msgs = build_prompt(PARENT, RESULT, [], edit_format="diff", settings={"example_dir": str(example)})
    assert msgs[0]["content"] == "You pack circles." and user(msgs).startswith("EXAMPLE import math")
    msgs = build_prompt(PARENT, RESULT, [], edit_format="diff", settings={"example_dir": str(example), "template_dir": str(tdir)})
    assert user(msgs) == "TEMPLATE_DIR python\n" and msgs[0]["content"] == "You pack circles."
    msgs = build_prompt(PARENT, RESULT, [], edit_format="diff", settings={
        "example_dir": str(example), "templates": {"diff_user": "INLINE"}, "system_message": "Sys."})
    assert user(msgs) == "INLINE\n" and msgs[0]["content"] == "Sys."


def test_openevolve_style_placeholders_render_and_unknown_ones_are_blank():
    tpl = "# Current Program\n{fitness_score}|{improvement_areas}|{feature_coords}\n```{language}\n{current_program}\n```"
    text = user(build_prompt(PARENT, RESULT, [], edit_format="rewrite", settings={"templates": {"full_rewrite_user": tpl}}))
    assert text.startswith("# Current Program\n0.5||\n```python\nimport math")
    with pytest.raises(ConfigError, match="cannot be rendered"):
        build_prompt(PARENT, RESULT, [], edit_format="diff", settings={"templates": {"diff_user": "{metrics:.2f}"}})


def test_missing_template_names_the_directories(tmp_path):
    with pytest.raises(ConfigError, match=rf"'nope.txt' not found in {tmp_path}, .*templates"):
        load_template("nope", {"template_dir": str(tmp_path)})


def test_prompt_hash_is_stable_and_sensitive():
    a = build_prompt(PARENT, RESULT, [], edit_format="diff")
    b = build_prompt(PARENT, RESULT, [], edit_format="diff")
    c = build_prompt(PARENT, EvalResult(score=0.6), [], edit_format="diff")
    assert prompt_hash(a) == prompt_hash(b) != prompt_hash(c)
    assert len(prompt_hash(a)) == 32 and prompt_hash("text") == prompt_hash("text")
