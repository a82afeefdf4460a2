"""Hidden tests of 003-broken-ladder: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N, MAX_M = 10**6, 10**5
rng = random.Random(3003)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, n, broken):
    broken = list(broken)
    rng.shuffle(broken)
    (out / f"{name}.in").write_text(f"{n} {len(broken)}\n{' '.join(map(str, broken))}\n")


write("01-one-step", 1, [])
write("02-medium-free", 45, [])  # exponential recursion is already too slow here
write("03-roof-broken", 10, [10])
write("04-two-in-a-row", 20, [7, 8])  # two adjacent broken steps: no way at all
write("05-first-broken", 30, [1])
write("06-small-random", 60, rng.sample(range(1, 61), 12))
write("07-max-free", MAX_N, [])  # the count overflows 64 bits without the modulus
write("08-max-random", MAX_N, rng.sample(range(1, MAX_N + 1), MAX_M))
write("09-max-every-third", MAX_N, range(3, 3 * MAX_M + 1, 3))
write("10-max-only-last-free", MAX_N, range(MAX_N - MAX_M, MAX_N))
write("11-max-sparse", MAX_N, rng.sample(range(1, MAX_N + 1), 50))
write("12-min-broken", 1, [1])
