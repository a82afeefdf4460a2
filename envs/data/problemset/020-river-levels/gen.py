"""Hidden tests of 020-river-levels: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX, MAX_V = 200_000, 10**9
rng = random.Random(20020)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, a, events):
    lines = [f"{len(a)} {len(events)}", " ".join(map(str, a))] + [" ".join(map(str, e)) for e in events]
    (out / f"{name}.in").write_text("\n".join(lines) + "\n")


def stretch(n, wide=False):
    if wide:
        return 1, n
    l = rng.randint(1, n)
    return l, rng.randint(l, n)


def events(n, q, add_share=0.5, wide=False, x_range=(-MAX_V, MAX_V)):
    result = []
    for _ in range(q):
        l, r = stretch(n, wide)
        if rng.random() < add_share:
            result.append((1, l, r, rng.randint(*x_range)))
        else:
            result.append((2, l, r))
    return result


def levels(n):
    return [rng.randint(-MAX_V, MAX_V) for _ in range(n)]


write("01-min", [5], [(2, 1, 1), (1, 1, 1, -7), (2, 1, 1)])
write("02-small-random", levels(8), events(8, 30))
write("03-max-random", levels(MAX), events(MAX, MAX))
write("04-max-wide", levels(MAX), events(MAX, MAX, wide=True))  # every event spans the river: naive is O(nq)
# rising floods: levels climb to 10^9 + 2*10^5 * 10^9 = about 2*10^14, beyond 32 bits
write("05-max-rising", [MAX_V] * MAX, events(MAX, MAX, 0.5, True, (MAX_V, MAX_V)))
write("06-max-falling", [-MAX_V] * MAX, events(MAX, MAX, 0.7, False, (-MAX_V, -MAX_V // 2)))
write("07-max-queries-only", levels(MAX), events(MAX, MAX, 0.0))
write("08-max-updates-then-query", levels(MAX), events(MAX, MAX - 1, 1.0) + [(2, 1, MAX)])
write("09-max-point-events", levels(MAX), [(1, i, i, rng.randint(-MAX_V, MAX_V)) if rng.random() < 0.5
                                           else (2, i, i) for i in (rng.randint(1, MAX) for _ in range(MAX))])
write("10-max-small-changes", levels(MAX), events(MAX, MAX, 0.5, False, (-3, 3)))
write("11-one-gauge", [0], events(1, MAX, 0.5, False, (-MAX_V, MAX_V)))
