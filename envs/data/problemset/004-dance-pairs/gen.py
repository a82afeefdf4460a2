"""Hidden tests of 004-dance-pairs: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N, MAX_H, MAX_D = 200_000, 2 * 10**9, 10**9
rng = random.Random(4004)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, a, b, d):
    (out / f"{name}.in").write_text(f"{len(a)} {len(b)} {d}\n{' '.join(map(str, a))}\n{' '.join(map(str, b))}\n")


def heights(k, lo, hi):
    return [rng.randint(lo, hi) for _ in range(k)]


write("01-min", [1], [1], 0)
write("02-min-apart", [1], [2 * 10**9], 10**9)
write("03-small-random", heights(8, 1, 20), heights(9, 1, 20), 2)
# sorting only one side: the closest unused partner in input order is not the right one
write("04-greedy-trap", [3, 1, 2, 5, 4] * 2, [4, 2, 6, 3, 1, 5] * 2, 1)
write("05-max-dense", heights(MAX_N, 1, 10**6), heights(MAX_N, 1, 10**6), 3)
write("06-max-sparse", heights(MAX_N, 1, MAX_H), heights(MAX_N, 1, MAX_H), 5000)
# heights near 2*10^9 with d = 10^9: a + d passes 2^31
write("07-max-tall", heights(MAX_N, MAX_H - 10**6, MAX_H), heights(MAX_N, MAX_H - 3 * 10**6, MAX_H), MAX_D)
write("08-max-unbalanced", heights(MAX_N, 1, MAX_H), heights(1000, 1, MAX_H), 10**7)
write("09-max-all-equal", [10**9] * MAX_N, [10**9] * MAX_N, 0)
write("10-max-two-bands", heights(MAX_N, 1, 1000), heights(MAX_N, 10**9, 10**9 + 1000), 10**9 - 2000)
write("11-max-interleaved", [2 * i + 1 for i in range(MAX_N)], [2 * i for i in range(MAX_N)][::-1], 1)
write("12-tall-overflow", [2 * 10**9 - 5, 2 * 10**9], [1_500_000_000, 2 * 10**9 - 7], 10**9)
