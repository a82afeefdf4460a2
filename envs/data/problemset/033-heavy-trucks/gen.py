"""Hidden tests for Heavy Trucks: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3313)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = Q = 200000
W = 10**9


def rand_ints(lo, hi, k):
    """k uniform integers in [lo, hi] (rng.choices over a range: fast for big tests)."""
    return rng.choices(range(lo, hi + 1), k=k)


def shuffled(items):
    """A random permutation of items (sorting by random keys: faster than rng.shuffle for big lists)."""
    keys = [rng.random() for _ in items]
    return [items[i] for i in sorted(range(len(items)), key=keys.__getitem__)]


def random_parents(n, window=None):
    """parents[i - 2] for vertices i = 2..n: a uniform earlier vertex, or one of the `window` previous ones."""
    if window is None:
        return [int(r * (i - 1)) + 1 for i, r in zip(range(2, n + 1), [rng.random() for _ in range(n - 1)])]
    return [i - 1 - int(r * min(window, i - 1)) for i, r in zip(range(2, n + 1), [rng.random() for _ in range(n - 1)])]


def write(name, n, parents, weights, queries):
    """parents[i - 2] is the parent of vertex i (2..n); vertex labels are shuffled."""
    label = [0] + shuffled(list(range(1, n + 1)))
    roads = [f"{label[i]} {label[p]} {w}\n" for i, p, w in zip(range(2, n + 1), parents, weights)]
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{n} {len(queries)}\n" + "".join(roads) + "".join(f"{label[a]} {label[b]}\n" for a, b in queries))


def pairs(n, q, lo=1):
    """q random pairs of different vertices in [lo, n]."""
    a, b = rand_ints(lo, n, q), rand_ints(lo, n - 1, q)
    return [(x, y + (y >= x)) for x, y in zip(a, b)]


write("01", 2, [1], [5], [(1, 2), (2, 1)])
# a path, queries between its ends: naive climbing is O(n) per truck
write("02", N, list(range(1, N)), rand_ints(1, W, N - 1), [(1, N), (N, 1)] * (Q // 2))
write("03", N // 2, list(range(1, N // 2)), [W - i for i in range(2, N // 2 + 1)], pairs(N // 2, Q // 2))
write("04", N, random_parents(N), rand_ints(1, W, N - 1), pairs(N, Q))
write("05", N, [i // 2 for i in range(2, N + 1)], rand_ints(1, W, N - 1), pairs(N, Q))
# two long arms under the root: the minimum sits on the last edge into the meeting point
half = N // 2
write("06", N, [1 if i in (2, half + 1) else i - 1 for i in range(2, N + 1)],
      [1 if i in (2, half + 1) else W for i in range(2, N + 1)],
      list(zip(rand_ints(2, half, Q), rand_ints(half + 1, N, Q))))
write("07", N, [1] * (N - 1), rand_ints(1, W, N - 1), pairs(N, Q))
write("08", N, random_parents(N, window=2), rand_ints(1, 3, N - 1), pairs(N, Q))
write("09", N, list(range(1, half)) + [int(r * half) + 1 for r in [rng.random() for _ in range(N - half)]],
      rand_ints(1, W, N - 1), pairs(N, Q))
for t in range(10, 14):
    n = rng.randint(2, 9)
    write(f"{t}", n, random_parents(n), rand_ints(1, 20, n - 1), pairs(n, 10))
