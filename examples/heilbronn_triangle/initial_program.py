"""Heilbronn's triangle problem, n = 8: place 8 points in the unit square so that the
smallest triangle any three of them form has the largest possible area.

The evolvable part returns the points. The seed is a jittered octagon (radius 0.42 about
the centre, each coordinate moved by at most 0.05 and rounded to 3 decimals), so its
smallest triangle is unique: area 0.02172, against the best known 0.072376 for n = 8.
"""

N_POINTS = 8


# EVOLVE-BLOCK-START
def place_points():
    """Return N_POINTS (x, y) points in the closed unit square."""
    points = [
        (0.946, 0.609),
        (0.724, 0.826),
        (0.418, 0.902),
        (0.178, 0.712),
        (0.086, 0.425),
        (0.309, 0.15),
        (0.562, 0.114),
        (0.862, 0.243),
    ]
    return points
# EVOLVE-BLOCK-END


if __name__ == "__main__":
    print(place_points())
