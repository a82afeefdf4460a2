"""Hidden tests of 001-even-split: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_SUM_N = 200_000
rng = random.Random(1001)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, cases):
    lines = [str(len(cases))]
    for a in cases:
        lines += [str(len(a)), " ".join(map(str, a))]
    (out / f"{name}.in").write_text("\n".join(lines) + "\n")


def balanced(n, hi):
    """A row with an agreeing cut: a random left part, then the same weights shuffled (and a 0 when n is odd)."""
    left = [rng.randint(0, hi) for _ in range(n // 2)]
    right = left[:] + [0] * (n % 2)
    rng.shuffle(right)
    return left + right


write("01-min", [[0, 0], [1, 1], [1, 2], [10**9, 10**9], [0, 7]])
write("02-small-random", [[rng.randint(0, 3) for _ in range(rng.randint(2, 8))] for _ in range(2000)])
write("03-small-balanced", [balanced(rng.randint(2, 10), 5) for _ in range(2000)])
write("04-many-tiny", [[rng.randint(0, 1), rng.randint(0, 1)] for _ in range(10_000)])
write("05-max-zeros", [[0] * MAX_SUM_N])
# all weights 10^9: totals reach 2*10^14, beyond 32-bit integers
write("06-max-big-even", [[10**9] * MAX_SUM_N])
write("07-max-big-odd", [[10**9] * (MAX_SUM_N - 1)])
write("08-max-balanced", [balanced(MAX_SUM_N, 10**9)])
middle = [rng.randint(1, 10**9) for _ in range(1000)]
write("09-max-zero-padded", [middle + [0] * (MAX_SUM_N - 2000) + middle[::-1]])
# the two sides differ by exactly 2^32 = 5 * 10^9 - 705032704: equal in 32-bit arithmetic
trap = [10**9] * 5 + [705032704]
write("10-overflow-trap", [trap, trap[::-1], [10**9] * 6, [10**9] * 3 + [0, 0]])
write("11-random-max", [[rng.randint(0, 10**9) for _ in range(MAX_SUM_N)]])
write("12-many-balanced", [balanced(20, 10**9) for _ in range(10_000)])
