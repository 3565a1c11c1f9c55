"""The plugin registry: decorators, entry points of an installed distribution, --plugin
files, duplicates, protocol checks, broken entry points and option errors."""

from __future__ import annotations

import hashlib
import importlib
import textwrap
from pathlib import Path

import pytest

from qdevolve import registry
from qdevolve.errors import PluginError

pytestmark = pytest.mark.usefixtures("registry_snapshot")


def _fake_distribution(root: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """An installed distribution as importlib.metadata sees one: a .dist-info directory
    with METADATA and entry_points.txt, next to its importable modules."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for mod, src in modules.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(src))


RULE = textwrap.dedent("""
    class GreedyRule:
        def __init__(self, k: int = 1):
            self.k = k

        def select(self, candidates, rng, n=1):
            return sorted(candidates, key=lambda c: -c.score)[:n]
""")


def test_decorator_registers_and_creates() -> None:
    @registry.selection("test_greedy")
    class Greedy:
        def __init__(self, temperature: float = 1.0) -> None:
            self.temperature = temperature

        def select(self, candidates, rng, n=1):  # noqa: ANN001, ANN201
            return list(candidates)[:n]

    obj = registry.selection.create({"type": "test_greedy", "temperature": 0.5})
    assert isinstance(obj, Greedy) and obj.temperature == 0.5
    assert registry.selection.create("test_greedy").temperature == 1.0
    assert "test_greedy" in registry.selection.names()
    assert __name__ in registry.selection.source("test_greedy")
    assert "test_greedy" not in registry.mutation.names()  # one registry per kind


def test_entry_point_of_an_installed_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_distribution(tmp_path, "qd-fake-rules", """
        [qdevolve.selection]
        fake_greedy = qd_fake_rules_mod:GreedyRule
    """, {"qd_fake_rules_mod": RULE})
    registry.selection.refresh()
    assert "fake_greedy" not in registry.selection.names()  # lists (and caches) entry points
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert "fake_greedy" not in registry.selection.names()  # the cached list predates the install
    registry.selection.refresh()
    assert "fake_greedy" in registry.selection.names()
    obj = registry.selection.create({"type": "fake_greedy", "k": 3})
    assert type(obj).__name__ == "GreedyRule" and obj.k == 3
    assert "qd-fake-rules" in registry.selection.source("fake_greedy")
    info = {i.name: i for i in registry.selection.infos()}["fake_greedy"]
    assert info.error is None and "qd-fake-rules" in info.source


def test_plugin_file_returns_its_hash(tmp_path: Path) -> None:
    f = tmp_path / "local_rules.py"
    f.write_text("from qdevolve import registry\n\n@registry.selection('file_greedy')\n" + RULE)
    loaded = registry.load_plugin_file(f)
    assert loaded.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()
    assert loaded.names == (("selection", "file_greedy"),)
    assert loaded.path == str(f.resolve())
    assert registry.selection.source("file_greedy") == str(f.resolve())
    assert registry.selection.create({"type": "file_greedy"}).k == 1
    assert registry.load_plugin_file(f).sha256 == loaded.sha256  # loading again is harmless
    with pytest.raises(PluginError, match="does not exist"):
        registry.load_plugin_file(tmp_path / "nope.py")
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('kaput')\n")
    with pytest.raises(PluginError, match="bad.py failed to import: RuntimeError: kaput"):
        registry.load_plugin_file(bad)


def test_duplicate_names_name_both_sources(tmp_path: Path) -> None:
    @registry.mutation("test_dup")
    class First:
        def propose(self, parent, context, backend):  # noqa: ANN001, ANN201
            return []

    with pytest.raises(PluginError) as err:
        @registry.mutation("test_dup")
        class Second:
            def propose(self, parent, context, backend):  # noqa: ANN001, ANN201
                return []
    assert str(err.value).count(f"{__name__} (") == 2 and "duplicate mutation plugin 'test_dup'" in str(err.value)

    f = tmp_path / "dup_plugin.py"
    f.write_text("from qdevolve import registry\n\n@registry.mutation('test_dup')\n"
                 "class Third:\n    def propose(self, parent, context, backend):\n        return []\n")
    with pytest.raises(PluginError) as err:
        registry.load_plugin_file(f)
    assert __name__ in str(err.value) and str(f.resolve()) in str(err.value)
    assert registry.mutation.get("test_dup") is First


def test_protocol_is_checked_at_registration() -> None:
    with pytest.raises(PluginError, match="does not follow the sandbox protocol: missing evaluate"):
        @registry.sandbox("test_no_evaluate")
        class NotASandbox:
            def run(self) -> None: ...
    assert "test_no_evaluate" not in registry.sandbox.names()
    with pytest.raises(PluginError, match="objective protocol: missing advantages or update"):
        registry.objective.register("test_bad_objective", type("Obj", (), {}))
    with pytest.raises(PluginError, match="not callable"):
        registry.cluster.register("test_bad_cluster", 42)


def test_broken_entry_point_is_reported_with_its_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_distribution(tmp_path, "qd-half-broken", """
        [qdevolve.selection]
        ghost = qd_missing_module_xyz:Ghost
        crashy = qd_crashy_mod:Rule
        fine_greedy = qd_fine_mod:GreedyRule

        [qdevolve.cluster]
        nocall = qd_fine_mod:NOT_CALLABLE
    """, {"qd_fine_mod": RULE + "\nNOT_CALLABLE = 3\n", "qd_crashy_mod": "raise ImportError('needs libfoo')\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    for reg in registry.REGISTRIES.values():
        reg.refresh()
    with pytest.raises(PluginError) as err:
        registry.selection.get("ghost")
    assert "qd-half-broken" in str(err.value) and "qd_missing_module_xyz" in str(err.value)
    with pytest.raises(PluginError, match="needs libfoo"):
        registry.selection.create("crashy")
    assert registry.selection.create("fine_greedy").k == 1  # the same distribution's good plugin
    infos = {(i.kind, i.name): i for i in registry.all_plugins()}
    assert "qd-half-broken" in infos[("selection", "ghost")].error
    assert "qd-half-broken" in infos[("selection", "ghost")].source
    assert "not callable" in infos[("cluster", "nocall")].error
    assert infos[("selection", "fine_greedy")].error is None
    assert "uniform" in registry.selection.names()  # other plugins of every kind still listed
    assert all(info.kind in registry.KINDS for info in infos.values())


def test_unknown_option_and_unknown_name() -> None:
    @registry.selection("test_opts")
    class WithOpts:
        def __init__(self, temperature: float = 1.0, size: int = 2) -> None:
            self.temperature, self.size = temperature, size

        def select(self, candidates, rng, n=1):  # noqa: ANN001, ANN201
            return []

    with pytest.raises(PluginError) as err:
        registry.selection.create({"type": "test_opts", "temprature": 0.5})
    assert "temprature" in str(err.value) and "temperature, size" in str(err.value)
    with pytest.raises(PluginError, match="unknown selection plugin 'test_nope'; available: .*test_opts"):
        registry.selection.create({"type": "test_nope"})
    with pytest.raises(PluginError, match="'type' key"):
        registry.selection.create({"temperature": 1.0})


def test_snapshot_fixture_undoes_registrations() -> None:
    with registry.snapshot():
        @registry.archive("test_tmp_archive")
        class A:
            def add(self, *a): ...  # noqa: ANN002
            def sample(self, *a): ...  # noqa: ANN002
            def elites(self): ...
            def stats(self): ...
        assert "test_tmp_archive" in registry.archive.names()
    assert "test_tmp_archive" not in registry.archive.names()


def test_file_plugin_shadowing_an_installed_entry_point_is_a_duplicate(tmp_path) -> None:
    """A --plugin file that reuses a core plugin's name is an error naming both sources."""
    import pytest as _pytest

    from qdevolve import registry as _registry
    from qdevolve.errors import PluginError as _PluginError

    plugin = tmp_path / "shadow.py"
    plugin.write_text(
        "from qdevolve import registry\n\n"
        "@registry.selection('uniform')\n"
        "class MyUniform:\n"
        "    def select(self, candidates, rng, n=1):\n"
        "        return list(candidates)[:n]\n")
    with _registry.snapshot():
        _registry.selection.unregister("uniform")
        _registry.load_plugin_file(plugin)
        with _pytest.raises(_PluginError) as err:
            _registry.selection.get("uniform")
        msg = str(err.value)
        assert "shadow.py" in msg and "entry point" in msg and "qdevolve" in msg
