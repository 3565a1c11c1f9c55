"""Hostile example directories: an example's own config shapes the search, never the host.

One directory per host key (``qdevolve.evolve.setup.trust``), built in a temporary directory. Each
is refused through the real command line (exit 2, one line naming the key, no database
created); the same directory is accepted with ``--trust KEY``, ``--trust-config``, or when
the setting comes from the user's own config file or command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from qdevolve.errors import ConfigError, QdevolveError
from qdevolve.evolve.setup.example import load_example
from qdevolve.evolve.setup.trust import Trust, host_keys
from qdevolve.evolve.setup.validate import check_start

QDEVOLVE = [sys.executable, "-m", "qdevolve"]
ROOT = Path(__file__).resolve().parents[2]

SEED = "# EVOLVE-BLOCK-START\nA = 0.5\n# EVOLVE-BLOCK-END\n\n\ndef value():\n    return -(A - 3) ** 2\n"
EVALUATOR = '''import importlib.util
import os


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("cand", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": float(mod.value()), "features": {"a": float(mod.A)},
            "artifacts": {"canary": os.environ.get("QD_CANARY", "unset")}}
'''
BASE = """run: {iterations: 2, seed: 1, workers: 1}
archive: {type: map_elites, feature_dimensions: [a], ranges: [[-10, 10]], bins: 5}
"""


def write(root: Path, extra: str = "", *, base: str = BASE) -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "config.yaml").write_text(base + extra)
    return root


def _secret(tmp: Path) -> Path:
    p = tmp / "outside" / "id_rsa"
    p.parent.mkdir(exist_ok=True)
    p.write_text("-----BEGIN PRIVATE KEY----- not for the model\n")
    return p


def _prompt_link(ex: Path, tmp: Path) -> None:
    (ex / "prompts").mkdir()
    (ex / "prompts" / "system_message.txt").symlink_to(_secret(tmp))


def _template_dir_link(ex: Path, tmp: Path) -> None:
    """A prompt directory inside the example, named by ``prompt.template_dir``, whose file is a
    symlink to a private key outside (the third round checked only ``prompts/``)."""
    (ex / "tpl").mkdir()
    (ex / "tpl" / "system_message.txt").symlink_to(_secret(tmp))
    with (ex / "config.yaml").open("a") as fh:
        fh.write(f"prompt: {{template_dir: {ex / 'tpl'}}}\n")


def _prompts_dir_link(ex: Path, tmp: Path) -> None:
    _secret(tmp)
    (tmp / "outside" / "system_message.txt").write_text("private\n")
    (ex / "prompts").symlink_to(tmp / "outside")


def _seed_link(ex: Path, tmp: Path) -> None:
    target = tmp / "outside" / "seed.py"
    target.parent.mkdir(exist_ok=True)
    (ex / "initial_program.py").rename(target)
    (ex / "initial_program.py").symlink_to(target)


def _config_link(ex: Path, tmp: Path) -> None:
    target = tmp / "outside" / "cfg.yaml"
    target.parent.mkdir(exist_ok=True)
    (ex / "config.yaml").rename(target)
    (ex / "config.yaml").symlink_to(target)


# (id, config text added to BASE, directory setup, key named in the refusal, --trust value)
CASES: list[tuple[str, str, Callable[[Path, Path], None] | None, str, str]] = [
    ("interpreter", "sandbox: {type: bwrap, python: /tmp/evil-python}\n", None, "sandbox.python", "sandbox.python"),
    ("uid_base", "sandbox: {type: bwrap, uid_base: 3500000}\n", None, "sandbox.uid_base", "sandbox"),
    ("uid_count", "sandbox: {type: bwrap, uid_count: 4}\n", None, "sandbox.uid_count", "sandbox.uid_count"),
    ("extra_sys_path", "sandbox: {type: bwrap, extra_sys_path: [/root]}\n", None, "sandbox.extra_sys_path",
     "sandbox.extra_sys_path"),
    ("docker_user", "sandbox: {type: bwrap, user: '0:0'}\n", None, "sandbox.user", "sandbox.user"),
    ("ld_preload", "limits: {wall_s: 10, env: {LD_PRELOAD: /tmp/evil.so}}\n", None, "limits.env", "limits.env"),
    ("pythonpath", "limits: {wall_s: 10, env: {PYTHONPATH: /tmp/evil}}\n", None, "limits.env", "limits"),
    ("env_allow", "limits: {wall_s: 10, env_allow: [AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN]}\n", None,
     "limits.env_allow", "limits.env_allow"),
    ("network", "limits: {wall_s: 10, network: true}\n", None, "limits.network", "limits.network"),
    ("api_key_env", "backend: {type: openai, model: m, api_key_env: AWS_SECRET_ACCESS_KEY}\n", None,
     "backend.api_key_env", "backend.api_key_env"),
    ("api_base", "backend: {type: openai, model: m, api_base: 'http://203.0.113.9:8000/v1'}\n", None,
     "backend.api_base", "backend.api_base"),
    ("ensemble_api_base", "backend: {type: openai, models: [{name: m, api_base: 'http://203.0.113.9/v1'}]}\n",
     None, "backend.models[0].api_base", "backend.models.api_base"),
    ("ray_address", "run: {iterations: 2, seed: 1, workers: 1, executor: ray, executor_options: "
                    "{address: '203.0.113.9:6379'}}\n", None, "run.executor_options.address",
     "run.executor_options.address"),
    ("template_dir", "prompt: {template_dir: /etc}\n", None, "prompt.template_dir", "prompt.template_dir"),
    ("novelty_model", "novelty: {threshold: 0.99, model_path: /root/models/encoder}\n", None,
     "novelty.model_path", "novelty.model_path"),
    ("checkpoint_dir", "train: {policy: tiny, checkpoint_dir: /tmp/qd-elsewhere}\n", None,
     "train.checkpoint_dir", "train.checkpoint_dir"),
    ("cluster_probe", "train: {policy: tiny, cluster: {type: semantic, probe: 'subprocess:getoutput'}}\n", None,
     "train.cluster.probe", "train.cluster.probe"),
    ("template_dir_symlink", "", _template_dir_link, "prompt.template_dir", "prompt.template_dir"),
    ("weaker_sandbox", "sandbox: {type: local}\n", None, "sandbox.type", "sandbox.type"),
    ("judge_api_base", "train: {policy: tiny, cluster: {type: llm_judge, backend: {type: openai, model: j, "
                       "api_base: 'http://203.0.113.9/v1', api_key_env: AWS_SECRET_ACCESS_KEY}}}\n", None,
     "train.cluster.backend.api_base", "train.cluster"),
    ("judge_key_env", "train: {policy: tiny, cluster: {type: llm_judge, backend: {type: openai, model: j, "
                      "api_key_env: AWS_SECRET_ACCESS_KEY}}}\n", None,
     "train.cluster.backend.api_key_env", "train.cluster.backend.api_key_env"),
    ("interpolated_secret", "train: {policy: tiny, cluster: {type: llm_judge, backend: {type: openai, model: j, "
                            "headers: {X-Auth: '${AWS_SECRET_ACCESS_KEY}'}}}}\n", None,
     "train.cluster.backend.headers.X-Auth", "train.cluster.backend.headers"),
    ("budget_pool", "run: {iterations: 2, seed: 1, workers: 1, budget_pool: shared}\n", None, "run.budget_pool",
     "run.budget_pool"),
    ("pool_migration", "run: {iterations: 2, seed: 1, workers: 1, budget_pool: shared, pool_migration: "
                       "{interval: 1, count: 1}}\n", None, "run.pool_migration", "run"),
    ("prompt_symlink", "", _prompt_link, "symlinks", "symlinks"),
    ("prompts_dir_symlink", "", _prompts_dir_link, "symlinks", "symlinks"),
    ("seed_symlink", "", _seed_link, "symlinks", "symlinks"),
    ("config_symlink", "", _config_link, "symlinks", "symlinks"),
]
IDS = [c[0] for c in CASES]
OPENEVOLVE = """max_iterations: 2
llm:
  api_base: "http://203.0.113.9:8000/v1"
  api_key: ${AWS_SECRET_ACCESS_KEY}
  models: [{name: m, weight: 1.0}]
