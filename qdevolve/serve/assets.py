"""The viewer's third-party browser assets: pinned, fetched from the npm registry, verified.

The pages load no script or style from any other host. Apache ECharts is installed at
bootstrap (``make bootstrap`` runs ``python -m qdevolve.serve.assets``) with the npm client,
which checks the package against the registry's integrity hash; the extracted file is then
checked against the sha256 pinned here and written to a git-ignored folder beside the
viewer's own static files (``QDEVOLVE_SERVE_VENDOR`` overrides where). ``qdevolve serve``
refuses to start without it and says how to fetch it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from qdevolve.errors import QdevolveError

__all__ = ["Asset", "ASSETS", "vendor_dir", "missing_assets", "fetch_assets"]


@dataclass(frozen=True)
class Asset:
    """One file taken from an npm package tarball."""

    package: str
    version: str
    member: str  # path inside the tarball
    name: str  # file name served under /static/vendor/
    sha256: str


ASSETS: tuple[Asset, ...] = (
    Asset("echarts", "6.1.0", "package/dist/echarts.min.js", "echarts.min.js",
          "b66b25aeb4df84e33199dc21694014d336d222cbd9deb0e5a7c14bd6aa0d0fd0"),
    Asset("echarts", "6.1.0", "package/LICENSE", "echarts.LICENSE.txt",
          "634293835b43a6dd2094fa39182a3d9a6b9ca43b7fdb9ac354e8037af2a3093a"),
)


def vendor_dir() -> Path:
    """Where the fetched assets live (``QDEVOLVE_SERVE_VENDOR`` or ``qdevolve/serve/static/vendor``)."""
    env = os.environ.get("QDEVOLVE_SERVE_VENDOR")
    return Path(env) if env else Path(__file__).resolve().parent / "static" / "vendor"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def missing_assets(directory: Path | None = None) -> list[str]:
    """Names of assets absent from ``directory`` or whose content does not match its pin."""
    d = directory or vendor_dir()
    return [a.name for a in ASSETS if not (d / a.name).is_file() or _sha256(d / a.name) != a.sha256]


def fetch_assets(directory: Path | None = None) -> list[str]:
    """Fetch every missing asset with ``npm pack``; returns the names written.

    Raises:
        QdevolveError: npm is not installed, the download failed, or a file does not match
            its pinned sha256 (nothing is written then).
    """
    d = directory or vendor_dir()
    todo = [a for a in ASSETS if a.name in missing_assets(d)]
    if not todo:
        return []
    npm = shutil.which("npm")
    if npm is None:
        raise QdevolveError("qdevolve serve assets: npm is not installed; install Node.js/npm "
                            "(Debian: apt-get install npm) and run 'python -m qdevolve.serve.assets'")
    written = []
    with tempfile.TemporaryDirectory(prefix="qdevolve-assets-") as tmp:
        tarballs: dict[str, Path] = {}
        for a in todo:
            spec = f"{a.package}@{a.version}"
            if spec not in tarballs:
                proc = subprocess.run([npm, "pack", spec, "--silent", "--pack-destination", tmp],
                                      capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    raise QdevolveError(f"qdevolve serve assets: 'npm pack {spec}' failed: "
                                        f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
                tarballs[spec] = Path(tmp) / proc.stdout.strip().splitlines()[-1]
            with tarfile.open(tarballs[spec]) as tf:
                member = tf.extractfile(a.member)
                if member is None:
                    raise QdevolveError(f"qdevolve serve assets: {spec} has no {a.member}")
                data = member.read()
            digest = hashlib.sha256(data).hexdigest()
            if digest != a.sha256:
                raise QdevolveError(f"qdevolve serve assets: {spec} {a.member} has sha256 {digest}, "
                                    f"expected {a.sha256}; refusing it")
            d.mkdir(parents=True, exist_ok=True)
            tmp_out = d / (a.name + ".part")
            tmp_out.write_bytes(data)
            tmp_out.replace(d / a.name)
            written.append(a.name)
    return written


def main() -> int:
    try:
        written = fetch_assets()
    except QdevolveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    where = vendor_dir()
    print(f"qdevolve serve assets: {'fetched ' + ', '.join(written) if written else 'up to date'} in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
