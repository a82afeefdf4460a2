"""Hidden tests of 008-warehouse-robot: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX = 500
rng = random.Random(8008)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, grid):
    (out / f"{name}.in").write_text(f"{len(grid)} {len(grid[0])}\n" + "\n".join("".join(r) for r in grid) + "\n")


def random_grid(n, m, walls, s=None, t=None):
    grid = [["#" if rng.random() < walls else "." for _ in range(m)] for _ in range(n)]
    cells = rng.sample([(r, c) for r in range(n) for c in range(m)], 2)
    (sr, sc), (tr, tc) = s or cells[0], t or cells[1]
    grid[sr][sc], grid[tr][tc] = "S", "T"
    return grid


def snake(n, m):
    """Walls on every odd row with one gap alternating at the ends: the only route walks every row."""
    grid = [["." for _ in range(m)] for _ in range(n)]
    for r in range(1, n, 2):
        grid[r] = ["#"] * m
        grid[r][m - 1 if (r // 2) % 2 == 0 else 0] = "."
    grid[0][0] = "S"
    grid[n - 1][m - 1 if (n // 2) % 2 == 0 else 0] = "T"
    return grid


write("01-min", [["S", "T"]])
write("02-open-30", random_grid(30, 30, 0.0, (0, 0), (29, 29)))  # exhaustive search explodes here
write("03-walled-off", [list("S.#.."), list("..#.T"), list("..#..")])
write("04-max-open", random_grid(MAX, MAX, 0.0))
write("05-max-walls-30", random_grid(MAX, MAX, 0.3, (0, 0), (MAX - 1, MAX - 1)))
write("06-max-snake", snake(MAX, MAX))
write("07-max-walls-45", random_grid(MAX, MAX, 0.45))
enclosed = random_grid(MAX, MAX, 0.1, (0, 0), (250, 250))
for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
    enclosed[250 + dr][250 + dc] = "#"
write("08-max-enclosed-target", enclosed)
write("09-row", [["S"] + ["."] * (MAX - 2) + ["T"]])
write("10-column", [["T"]] + [["."] for _ in range(MAX - 2)] + [["S"]])
write("11-max-walls-20", random_grid(MAX, MAX, 0.2))
write("12-small-walls", random_grid(8, 9, 0.3))
