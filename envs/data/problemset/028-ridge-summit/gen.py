"""Hidden tests for Ridge Summit: `python gen.py OUTDIR`; each input is `n p seed` for the interactor."""
import os
import random
import sys

rng = random.Random(2808)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = 10**6
cases = [(1, 1), (2, 1), (2, 2), (3, 2), (N, 1), (N, N), (N, N // 2), (N, N // 2 + 1), (N, 2), (N, N - 1),
         (N, rng.randint(1, N)), (N, rng.randint(1, N)), (999999, 524288), (524288, 262144),
         (rng.randint(1, 100), 1)]
for t, (n, p) in enumerate(cases, 1):
    with open(os.path.join(out, f"{t:02d}.in"), "w") as f:
        f.write(f"{n} {min(p, n)} {rng.randint(0, 10**6)}\n")
