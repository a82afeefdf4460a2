"""Hidden tests for One Free Ride: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2404)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, M, W = 100000, 200000, 10**9


def ri(lo, hi):
    """A uniform integer in [lo, hi] (faster than rng.randint for big tests)."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, n, edges):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{n} {len(edges)}\n" + "".join(f"{u} {v} {w}\n" for u, v, w in edges))


def random_graph(n, m, wlo, whi):
    perm = list(range(2, n))
    rng.shuffle(perm)
    order = [1] + perm + [n]
    edges = [(order[i], order[ri(max(0, i - 5), i - 1)], ri(wlo, whi)) for i in range(1, n)]
    while len(edges) < m:
        u, v = ri(1, n), ri(1, n)
        if u != v:
            edges.append((u, v, ri(wlo, whi)))
    rng.shuffle(edges)
    return edges


write("01", 2, [(1, 2, W)])
write("02", 2, [(2, 1, 7), (1, 2, 3)])
# a path of heavy roads: the cost is about 10^14, beyond 32 bits
write("03", N, [(i, i + 1, W) for i in range(1, N)] + [(1, 2, 1)] * (M - N + 1))
write("04", N, random_graph(N, M, 1, W))
write("05", N, random_graph(N, M, 1, 10))
write("06", N, random_graph(N, M, W - 1000, W))
# traps for "shortest path, then drop its heaviest road": many cheap balanced paths and one path with a huge road
edges = []
for k in range(2, 1000):
    edges += [(1, k, 50), (k, N, 50)]
edges += [(1, 1000, 1), (1000, N, W)]
edges += [(ri(1001, N - 1), ri(1001, N - 1), ri(1, W)) for _ in range(M - len(edges))]
write("07", N, [(u, v, w) for u, v, w in edges if u != v])
edges = [(ri(1, N - 1), ri(1, N - 1), ri(1, W)) for _ in range(M - 1)]
write("08", N, [(u, v, w) for u, v, w in edges if u != v] + [(1, 2, 1)])  # town n unreachable
write("09", N, random_graph(N, N - 1, 1, W))  # a tree
for i in range(10, 14):
    n = ri(2, 9)
    edges = [(ri(1, n), ri(1, n), ri(1, 20)) for _ in range(ri(1, 15))]
    write(f"{i}", n, [(u, v, w) for u, v, w in edges if u != v] or [(1, 2, 5)])