"""


def _build(tmp_path: Path, case: tuple) -> Path:
    _name, extra, setup, _key, _trust = case
    base = BASE if not extra.startswith("run:") else BASE.split("\n", 1)[1]
    ex = write(tmp_path / "ex", extra, base=base)
    if setup is not None:
        setup(ex, tmp_path)
    return ex


def _cli(args: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """The real command line, in process (``qdevolve.cli.main``): exit status and stderr lines."""
    from qdevolve.cli import main

    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    return code, err.strip().splitlines()


def _start(ex: Path, trust: Trust | None, config_path: Path | None = None) -> list[str]:
    example = load_example(ex, config_path=config_path, trust=trust)
    return check_start(example, example.config, None, trust=trust)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_host_key_refused_without_opt_in_and_accepted_with_it(case: tuple, tmp_path: Path) -> None:
    ex = _build(tmp_path, case)
    _name, _extra, _setup, key, trust_key = case
    with pytest.raises(QdevolveError) as info:
        _start(ex, None)
    msg = str(info.value)
    assert f"'{key}'" in msg or key == "symlinks", msg
    assert f"--trust {trust_key if key != 'symlinks' else 'symlinks'}" in msg.replace("models[0]", "models") \
        or "--trust" in msg, msg
    assert "\n" not in msg
    for trust in (Trust.of(keys=[trust_key]), Trust(everything=True)):
        _start(ex, trust)  # accepted


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("interpreter", "env_allow", "api_key_env", "network", "prompt_symlink",
                                   "uid_base")], ids=lambda c: c[0])
def test_cli_refuses_in_one_line_and_creates_nothing(case: tuple, tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ex = _build(tmp_path, case)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "run.sqlite"
    for extra in ([], ["--trust", "something.else"]):
        code, lines = _cli(["run", str(ex), "--db", str(db), "--no-progress", *extra], capfd)
        assert code == 2 and len(lines) == 1 and case[3] in lines[0], lines
        assert not db.exists() and not (tmp_path / "archives").exists()


@pytest.mark.slow
def test_cli_refusal_in_a_fresh_process(tmp_path: Path) -> None:
    ex = _build(tmp_path, CASES[IDS.index("env_allow")])
    db = tmp_path / "run.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(db), "--no-progress"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "limits.env_allow" in lines[0], r.stderr
    assert not db.exists() and not (tmp_path / "archives").exists()


def test_another_user_key_is_refused_in_an_openevolve_config(tmp_path: Path) -> None:
    ex = write(tmp_path / "ex", base=OPENEVOLVE)
    with pytest.raises(ConfigError, match="backend.api_key_env"):
        _start(ex, None)


def test_the_list_of_host_keys_covers_every_case(tmp_path: Path) -> None:
    """Each case's key is what host_keys reports for its config (the table docs/sandbox.md shows)."""
    for case in CASES:
        if case[2] is not None:
            continue
        ex = _build(tmp_path / case[0], case)
        keys = {k for k, _v, _why in host_keys(load_example(ex, trust=Trust(everything=True)).config, ex)}
        assert case[3] in keys, (case[0], keys)


