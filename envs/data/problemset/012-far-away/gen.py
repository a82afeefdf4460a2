"""Hidden tests of 012-far-away: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N = 200_000
rng = random.Random(12012)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, n, edges):
    """Relabel the villages at random and shuffle the roads and their ends."""
    label = list(range(1, n + 1))
    rng.shuffle(label)
    lines = []
    for u, v in edges:
        a, b = label[u - 1], label[v - 1]
        lines.append(f"{a} {b}" if rng.random() < 0.5 else f"{b} {a}")
    rng.shuffle(lines)
    (out / f"{name}.in").write_text(f"{n}\n" + "\n".join(lines) + "\n")


def random_tree(n, spread):
    """Parent of v chosen among the `spread` previous vertices: small spread = long and thin."""
    return [(v, rng.randint(max(1, v - spread), v - 1)) for v in range(2, n + 1)]


write("01-min", 2, [(1, 2)])
write("02-small-random", 9, random_tree(9, 9))
write("03-star", 1000, [(1, v) for v in range(2, 1001)])
write("04-max-path", MAX_N, [(v, v + 1) for v in range(1, MAX_N)])  # recursion depth 2*10^5
write("05-max-random", MAX_N, random_tree(MAX_N, MAX_N))
write("06-max-thin", MAX_N, random_tree(MAX_N, 3))
write("07-max-caterpillar", MAX_N, [(v, v + 1) for v in range(1, MAX_N // 2)] +
      [(rng.randint(1, MAX_N // 2), v) for v in range(MAX_N // 2 + 1, MAX_N + 1)])
write("08-max-binary", MAX_N, [(v, v // 2) for v in range(2, MAX_N + 1)])
write("09-max-star", MAX_N, [(1, v) for v in range(2, MAX_N + 1)])
# vertex 1 hangs off the middle of a long path: it is not near either end of the diameter
spider = [(v, v + 1) for v in range(2, 1000)] + [(1, 500)] + [(1, v) for v in range(1001, 1100)]
write("10-off-centre", 1099, spider)
write("11-max-broom", MAX_N, [(v, v + 1) for v in range(1, 1000)] + [(1000, v) for v in range(1001, MAX_N + 1)])
write("12-max-medium-spread", MAX_N, random_tree(MAX_N, 100))
