"""Hidden tests of 015-delivery-routes: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX, MAX_W = 200_000, 10**9
rng = random.Random(15015)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, n, streets):
    rng.shuffle(streets)
    lines = [f"{n} {len(streets)}"] + [f"{u} {v} {w}" for u, v, w in streets]
    (out / f"{name}.in").write_text("\n".join(lines) + "\n")


def random_streets(n, m, lo, hi):
    return [(rng.randint(1, n), rng.randint(1, n), rng.randint(lo, hi)) for _ in range(m)]


write("01-single", 1, [])
write("02-loop-only", 2, [(1, 1, 5), (2, 2, 3)])
write("03-small-random", 8, random_streets(8, 12, 1, 10))
# every street at 10^9 along a path: times reach 2*10^14, beyond 32 bits
write("04-max-heavy-path", MAX, [(v, v + 1, MAX_W) for v in range(1, MAX)] + [(1, 1, 1)])
write("05-max-random", MAX, random_streets(MAX, MAX, 1, MAX_W))
# the fewest streets are not the fastest: a direct heavy street beside a light detour
ladder = [(v, v + 1, 1) for v in range(1, MAX // 2)] + [(1, v, MAX_W) for v in range(2, MAX // 2 + 1)]
write("06-max-shortcut-trap", MAX // 2, ladder)
write("07-max-dense-small", 1000, random_streets(1000, MAX, 1, 1000))
write("08-max-half-unreachable", MAX, random_streets(MAX // 2, MAX, 1, MAX_W))
write("09-max-star", MAX, [(1, v, rng.randint(1, MAX_W)) for v in range(2, MAX + 1)])
grid_w = 400
grid = [(r * grid_w + c + 1, r * grid_w + c + 2, rng.randint(1, 100)) for r in range(grid_w // 4)
        for c in range(grid_w - 1)] + [(r * grid_w + c + 1, (r + 1) * grid_w + c + 1, rng.randint(1, 100))
                                       for r in range(grid_w // 4 - 1) for c in range(grid_w)]
write("10-grid", grid_w * grid_w // 4, grid)
write("11-max-equal-weights", MAX, random_streets(MAX, MAX, 7, 7))
write("12-parallel-streets", 3, [(1, 2, 10), (1, 2, 3), (2, 3, 4), (2, 3, 1), (1, 3, 9)])