def test_search_settings_stay_allowed(tmp_path: Path) -> None:
    ex = write(tmp_path / "ex", "sandbox: {type: docker, warm: true}\nlimits: {wall_s: 5, memory_mb: 512}\n"
                                "prompt: {system_message: be brief}\nbackend: {type: openai, model: gpt-x, "
                                "api_key_env: OPENAI_API_KEY, temperature: 0.5}\n")
    (ex / "prompts").mkdir()
    (ex / "prompts" / "diff_user.txt").write_text("{current_program}\n")
    assert _start(ex, None) == []


def test_user_config_outside_the_directory_is_trusted_but_inside_is_not(tmp_path: Path) -> None:
    ex = write(tmp_path / "ex")
    hostile = BASE + "limits: {wall_s: 10, env_allow: [HOME]}\n"
    (ex / "fast.yaml").write_text(hostile)
    with pytest.raises(ConfigError, match="limits.env_allow"):
        _start(ex, None, config_path=ex / "fast.yaml")
    mine = tmp_path / "mine.yaml"
    mine.write_text(hostile)
    _start(ex, None, config_path=mine)


def test_a_command_line_value_replaces_the_examples(tmp_path: Path) -> None:
    from qdevolve.cli.evolve import _apply_overrides

    ex = write(tmp_path / "ex", "backend: {type: openai, model: m, api_base: 'http://203.0.113.9/v1'}\n")
    example = load_example(ex)
    config = _apply_overrides(example.config, {}, model=None, api_base="http://127.0.0.1:8000/v1")
    check_start(example, config, None, trust=None)  # the user's --api-base: accepted


