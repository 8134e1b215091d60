"""Small statistics shared by every app: intervals for proportions."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion (Wilson 1927; Newcombe 1998, method 3).

    Unlike the normal approximation it stays inside [0, 1] and is usable for
    rates near 0 or 1 and for small samples. None when there is nothing to
    estimate from (n == 0).
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # Clamp rounding noise at the ends (p == 0 or 1 gives exactly 0 or 1 in theory).
    return max(0.0, centre - half), min(1.0, centre + half)


def proportion(successes: int, n: int) -> dict:
    """A proportion as the reports show it: value, counts and Wilson 95% interval."""
    interval = wilson_interval(successes, n)
    return {
        "successes": successes,
        "n": n,
        "value": successes / n if n else None,
        "ci95": list(interval) if interval else None,
    }
