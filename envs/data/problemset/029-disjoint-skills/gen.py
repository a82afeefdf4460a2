"""Hidden tests for Disjoint Skills: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2909)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, FULL = 200000, (1 << 20) - 1


def write(name, a):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(a)}\n{' '.join(map(str, a))}\n")


def sparse(k):
    """A mask with about k random bits set."""
    m = 0
    for _ in range(k):
        m |= 1 << int(rng.random() * 20)
    return m


write("01", [0])
write("02", [FULL])
write("03", [0] * N)  # enumerating submasks of the complement costs 2^20 per developer
write("04", [int(rng.random() * (FULL + 1)) for _ in range(N)])
write("05", [sparse(2) for _ in range(N)])
write("06", [1 << (i % 20) for i in range(N)])
write("07", [sparse(1) if i % 2 else FULL ^ sparse(1) for i in range(N)])
write("08", [FULL] * N)
write("09", [sparse(4) for _ in range(N)])
for t in range(10, 14):
    write(f"{t}", [int(rng.random() * 16) for _ in range(1 + int(rng.random() * 10))])