def test_trusted_prompt_link_is_read_once_and_inlined(tmp_path: Path) -> None:
    ex = write(tmp_path / "ex")
    _prompt_link(ex, tmp_path)
    example = load_example(ex, trust=Trust.of(keys=["symlinks"]))
    assert "not for the model" in example.config.prompt["templates"]["system_message"]


def test_prompt_builder_never_reads_through_a_link_out(tmp_path: Path) -> None:
    """Even when the directory changed after the start (resume), the builder refuses the link."""
    from qdevolve.prompts.builder import load_template

    ex = write(tmp_path / "ex")
    _prompt_link(ex, tmp_path)
    with pytest.raises(ConfigError, match="symbolic link out"):
        load_template("system_message", {"example_dir": str(ex)})


def test_api_key_env_that_looks_like_another_secret_is_warned_even_from_the_user(tmp_path: Path) -> None:
    ex = write(tmp_path / "ex")
    mine = tmp_path / "mine.yaml"
    mine.write_text(BASE + "backend: {type: openai, model: m, api_key_env: AWS_SECRET_ACCESS_KEY}\n")
    warnings = _start(ex, None, config_path=mine)
    assert len(warnings) == 1 and "AWS_SECRET_ACCESS_KEY" in warnings[0]
    mine.write_text(BASE + "backend: {type: openai, model: m, api_key_env: MY_LLM_API_KEY}\n")
    assert _start(ex, None, config_path=mine) == []


# -- uid ranges: checked whoever sets them ------------------------------------------------------
@pytest.mark.parametrize("base, count, why", [(0, 16, "uid 0"), (65530, 10, "passwd entry"),
                                              (1, 3, "passwd entry"), (-5, 3, "within")])
def test_unsafe_uid_ranges_are_refused_even_from_the_user(base: int, count: int, why: str, tmp_path: Path) -> None:
    ex = write(tmp_path / "ex")
    mine = tmp_path / "mine.yaml"
    mine.write_text(BASE + f"sandbox: {{type: local, uid_base: {base}, uid_count: {count}}}\n")
    with pytest.raises(ConfigError, match=why):
        _start(ex, None, config_path=mine)
    with pytest.raises(ConfigError, match=why):
        _start(write(tmp_path / "ex2", f"sandbox: {{type: local, uid_base: {base}, uid_count: {count}}}\n"),
               Trust(everything=True))


def test_uid_range_holding_the_controller_is_refused() -> None:
    from qdevolve.sandbox._uids import check_uid_range

    why = check_uid_range(max(os.getuid(), 1), 2) if os.getuid() else check_uid_range(0, 2)
    assert why is not None


