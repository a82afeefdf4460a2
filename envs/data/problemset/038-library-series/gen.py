"""Hidden tests for Library Series: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3818)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = Q = 200000


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, c, lists):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(c)} {len(lists)}\n{' '.join(map(str, c))}\n" + "".join(f"{l} {r}\n" for l, r in lists))


def lists(n, q, min_len=1):
    res = []
    for _ in range(q):
        l = ri(1, n - min_len + 1)
        res.append((l, ri(l + min_len - 1, n)))
    return res


write("01", [7], [(1, 1)])
write("02", [ri(1, 10**9) for _ in range(N)], [(1, N)] * Q)  # whole-shelf lists: per-list sets are quadratic
write("03", [ri(1, 10**9) for _ in range(N)], lists(N, Q))
write("04", [ri(1, 100) for _ in range(N)], lists(N, Q))
write("05", [ri(1, 5) for _ in range(N)], lists(N, Q))
write("06", [10**9] * N, lists(N, Q))
write("07", [i % 1000 + 1 for i in range(N)], lists(N, Q, N // 2))
write("08", list(range(1, N + 1)), lists(N, Q))
write("09", [ri(1, 3000) for _ in range(N)], [(i, i) for i in range(1, Q + 1)])
for t in range(10, 14):
    n = ri(1, 10)
    write(f"{t}", [ri(1, 4) for _ in range(n)], lists(n, 10))
