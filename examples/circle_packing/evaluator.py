"""Evaluator for circle packing: score = sum of radii of a strictly valid packing of 26 circles.

Validation has zero tolerance (ShinkaEvolve issue #73 shows what a tolerance invites):
every circle lies inside the unit square (x - r >= 0, x + r <= 1, same for y), no two
circles overlap (distance >= r_i + r_j), radii are finite and non-negative, and there are
exactly 26 circles. An invalid packing scores 0 with the reason in the artifacts.
"""

import importlib.util
import math
import statistics

N_CIRCLES = 26
BEST_KNOWN = 2.635  # best known sum of radii for 26 circles (AlphaEvolve, 2025)


def _load(program_path):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate(centers, radii):
    """Return None when the packing is valid, else the first violation found."""
    if len(centers) != N_CIRCLES or len(radii) != N_CIRCLES:
        return f"expected {N_CIRCLES} circles, got {len(centers)} centres and {len(radii)} radii"
    for i, ((x, y), r) in enumerate(zip(centers, radii, strict=True)):
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (x, y, r)):
            return f"circle {i} has a non-finite value"
        if r < 0:
            return f"circle {i} has a negative radius"
        if x - r < 0 or x + r > 1 or y - r < 0 or y + r > 1:
            return f"circle {i} at ({x:.6f}, {y:.6f}) r={r:.6f} leaves the unit square"
    for i in range(N_CIRCLES):
        for j in range(i + 1, N_CIRCLES):
            if math.dist(centers[i], centers[j]) < radii[i] + radii[j]:
                return f"circles {i} and {j} overlap"
    return None


def _features(centers, radii):
    """Behaviour descriptors: spread of the radii and how many circles touch the border."""
    finite = [r for r in radii if math.isfinite(r)] or [0.0]
    mean_r = sum(finite) / len(finite)
    cv = statistics.pstdev(finite) / mean_r if mean_r > 0 else 0.0
    edge = sum(1 for (x, y), r in zip(centers, radii, strict=False)
               if math.isfinite(x + y + r) and min(x - r, y - r, 1 - x - r, 1 - y - r) < 1e-3)
    return {"radius_cv": min(cv, 1.5), "edge_fraction": edge / max(len(radii), 1)}


def evaluate(program_path):
    module = _load(program_path)
    centers, radii, reported = module.run_packing()
    centers = [(float(x), float(y)) for x, y in centers]
    radii = [float(r) for r in radii]
    problem = validate(centers, radii)
    features = _features(centers, radii)
    if problem is not None:
        return {"combined_score": 0.0, "validity": 0.0, "sum_radii": 0.0, "features": features,
                "artifacts": {"validation": problem}}
    total = sum(radii)
    return {
        "combined_score": total,
        "validity": 1.0,
        "sum_radii": total,
        "target_ratio": total / BEST_KNOWN,
        "features": features,
        "artifacts": {"report": f"valid packing, sum of radii {total:.6f} "
                                f"({100 * total / BEST_KNOWN:.1f}% of the best known {BEST_KNOWN})"},
    }
