"""Hidden tests for Balance Scale: `python gen.py OUTDIR`; each input is n and the hidden weights (a permutation)."""
import os
import random
import sys

rng = random.Random(2808)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def write(name, weights):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(weights)}\n{' '.join(map(str, weights))}\n")


def shuffled(n):
    p = list(range(1, n + 1))
    rng.shuffle(p)
    return p


write("01", [1])
write("02", [2, 1])
write("03", [1, 2])
write("04", [2, 3, 1])
for t in range(5, 9):
    write(f"{t:02d}", shuffled(1000))
write("09", list(range(1, 1001)))
write("10", list(range(1000, 0, -1)))
write("11", shuffled(513))  # just above a power of two: the limit is tightest relative to n log n
write("12", shuffled(512))
write("13", [2 * i + 1 for i in range(500)] + [1000 - 2 * i for i in range(500)])  # organ pipe
write("14", shuffled(999))
write("15", shuffled(rng.randint(4, 30)))
