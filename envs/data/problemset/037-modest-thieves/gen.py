"""Hidden tests for Modest Thieves: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3717)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, A = 200000, 10**18


def write(name, cases):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(cases)}\n" + "".join(f"{len(a)}\n{' '.join(map(str, a))}\n" for a in cases))


def grundy(x):
    while x % 2 and x > 1:
        x //= 2
    return x // 2


def losing(n, hi):
    """n random chests, the last one fixed so that the Grundy values XOR to 0 when possible."""
    a = [rng.randint(1, hi) for _ in range(n - 1)]
    g = 0
    for x in a:
        g ^= grundy(x)
    a.append(2 * g if 1 <= 2 * g <= hi else rng.randint(1, hi))
    return a


write("01", [[1]])
write("02", [[x] for x in range(1, 10001)])
write("03", [[rng.randint(1, A) for _ in range(N)]])
write("04", [losing(20, A) for _ in range(10000)])
write("05", [losing(rng.randint(1, 40), 64) for _ in range(5000)])
write("06", [[2 ** 59 - 1, 2 ** 58 - 1, 2 ** rng.randint(1, 59) + 1] for _ in range(10000)])
write("07", [[A] * N])
write("08", [[rng.randint(1, 16) for _ in range(rng.randint(1, 4))] for _ in range(10000)])
write("09", [losing(N // 10, 10**9) for _ in range(10)])
write("10", [[(2 ** rng.randint(1, 30)) * (2 ** rng.randint(1, 28) - 1) + 2 ** rng.randint(0, 5) - 1 for _ in range(20)]
             for _ in range(10000)])
write("11", [[3, 5], [2, 7], [6, 12], [5, 2], [9, 4], [1, 1], [15, 1], [10, 5]])
