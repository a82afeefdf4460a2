"""Hidden tests for Courier Hubs: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2505)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, W = 200000, 10**6


def ri(lo, hi):
    """A uniform integer in [lo, hi]."""
    return lo + int(rng.random() * (hi - lo + 1))


def write(name, n, parent_of, weight):
    """parent_of(i) for i = 2..n gives a tree; labels are shuffled."""
    label = list(range(1, n + 1))
    rng.shuffle(label)
    lines = [f"{label[i - 1]} {label[parent_of(i) - 1]} {weight()}\n" for i in range(2, n + 1)]
    rng.shuffle(lines)
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{n}\n" + "".join(lines))


write("01", 2, lambda i: 1, lambda: W)
write("02", N, lambda i: i - 1, lambda: W)  # a path: sums near 2 * 10^16, deep recursion
write("03", N, lambda i: 1, lambda: W)  # a star
write("04", N, lambda i: ri(1, i - 1), lambda: ri(1, W))
write("05", N, lambda i: ri(max(1, i - 3), i - 1), lambda: ri(1, W))
write("06", N, lambda i: i // 2, lambda: ri(1, 10))
write("07", N, lambda i: i - 1 if i <= N // 2 else ri(1, N // 2), lambda: W)  # a broom
write("08", N, lambda i: i - 1, lambda: 1)
for t in range(9, 13):
    write(f"{t:02d}", ri(1, 10), lambda i: ri(1, i - 1), lambda: ri(1, 9))
