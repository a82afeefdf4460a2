"""Hidden tests for Steady Readings: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3616)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, A = 200000, 10**9


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, k, a):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(a)} {k}\n{' '.join(map(str, a))}\n")


write("01", 0, [0])
write("02", 0, [5] * N)  # every stretch is steady: 2 * 10^10, and a quadratic scan never stops early
write("03", A, [ri(0, A) for _ in range(N)])
write("04", 10**6, [ri(0, A) for _ in range(N)])
write("05", 3, [ri(0, 10) for _ in range(N)])
walk = [A // 2]
for _ in range(N - 1):
    walk.append(min(A, max(0, walk[-1] + ri(-5, 5))))
write("06", 100, walk)
write("07", 0, [i % 2 for i in range(N)])
write("08", N // 2, list(range(N)))
write("09", 1, [A if i % 1000 == 0 else A - 1 for i in range(N)])
for t in range(10, 14):
    write(f"{t}", ri(0, 4), [ri(0, 8) for _ in range(ri(1, 12))])
