"""Hidden tests of 013-road-repairs: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX = 200_000
rng = random.Random(13013)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, n, roads):
    (out / f"{name}.in").write_text(f"{n} {len(roads)}\n" + "\n".join(f"{u} {v}" for u, v in roads) + "\n")


def random_road(n):
    u, v = rng.sample(range(1, n + 1), 2)
    return u, v


write("01-min", 2, [(1, 2)])
write("02-repeats", 3, [(1, 2), (2, 1), (1, 2), (2, 3), (3, 1)])
write("03-small-random", 10, [random_road(10) for _ in range(20)])
write("04-max-random", MAX, [random_road(MAX) for _ in range(MAX)])
write("05-max-path", MAX, [(v, v + 1) for v in range(1, MAX)] + [(1, MAX)])
write("06-max-star-order", MAX, [(1, v) for v in range(2, MAX + 1)] + [(2, 3)])
write("07-max-few-towns", 1000, [random_road(1000) for _ in range(MAX)])  # mostly redundant roads
write("08-max-same-road", MAX, [(7, 8)] * MAX)
# merging two big regions last: relabelling a whole region at each merge is quadratic
halves = [(v, v + 1) for v in range(1, MAX // 2)] + [(v, v + 1) for v in range(MAX // 2 + 1, MAX)]
rng.shuffle(halves)
write("09-max-two-halves", MAX, halves + [(1, MAX)])
write("10-max-chain-backwards", MAX, [(v, v - 1) for v in range(MAX, 1, -1)] + [(5, 6)])
write("11-max-pairs-then-merge", MAX, [(2 * i + 1, 2 * i + 2) for i in range(MAX // 2)] +
      [(2 * i + 1, 2 * i + 3) for i in range(MAX // 2 - 1)][:MAX // 2])
write("12-single-town-pairs", 4, [(1, 2), (3, 4), (4, 3), (1, 3), (2, 4)])
