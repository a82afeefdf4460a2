"""Hidden tests for Rising Melodies: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3212)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, A = 200000, 10**9


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, a):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(a)}\n{' '.join(map(str, a))}\n")


write("01", [5])
write("02", [x for i in range(N // 2) for x in (2 * i + 2, 2 * i + 1)])  # 2^(n/2) melodies: needs the modulus
write("03", [ri(1, A) for _ in range(N)])
write("04", list(range(1, N + 1)))
write("05", list(range(N, 0, -1)))
write("06", [ri(1, 10) for _ in range(N)])  # many equal pitches: strictness matters
write("07", [x for i in range(N // 3) for x in (3 * i + 1, 3 * i + 1, 3 * i + 2)][:N])
write("08", [A] * N)
write("09", [i // 50 * 3 + ri(1, 3) for i in range(N)])
for t in range(10, 14):
    write(f"{t}", [ri(1, 6) for _ in range(ri(1, 12))])
