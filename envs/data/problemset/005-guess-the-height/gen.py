"""Hidden tests of 005-guess-the-height: `python gen.py OUTDIR` (each input: `n x`, read by the interactor)."""
import random
import sys
from pathlib import Path

MAX_N = 10**9
rng = random.Random(5005)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
cases = [(1, 1), (2, 1), (2, 2), (100, 100), (MAX_N, 1), (MAX_N, MAX_N), (MAX_N, MAX_N - 1),
         (2**29 + 1, 2**29 + 1), (MAX_N, rng.randint(1, MAX_N)), (MAX_N, rng.randint(1, MAX_N)),
         (rng.randint(1, MAX_N), None), (1000, 999), (MAX_N, 2**29)]
for number, (n, x) in enumerate(cases, start=1):
    x = x if x is not None else rng.randint(1, n)
    (out / f"{number:02d}.in").write_text(f"{n} {x}\n")
