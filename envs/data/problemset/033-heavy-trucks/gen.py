"""Hidden tests for Heavy Trucks: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3313)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = Q = 200000
W = 10**9


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, n, parent_of, weight, queries):
    label = list(range(1, n + 1))
    rng.shuffle(label)
    roads = [f"{label[i - 1]} {label[parent_of(i) - 1]} {weight(i)}\n" for i in range(2, n + 1)]
    rng.shuffle(roads)
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{n} {len(queries)}\n" + "".join(roads)
                + "".join(f"{label[a - 1]} {label[b - 1]}\n" for a, b in queries))


def pairs(n, q, lo=1, hi=None):
    res = []
    while len(res) < q:
        a, b = ri(lo, hi or n), ri(lo, hi or n)
        if a != b:
            res.append((a, b))
    return res


write("01", 2, lambda i: 1, lambda i: 5, [(1, 2), (2, 1)])
# a path, queries between its ends: naive climbing is O(n) per truck
write("02", N, lambda i: i - 1, lambda i: ri(1, W), [(1, N), (N, 1)] * (Q // 2))
write("03", N, lambda i: i - 1, lambda i: W - i, pairs(N, Q))
write("04", N, lambda i: ri(1, i - 1), lambda i: ri(1, W), pairs(N, Q))
write("05", N, lambda i: i // 2, lambda i: ri(1, W), pairs(N, Q))
# two long arms under the root: the minimum sits on the last edge into the meeting point
half = N // 2
write("06", N, lambda i: 1 if i in (2, half + 1) else i - 1, lambda i: 1 if i in (2, half + 1) else W,
      [(ri(2, half), ri(half + 1, N)) for _ in range(Q)])
write("07", N, lambda i: 1, lambda i: ri(1, W), pairs(N, Q))
write("08", N, lambda i: ri(max(1, i - 2), i - 1), lambda i: ri(1, 3), pairs(N, Q))
write("09", N, lambda i: i - 1 if i <= half else ri(1, half), lambda i: ri(1, W), pairs(N, Q))
for t in range(10, 14):
    n = ri(2, 9)
    write(f"{t}", n, lambda i: ri(1, i - 1), lambda i: ri(1, 20), pairs(n, 10))
