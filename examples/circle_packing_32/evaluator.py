"""Evaluator for circle packing with n = 32: score = the sum of radii of a strictly valid packing.

Validity (zero tolerance, every comparison in IEEE double precision as computed here):
exactly 32 circles; every centre coordinate and radius finite; radii >= 0; each circle inside
the closed unit square (x - r >= 0, x + r <= 1, y - r >= 0, y + r <= 1); every pair disjoint
(distance between centres >= r_i + r_j, touching allowed). The first violation found makes
the packing invalid: score 0, the reason in the artifacts. The radii the program reports are
the ones checked and summed (its own third return value is ignored).
"""

import importlib.util
import math
import statistics

N_CIRCLES = 32
RECORD = 2.939572  # best known sum of radii for n = 32 (see README.md for the sources)


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_packing(centers, radii):
    """None when the packing is valid, else the first violation (a sentence)."""
    if len(centers) != N_CIRCLES or len(radii) != N_CIRCLES:
        return f"expected {N_CIRCLES} circles, got {len(centers)} centres and {len(radii)} radii"
    for i, ((x, y), r) in enumerate(zip(centers, radii, strict=True)):
        if not all(math.isfinite(v) for v in (x, y, r)):
            return f"circle {i} has a non-finite coordinate or radius"
        if r < 0:
            return f"circle {i} has a negative radius {r!r}"
        if x - r < 0 or x + r > 1 or y - r < 0 or y + r > 1:
            return f"circle {i} at ({x:.9f}, {y:.9f}) with r = {r:.9f} leaves the unit square"
    for i in range(N_CIRCLES):
        for j in range(i + 1, N_CIRCLES):
            gap = math.dist(centers[i], centers[j]) - (radii[i] + radii[j])
            if gap < 0:
                return f"circles {i} and {j} overlap by {-gap:.3g}"
    return None


def _features(centers, radii):
    """Behaviour descriptors: spread of the radii, fraction of circles touching the border."""
    mean_r = sum(radii) / len(radii) if radii else 0.0
    cv = statistics.pstdev(radii) / mean_r if mean_r > 0 else 0.0
    edge = sum(1 for (x, y), r in zip(centers, radii, strict=False)
               if min(x - r, y - r, 1 - x - r, 1 - y - r) < 1e-3)
    return {"radius_cv": min(cv, 1.5), "edge_fraction": edge / max(len(radii), 1)}


def _plain(centers, radii):
    """Centres and radii as Python floats; raises ValueError on anything else."""
    pts = [(float(c[0]), float(c[1])) for c in centers if len(c) == 2]
    if len(pts) != len(centers):
        raise ValueError("every centre must be a pair (x, y)")
    return pts, [float(r) for r in radii]


def evaluate(program_path):
    module = _load(program_path)
    centers, radii, _reported = module.run_packing()
    try:
        centers, radii = _plain(list(centers), list(radii))
    except (TypeError, ValueError) as exc:
        return {"combined_score": 0.0, "validity": 0.0, "sum_radii": 0.0,
                "artifacts": {"validation": f"malformed output: {exc}"}}
    problem = check_packing(centers, radii)
    finite = all(math.isfinite(v) for c in centers for v in c) and all(math.isfinite(r) for r in radii)
    features = _features(centers, radii) if finite and len(radii) else {"radius_cv": 0.0, "edge_fraction": 0.0}
    if problem is not None:
        return {"combined_score": 0.0, "validity": 0.0, "sum_radii": 0.0, "features": features,
                "artifacts": {"validation": problem}}
    total = math.fsum(radii)
    return {"combined_score": total, "validity": 1.0, "sum_radii": total, "gap_to_record": RECORD - total,
            "features": features,
            "artifacts": {"report": f"valid packing, sum of radii {total:.9f}; best known {RECORD} "
                                    f"(gap {RECORD - total:.6f})"}}
