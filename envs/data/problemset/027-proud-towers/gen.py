"""Hidden tests for Proud Towers: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2707)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, H = 200000, 10**9


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, h):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(h)}\n{' '.join(map(str, h))}\n")


write("01", [7])
write("02", [H] * (N // 2) + [1] * (N // 2))  # 10^10 pairs: beyond 32 bits
write("03", [ri(1, H) for _ in range(N)])
write("04", [ri(1, 8) for _ in range(N)])  # many pairs with h_i == 2 * h_j exactly
write("05", [2 ** (30 - i % 31) if 2 ** (30 - i % 31) <= H else H for i in range(N)])
write("06", list(range(N, 0, -1)))
write("07", list(range(1, N + 1)))
write("08", [H - ri(0, 3) if i % 2 else H // 2 - ri(0, 3) for i in range(N)])
write("09", [H] * N)
for t in range(10, 14):
    write(f"{t}", [ri(1, 20) for _ in range(ri(1, 12))])
