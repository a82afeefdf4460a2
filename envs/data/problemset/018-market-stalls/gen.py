"""Hidden tests of 018-market-stalls: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N = 200_000
rng = random.Random(18018)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, k, c):
    (out / f"{name}.in").write_text(f"{len(c)} {k}\n{' '.join(map(str, c))}\n")


def kinds(n, distinct):
    names = rng.sample(range(1, 10**9 + 1), distinct)
    return [rng.choice(names) for _ in range(n)]


write("01-min", 1, [7])
write("02-all-different", 2, list(range(1, 11)))
write("03-small-random", 3, kinds(15, 5))
write("04-max-all-distinct-k-n", MAX_N, rng.sample(range(1, 10**9 + 1), MAX_N))  # quadratic extension
write("05-max-all-distinct-k-1", 1, rng.sample(range(1, 10**9 + 1), MAX_N))
write("06-max-few-kinds", 3, kinds(MAX_N, 6))
write("07-max-many-kinds", 1000, kinds(MAX_N, 5000))
write("08-max-one-kind", 1, [10**9] * MAX_N)
blocks = []
for _ in range(400):
    blocks += [rng.randint(1, 50)] * rng.randint(1, 1000)
write("09-max-blocks", 5, blocks[:MAX_N] + [1] * max(0, MAX_N - len(blocks)))
write("10-max-half-k", MAX_N // 2, kinds(MAX_N, MAX_N))
write("11-exact-k", 2, [1, 2, 1, 2, 3, 3, 3, 3, 4])
write("12-max-k-equals-kinds", 50, kinds(MAX_N, 50))
