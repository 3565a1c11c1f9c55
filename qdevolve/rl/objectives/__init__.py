"""Advantage objectives (kind ``objective``), one module each.

The modules are found through the ``qdevolve.objective`` entry points and imported on first
use by :data:`qdevolve.registry.objective`; this package deliberately imports none of them::

    from qdevolve import registry
    obj = registry.objective.create({"type": "ips", "alpha": 1.0})
    adv = obj.advantages(group)          # numpy float64 [G]

Built-ins: ``grpo``, ``dr_grpo``, ``reinforce_rej``, ``raft``, ``ips``, ``rare``, ``passk``,
``lad``, ``vpo``, ``entropic`` (advantages) and ``es`` (a parameter-space update). See ``docs/objectives.md``.
"""

__all__: list[str] = []
