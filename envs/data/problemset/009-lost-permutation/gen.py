"""Hidden tests of 009-lost-permutation: `python gen.py OUTDIR` (each input: n, then the hidden permutation)."""
import random
import sys
from pathlib import Path

MAX_N = 1000
rng = random.Random(9009)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, p):
    (out / f"{name}.in").write_text(f"{len(p)}\n{' '.join(map(str, p))}\n")


def shuffled(n):
    p = list(range(1, n + 1))
    rng.shuffle(p)
    return p


write("01-min-sorted", [1, 2, 3])
write("02-min-reversed", [3, 2, 1])
write("03-min-middle-first", [2, 3, 1])
write("04-small", shuffled(7))
write("05-max-sorted", list(range(1, MAX_N + 1)))
write("06-max-reversed", list(range(MAX_N, 0, -1)))
write("07-max-random", shuffled(MAX_N))
write("08-max-random-2", shuffled(MAX_N))
write("09-max-first-is-n", [MAX_N] + shuffled(MAX_N - 1))
write("10-medium", shuffled(100))
write("11-max-minus-one", shuffled(MAX_N - 1))
