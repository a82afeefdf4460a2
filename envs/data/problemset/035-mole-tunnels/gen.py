"""Hidden tests for Mole Tunnels: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3515)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
S = 500


def write(name, rows):
    rows = [list(r) for r in rows]
    rows[0][0] = rows[-1][-1] = "."
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(rows)} {len(rows[0])}\n" + "".join("".join(r) + "\n" for r in rows))


def rand(n, m, p):
    return [["#" if rng.random() < p else "." for _ in range(m)] for _ in range(n)]


def snake(n, m):
    """Soil corridors joined alternately at the bottom and the top: the free path goes up and down."""
    g = [["#"] * m for _ in range(n)]
    for c in range(0, m, 2):
        for r in range(n):
            g[r][c] = "."
    for k, c in enumerate(range(1, m, 2)):
        g[n - 1 if k % 2 == 0 else 0][c] = "."
    return g


write("01", ["."])
write("02", [".#"])
write("03", snake(S, S - 1))  # right/down-only walks must grind through many walls
write("04", rand(S, S, 0.3))
write("05", rand(S, S, 0.6))
write("06", [["#"] * S for _ in range(S)])
write("07", [["."] * S for _ in range(S)])
g = snake(S, S - 1)
for r in range(1, S - 1, 7):
    g[r][2] = "."  # shortcuts that a plain BFS by steps might prefer
write("08", g)
write("09", [list(r) for r in zip(*snake(S - 1, S))])  # the snake turned on its side
write("10", rand(1, S, 0.5))
write("11", rand(S, 1, 0.5))
write("12", rand(S, S, 0.45))
for t in range(13, 17):
    write(f"{t}", rand(rng.randint(1, 7), rng.randint(1, 7), 0.5))
