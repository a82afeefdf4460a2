"""Hidden tests for Storm Bridges: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3111)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = M = 200000


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, n, edges, closing):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{n} {len(edges)} {len(closing)}\n" + "".join(f"{u} {v}\n" for u, v in edges)
                + " ".join(map(str, closing)) + "\n")


def closing_all(m, q):
    order = list(range(1, m + 1))
    rng.shuffle(order)
    return order[:q]


write("01", 1, [(1, 1)], [1])
path = [(i, i + 1) for i in range(1, N)] + [(1, 1)]
write("02", N, path, closing_all(len(path), len(path)))  # a path cut everywhere: quadratic recounting is slow
write("03", N, path, list(range(len(path) - 1, 0, -1)) + [len(path)])  # merges chains in a long line
write("04", N, [(ri(1, N), ri(1, N)) for _ in range(M)], closing_all(M, M))
write("05", N, [(ri(1, 1000), ri(1, 1000)) for _ in range(M)], closing_all(M, M))  # many repeated bridges
write("06", N, [(ri(1, N), ri(1, N)) for _ in range(M)], closing_all(M, M // 2))
star = [(1, i) for i in range(2, N + 1)] + [(2, 3)]
write("07", N, star, closing_all(len(star), len(star)))
write("08", 10, [(ri(1, 10), ri(1, 10)) for _ in range(M)], closing_all(M, M))  # cycles inside zones
write("09", N, [(i, i) for i in range(1, M + 1)], closing_all(M, M))
for t in range(10, 14):
    n = ri(1, 8)
    m = ri(1, 12)
    write(f"{t}", n, [(ri(1, n), ri(1, n)) for _ in range(m)], closing_all(m, ri(1, m)))
