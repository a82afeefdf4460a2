"""Hidden tests of 006-three-divisors: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_Q, MAX_R = 10**5, 10**12
rng = random.Random(6006)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
BIG_PRIMES = [999983, 999979, 999961, 999959, 999953]  # the largest primes below 10^6
SQUARES_OF_COMPOSITES = [999999 ** 2, 999998 ** 2, 10**12, 4 * 999983]


def write(name, queries):
    lines = [str(len(queries))] + [f"{l} {r}" for l, r in queries]
    (out / f"{name}.in").write_text("\n".join(lines) + "\n")


def segment(hi):
    l = rng.randint(1, hi)
    return l, rng.randint(l, hi)


write("01-min", [(1, 1), (1, 3), (4, 4), (5, 8), (9, 9), (1, 4)])
write("02-small-all", [(l, r) for l in range(1, 40) for r in range(l, 40)])
write("03-prime-square-edges", [(p * p + d, p * p + e) for p in BIG_PRIMES for d in (-1, 0, 1) for e in (-1, 0, 1)
                                if d <= e] + [(x, x) for x in SQUARES_OF_COMPOSITES])
write("04-max-whole-range", [(1, MAX_R)] * MAX_Q)  # a per-question sieve or loop is far too slow
write("05-max-random", [segment(MAX_R) for _ in range(MAX_Q)])
write("06-max-short", [(l, l + rng.randint(0, 1000)) for l in (rng.randint(1, MAX_R - 1000) for _ in range(MAX_Q))])
write("07-max-small-values", [segment(10**6) for _ in range(MAX_Q)])
write("08-max-squares", [(k * k, k * k) for k in (rng.randint(1, 10**6) for _ in range(MAX_Q))])
write("09-max-around-top", [(MAX_R - rng.randint(0, 10**9), MAX_R) for _ in range(MAX_Q)])
write("10-max-mixed", [segment(10 ** rng.randint(1, 12)) for _ in range(MAX_Q)])
write("11-one-question", [(2, MAX_R)])
