"""Hidden tests for Caravan Split: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(4020)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, K, A = 100000, 50, 10**4


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, k, a):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(a)} {k}\n{' '.join(map(str, a))}\n")


write("01", 1, [A])
write("02", 1, [A] * N)  # one group: 10^18, the largest possible answer
write("03", K, [ri(1, A) for _ in range(N)])
write("04", K, [A] * N)
write("05", K, [A if ri(1, 100) == 1 else 1 for _ in range(N)])  # heavy camels scattered among light ones
write("06", 37, [ri(1, 10) for _ in range(N)])
write("07", K, [A] * 10 + [1] * (N - 10))  # greedy balancing by running sum goes wrong
write("08", K, [i % A + 1 for i in range(N)])
write("09", K, [K] * K)
write("10", 2, [ri(1, A) for _ in range(N)])
write("11", K, [ri(A - 10, A) if i < N // 2 else ri(1, 10) for i in range(N)])
for t in range(12, 16):
    n = ri(1, 9)
    write(f"{t}", ri(1, n), [ri(1, 9) for _ in range(n)])
