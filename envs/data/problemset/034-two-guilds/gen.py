"""Hidden tests for Two Guilds: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3414)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = M = 200000


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def shuffled(items):
    """A random permutation of items (sorting by random keys: faster than rng.shuffle for big lists)."""
    keys = [rng.random() for _ in items]
    return [items[i] for i in sorted(range(len(items)), key=keys.__getitem__)]


def write(name, n, edges, relabel=True):
    label = shuffled(list(range(1, n + 1))) if relabel else list(range(1, n + 1))
    edges = [(label[u - 1], label[v - 1]) if rng.random() < 0.5 else (label[v - 1], label[u - 1]) for u, v in edges]
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{n} {len(edges)}\n" + "".join(f"{u} {v}\n" for u, v in edges))


def bipartite(n, m, with_sides=False):
    side = [0] + [ri(0, 1) for _ in range(n)]
    left = [v for v in range(1, n + 1) if side[v] == 0]
    right = [v for v in range(1, n + 1) if side[v] == 1]
    seen = set()
    while len(seen) < m:
        u, v = left[ri(0, len(left) - 1)], right[ri(0, len(right) - 1)]
        seen.add((u, v))
    return (side, list(seen)) if with_sides else list(seen)


write("01", 1, [])
write("02", 3, [(1, 2), (2, 3), (3, 1)])
write("03", N, bipartite(N, M))
path = [(i, i + 1) for i in range(1, N)]
# a long path ending in a triangle: the BFS tree's root is far from the odd cycle
write("04", N, path + [(N, N - 2)], relabel=False)
write("05", N, path + [(N, N - 2)])
write("06", N, path + [(1, N)])  # one huge even cycle (N edges, N even): still a split
write("07", N - 1, [(i, i + 1) for i in range(1, N - 1)] + [(1, N - 1)])  # a huge odd cycle
side, edges = bipartite(N, M - 1, with_sides=True)
same = [v for v in range(1, N + 1) if side[v] == side[1] and v != 1]
write("08", N, edges + [(1, same[ri(0, len(same) - 1)])])  # one edge inside a side closes odd cycles
seen = set()
while len(seen) < M:
    a, b = ri(1, N), ri(1, N)
    if a != b:
        seen.add((min(a, b), max(a, b)))
write("09", N, sorted(seen))
# two components: a big bipartite one and a small odd cycle far away
write("10", N, bipartite(N - 5, M - 5) + [(N - 4, N - 3), (N - 3, N - 2), (N - 2, N - 1), (N - 1, N), (N, N - 4)])
write("11", N // 4, [(i, i + 2) for i in range(1, N // 4 - 1)] + [(2, 3)] + [(1, 4)])
for t in range(12, 16):
    n = ri(3, 9)
    pairs = [(a, b) for a in range(1, n + 1) for b in range(a + 1, n + 1)]
    write(f"{t}", n, shuffled(pairs)[:ri(0, len(pairs))])
