"""The fixed code stays fixed: blocks that change the meaning of code outside them are rejected."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qdevolve.backends.openai_backend import OpenAIBackend
from qdevolve.mutation.base import MutationContext
from qdevolve.mutation.diff import DiffMutation
from qdevolve.mutation.fixed_code import fixed_code_violation, fixed_code_violations
from qdevolve.testing import ScriptedServer
from qdevolve.testing.programs import CIRCLE_PACKING
from qdevolve.types import Program

END_OF_BODY = "    return centers\n# EVOLVE-BLOCK-END"


def with_block_tail(extra: str) -> str:
    """The seed with ``extra`` appended as the last lines of its EVOLVE-BLOCK."""
    return CIRCLE_PACKING.replace(END_OF_BODY, "    return centers\n" + extra.rstrip("\n") + "\n# EVOLVE-BLOCK-END")


HOSTILE = {
    "decorator_on_fixed_function": "@lambda f: (lambda centers: [0.0001] * len(centers))",
    "decorator_chain_on_fixed_function": "def boost(f):\n    return lambda c: [0.2] * len(c)\n@boost",
    "rebind_fixed_function": "max_radii = lambda centers: [0.2] * len(centers)",
    "redefine_fixed_function": "def run_packing():\n    return [], [], 99.0",
    "rebind_by_tuple_target": "max_radii, other = (lambda c: [1] * len(c)), 0",
    "rebind_by_walrus": "_ = (max_radii := lambda c: [1] * len(c))",
    "rebind_by_for_target": "for max_radii in [lambda c: [1] * len(c)]:\n    pass",
    "rebind_by_import": "from os import getcwd as max_radii",
    "rebind_fixed_import": "import cmath as math",
    "rebind_by_with": "import contextlib\nwith contextlib.nullcontext(lambda c: [1]*len(c)) as max_radii:\n    pass",
    "rebind_by_except": "try:\n    raise ValueError\nexcept ValueError as max_radii:\n    pass",
    "delete_fixed_name": "del max_radii",
    "global_in_function": "def construct_packing():\n    global max_radii\n    max_radii = lambda c: [1] * len(c)\n"
                          "    return [(0.5, 0.5)]",
    "globals_write": "globals()['max_radii'] = lambda c: [1] * len(c)",
    "globals_update": "globals().update(max_radii=lambda c: [1] * len(c))",
    "globals_in_function": "def helper():\n    g = globals()\n    g['max_radii'] = len\nhelper()",
    "vars_write": "vars()['max_radii'] = len",
    "module_locals": "locals()['max_radii'] = len",
    "sys_modules_setattr": "import sys\nsetattr(sys.modules[__name__], 'max_radii', len)",
    "sys_modules_alias": "import sys as s\nmods = s.modules\nmods[__name__].max_radii = len",
    "builtins_write": "import builtins\nbuiltins.min = lambda *a: 0.3",
    "builtins_from_import": "from builtins import min as _m",
    "dunder_builtins": "__builtins__ = {'min': lambda *a: 0.3}",
    "dunder_builtins_item": "__builtins__['min'] = max",
    "shadow_builtin_used_outside": "def min(*args):\n    return 0.3",
    "patch_module_used_outside": "math.hypot = lambda *a: 10.0",
    "patch_module_setattr": "setattr(math, 'hypot', lambda *a: 10.0)",
    "patch_module_alias": "m = math\nm.hypot = lambda *a: 10.0",
    "patch_in_function": "def construct_packing():\n    math.hypot = lambda *a: 10.0\n    return [(0.5, 0.5)]",
    "patch_fixed_function_code": "max_radii.__code__ = (lambda centers: [0.2] * len(centers)).__code__",
    "patch_fixed_function_defaults": "run_packing.__defaults__ = (1,)",
    "exec_string": "exec('max_radii = lambda c: [1] * len(c)')",
    "eval_string": "eval(compile('max_radii = len', 'x', 'exec'))",
    "dunder_import": "__import__('builtins').min = max",
    "getattr_import_chain": "getattr(__import__('math'), 'pi')",
    "frame_walk": "import sys\nsys._getframe(0).f_globals['max_radii'] = len",
    "inspect_frame": "import inspect\ninspect.currentframe().f_globals['max_radii'] = len",
    "gc_referrers": "import gc\nfor o in gc.get_objects():\n    pass",
    "star_import": "from math import *",
    "module_getattr": "def __getattr__(name):\n    return len",
    "ctypes": "import ctypes",
    "nested_alias": "a = math\nb = a\nb.hypot = abs",
    "augassign_module_attr": "math.pi += 1",
    "delete_module_attr": "del math.hypot",
    "getattr_modules": "import sys\ngetattr(sys, 'modules')[__name__].max_radii = len",
    "getattr_globals_alias": "g = getattr(max_radii, '__glo' 'bals__')\ng['max_radii'] = len",
    "getattr_computed_name": "import sys\nname = 'mod' + 'ules'\nm = getattr(sys, name)",
    "object_setattr": "object.__setattr__(max_radii, 'x', 1)",
    "subscript_on_builtins_alias": "b = __builtins__\nb['min'] = max",
}

HONEST = {
    "plain_edit": "",
    "helper_function": "def spread(c):\n    return [(x * 0.99, y) for x, y in c]",
    "local_mutation": "def build():\n    pts = []\n    pts.append((0.1, 0.1))\n    pts[0] = (0.2, 0.2)\n    return pts",
    "reimport_same_module": "import math",
    "new_import": "import random\nimport numpy as np\nX = np.append(np.zeros(2), 1.0)",
    "module_level_cache": "CACHE = {}\nCACHE['k'] = 1\nCACHE.update(j=2)",
    "class_with_attrs": "class Grid:\n    def __init__(self):\n        self.n = 3\n        self.cells = []\n"
                        "    def add(self, c):\n        self.cells.append(c)",
    "decorated_block_function": "import functools\n@functools.lru_cache(maxsize=None)\ndef memo(k):\n    return k",
    "shadow_unused_builtin": "def sorted_pairs(x):\n    return sorted(x)\nround = 3",
    "uses_math": "R = math.hypot(0.3, 0.4) + math.pi",
    "sys_recursion": "import sys\nsys.setrecursionlimit(10000)",
    "walrus_local": "def f(xs):\n    return [y for x in xs if (y := x * 2) > 1]",
    "random_seed": "import random\nrandom.seed(0)",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_block_is_rejected(name: str) -> None:
    child = with_block_tail(HOSTILE[name])
    compile(child, "child", "exec")  # each attack is valid Python
    reason = fixed_code_violation(CIRCLE_PACKING, child)
    assert reason, f"{name} was accepted"
    assert "\n" not in reason


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_block_is_accepted(name: str) -> None:
    child = with_block_tail(HONEST[name]).replace("0.25 * math.cos", "0.26 * math.cos")
    compile(child, "child", "exec")
    assert fixed_code_violation(CIRCLE_PACKING, child) is None, fixed_code_violations(child)


def test_block_swallowing_fixed_lines_by_indentation_is_rejected() -> None:
    parent = "def f(x):\n    # EVOLVE-BLOCK-START\n    y = x\n    # EVOLVE-BLOCK-END\n    return check(y)\n"
    child = "def f(x):\n    # EVOLVE-BLOCK-START\n    y = x\n    if False:\n    # EVOLVE-BLOCK-END\n        return check(y)\n    return 1\n"
    compile(child, "c", "exec")
    assert "crosses an EVOLVE-BLOCK marker" in fixed_code_violation(parent, child)


def test_block_inside_a_function_may_not_rebind_its_fixed_locals() -> None:
    parent = ("def score(xs):\n    limit = 10\n    # EVOLVE-BLOCK-START\n    total = sum(xs)\n"
              "    # EVOLVE-BLOCK-END\n    return min(total, limit)\n")
    assert fixed_code_violation(parent, parent.replace("total = sum(xs)", "total = sum(xs) * 2")) is None
    bad = parent.replace("total = sum(xs)", "total = sum(xs)\n    limit = 10**9")
    assert "rebinds 'limit'" in fixed_code_violation(parent, bad)


@pytest.mark.parametrize("edit", ["LIMITS.fill(9.0)", "LIMITS[0] = 9.0", "LIMITS += 1", "CONFIG.update(n=99)",
                                  "CONFIG['n'] = 99", "alias = CONFIG\nalias['n'] = 99", "del CONFIG['n']"])
def test_block_may_not_mutate_data_of_the_fixed_code(edit: str) -> None:
    parent = ("import numpy as np\nLIMITS = np.ones(3)\nCONFIG = {'n': 26}\n# EVOLVE-BLOCK-START\n"
              "def solve():\n    return LIMITS.sum() + CONFIG['n']\n# EVOLVE-BLOCK-END\n"
              "def check(v):\n    return v <= LIMITS.sum() + CONFIG['n']\n")
    child = parent.replace("# EVOLVE-BLOCK-END", edit + "\n# EVOLVE-BLOCK-END")
    compile(child, "c", "exec")
    assert fixed_code_violation(parent, child), edit
    local = parent.replace("# EVOLVE-BLOCK-END", "mine = dict(CONFIG)\nmine['n'] = 99\n# EVOLVE-BLOCK-END")
    assert fixed_code_violation(parent, local) is None


def test_block_in_a_class_body_may_not_replace_fixed_methods() -> None:
    parent = ("class Solver:\n    def check(self, v):\n        return v < 1\n    # EVOLVE-BLOCK-START\n"
              "    def solve(self):\n        return 0.5\n    # EVOLVE-BLOCK-END\n")
    bad = parent.replace("        return 0.5\n", "        return 0.5\n    def check(self, v):\n        return True\n")
    assert "rebinds 'check'" in fixed_code_violation(parent, bad)


def test_violations_the_parent_already_has_are_not_held_against_the_child() -> None:
    parent = with_block_tail("import builtins")
    child = parent.replace("0.25 * math.cos", "0.3 * math.cos")
    assert fixed_code_violations(child) and fixed_code_violation(parent, child) is None


def test_programs_without_markers_are_evolvable_as_a_whole() -> None:
    assert fixed_code_violations("def f():\n    return 1\nf = len\n") == {}
    assert fixed_code_violations("import sys\nglobals()['x'] = sys.modules\nprint(1)") == {}  # no final newline


def test_diff_operator_rejects_a_decorator_attack_as_a_failed_candidate() -> None:
    parent = Program(code=CIRCLE_PACKING, run_id="r")
    reply = ("<<<<<<< SEARCH\n    return centers\n=======\n    return centers\n"
             "@lambda f: (lambda centers: [0.0001] * len(centers))\n>>>>>>> REPLACE\n")

    ctx = MutationContext(rng=np.random.default_rng(0))

    async def go(backend: OpenAIBackend):
        try:
            return await DiffMutation().propose(parent, ctx, backend)
        finally:
            await backend.aclose()

    with ScriptedServer(lambda r: reply) as server:
        (cand,) = asyncio.run(go(OpenAIBackend(api_base=server.url, model="m")))
    assert cand.code is None and "crosses an EVOLVE-BLOCK marker" in cand.error