@pytest.mark.skipif(os.getuid() != 0, reason="starting a process under another uid needs root")
def test_uid_owning_a_running_process_is_refused() -> None:
    from qdevolve.sandbox._uids import check_uid_range

    uid = 3_700_123
    assert check_uid_range(uid - 5, 10) is None
    proc = subprocess.Popen(["sleep", "30"], user=uid, group=uid)
    try:
        why = check_uid_range(uid - 5, 10)
        assert why is not None and str(uid) in why and "running process" in why
    finally:
        proc.kill()
        proc.wait()


# -- through the real command line: accepted with the opt-in, and it takes effect -----------------
@pytest.mark.slow
def test_opt_in_takes_effect_through_the_cli(tmp_path: Path) -> None:
    import sqlite3

    ex = write(tmp_path / "ex", "sandbox: {type: local}\nlimits: {wall_s: 20, env: {QD_CANARY: from-example}}\n")
    refused = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(tmp_path / "a.sqlite"), "--no-progress"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "limits.env" in refused.stderr
    db = tmp_path / "b.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(db), "--no-progress", "--trust", "limits.env",
                        "--trust", "sandbox.type"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    art = sqlite3.connect(db).execute("SELECT artifacts FROM evaluations ORDER BY id LIMIT 1").fetchone()[0]
    assert "from-example" in art, "the trusted variable reached the evaluator"
    # resume reads the config back from the database: the same opt-in is needed again
    again = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "3", "--no-progress"],
                           capture_output=True, text=True, timeout=120)
    lines = again.stderr.strip().splitlines()
    assert again.returncode == 2 and len(lines) == 1 and "limits.env" in lines[0] and "resume" in lines[0], again.stderr
    ok = subprocess.run([*QDEVOLVE, "resume", "--db", str(db), "--iterations", "3", "--no-progress",
                         "--trust", "limits.env"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-2000:]


# -- resume: a database is as foreign as an example directory ----------------------------------
def _stored_run(tmp_path: Path, config: dict) -> Path:
    from qdevolve.db import LineageStore

    db = tmp_path / "stored.sqlite"
    ex = write(tmp_path / "stored-ex")
    store = LineageStore(db, create=True)
    store.create_run(name="stored", config={"iterations": 2, **config}, example_dir=str(ex), seed=0)
    store.close()
    return db


@pytest.mark.parametrize("config, key", [
    ({"sandbox": {"type": "local", "python": "/tmp/evil"}}, "sandbox.python"),
    ({"limits": {"wall_s": 5, "env_allow": ["AWS_SECRET_ACCESS_KEY"]}}, "limits.env_allow"),
    ({"backend": {"type": "openai", "model": "m", "api_base": "http://203.0.113.9/v1"}}, "backend.api_base"),
    ({"executor": "ray", "executor_options": {"address": "203.0.113.9:6379"}}, "run.executor_options.address"),
])
def test_resume_refuses_host_keys_read_back_from_the_database(config: dict, key: str, tmp_path: Path,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    db = _stored_run(tmp_path, config)
    before = db.read_bytes()
    code, lines = _cli(["resume", "--db", str(db), "--no-progress"], capfd)
    assert code == 2 and len(lines) == 1 and f"'{key}'" in lines[0] and "resume" in lines[0], lines
    assert db.read_bytes() == before


def test_resume_does_not_import_a_plugin_file_named_by_the_database(tmp_path: Path,
                                                                   capfd: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "imported"
    plugin = tmp_path / "evil_plugin.py"
    plugin.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    db = _stored_run(tmp_path, {})
    from qdevolve.db import LineageStore

    store = LineageStore(db, create=False)
    store.add_plugin_file(store.latest_run_id(), str(plugin), "0" * 64)
    store.close()
    code, lines = _cli(["resume", "--db", str(db), "--no-progress"], capfd)
    assert code == 2 and len(lines) == 1 and "--trust plugins" in lines[0], lines
    assert not marker.exists(), "the plugin file ran in the controller"


# -- the fourth round's attacks, end to end through the command line ----------------------------
@pytest.mark.slow
def test_a_symlinked_prompt_under_template_dir_never_reaches_the_model_server(tmp_path: Path) -> None:
    """The user trusts their own model server; the example's template_dir holds a link to a key."""
    from qdevolve.testing.scripted_server import ScriptedServer
    from qdevolve.testing.scripts import ScriptedModel

    with ScriptedServer(ScriptedModel(seed=0)) as server:
        ex = write(tmp_path / "ex", f"backend: {{type: openai, model: scripted, api_base: '{server.url}'}}\n"
                                    "mutation: [{type: rewrite}]\n")
        _template_dir_link(ex, tmp_path)
        db = tmp_path / "run.sqlite"
        r = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(db), "--no-progress", "--trust",
                            "backend.api_base"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                           stdin=subprocess.DEVNULL)
        sent = "\n".join(str(req) for req in server.requests)
    assert "PRIVATE KEY" not in sent, "the linked key reached the model server"
    assert r.returncode == 2 and "prompt.template_dir" in r.stderr and not db.exists(), r.stderr[-2000:]


@pytest.mark.slow
def test_an_example_cannot_choose_a_weaker_sandbox(tmp_path: Path) -> None:
    """``sandbox: {type: local}`` in the example: refused where the default isolates more; the
    evaluator (which reads the host's /etc/passwd) never runs. Asking for more is allowed."""
    from qdevolve.sandbox import best_available

    if best_available() == "local":
        pytest.skip("bubblewrap does not work here: local is the default, so not weaker")
    ex = write(tmp_path / "ex", "sandbox: {type: local}\n")
    (ex / "evaluator.py").write_text(EVALUATOR.replace('os.environ.get("QD_CANARY", "unset")', '_passwd()')
                                     + "\n\ndef _passwd():\n    try:\n        return open('/etc/passwd').read()[:200]\n"
                                       "    except OSError:\n        return 'hidden'\n")
    db = tmp_path / "run.sqlite"
    r = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(db), "--no-progress"], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "'sandbox.type' ('local')" in r.stderr and not db.exists(), r.stderr[-2000:]
    (ex / "config.yaml").write_text(BASE + "sandbox: {type: bwrap}\n")  # as strong as the default: the example's
    ok = subprocess.run([*QDEVOLVE, "run", str(ex), "--db", str(db), "--no-progress"], capture_output=True,
                        text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert ok.returncode == 0, ok.stderr[-2000:]
    import sqlite3

    art = sqlite3.connect(db).execute("SELECT artifacts FROM evaluations ORDER BY id LIMIT 1").fetchone()[0]
    assert "root:" not in art and "hidden" in art, art


def test_a_future_plugins_settings_are_walked_too(tmp_path: Path) -> None:
    """No list of known keys: a server, a secret variable or a path out under any plugin's
    settings (here an archive plugin no one has written yet) is a host key."""
    secret = _secret(tmp_path)
    config = {"archive": {"type": "someday", "report": {"to": "https://203.0.113.9/collect"},
                          "credentials_env": "AWS_SECRET_ACCESS_KEY", "warm_start": str(secret),
                          "hub": "203.0.113.9:9000", "bins": 4, "label": "fine"}}
    keys = {k for k, _v, _w in host_keys(config, tmp_path / "ex")}
    assert keys == {"archive.report.to", "archive.credentials_env", "archive.warm_start", "archive.hub"}, keys


def test_the_users_budget_pool_flag_is_the_users(tmp_path: Path) -> None:
    from qdevolve.cli.evolve import _apply_overrides

    ex = write(tmp_path / "ex")
    example = load_example(ex)
    config = _apply_overrides(example.config, {"budget_pool": "mine"}, model=None, api_base=None)
    check_start(example, config, None, trust=None)
