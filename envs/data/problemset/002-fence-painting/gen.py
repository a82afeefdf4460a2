"""Hidden tests of 002-fence-painting: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N = 200_000
rng = random.Random(2002)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, s):
    (out / f"{name}.in").write_text(f"{len(s)}\n{s}\n")


def runs(n, max_run):
    """Runs of random colours with random lengths: a run of length L needs L // 2 repaints."""
    parts, total = [], 0
    while total < n:
        length = min(rng.randint(1, max_run), n - total)
        colour = rng.choice([c for c in "RGB" if not parts or c != parts[-1][0]])
        parts.append(colour * length)
        total += length
    return "".join(parts)


write("01-one", "R")
write("02-two-equal", "GG")
write("03-small-random", "".join(rng.choice("RGB") for _ in range(10)))
write("04-max-one-colour", "B" * MAX_N)
write("05-max-random", "".join(rng.choice("RGB") for _ in range(MAX_N)))
write("06-max-runs", runs(MAX_N, 7))
write("07-max-long-runs", runs(MAX_N, 1000))
# a repaint that only looks left (next colour after the left neighbour) collides with the right neighbour here
write("08-max-left-only-trap", ("RRG" * (MAX_N // 3 + 1))[:MAX_N])
write("09-max-alternating", ("RG" * MAX_N)[:MAX_N])
write("10-max-pairs", "".join(c * 2 for c in ("RGBGRB" * MAX_N))[:MAX_N])
write("11-max-odd-runs", runs(MAX_N - 1, 3))
write("12-three-equal", "RRR")
