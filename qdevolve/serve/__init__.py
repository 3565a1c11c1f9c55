"""``qdevolve serve``: a read-only web viewer of a lineage database.

Pages: ``/`` (runs and the lineage tree of one), ``/programs/<id>``, ``/runs/<id>/archive``,
``/runs/<id>/policy``; a JSON API under ``/api``. The database is opened read-only; the pages
poll it and update while a run writes. See ``docs/serve.md``.

Example::

    from qdevolve.serve import create_app
    import uvicorn
    uvicorn.run(create_app("archives/run.sqlite"), host="127.0.0.1", port=8765)
"""

from qdevolve.serve.app import CSP, create_app
from qdevolve.serve.db import ReadOnlyDB

__all__ = ["create_app", "ReadOnlyDB", "CSP"]
