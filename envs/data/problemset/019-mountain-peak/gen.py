"""Hidden tests of 019-mountain-peak: `python gen.py OUTDIR` (each input: n, then the altitudes)."""
import random
import sys
from pathlib import Path

MAX_N, MAX_H = 10**5, 10**9
rng = random.Random(19019)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, h):
    (out / f"{name}.in").write_text(f"{len(h)}\n{' '.join(map(str, h))}\n")


def mountain(n, peak):
    """Distinct random altitudes: the peak gets the highest, the rest split into an ascent and a descent."""
    values = sorted(rng.sample(range(1, MAX_H + 1), n))
    top, rest = values[-1], values[:-1]
    rng.shuffle(rest)
    up, down = sorted(rest[:peak - 1]), sorted(rest[peak - 1:], reverse=True)
    return up + [top] + down


write("01-one-post", [7])
write("02-two-down", [9, 3])
write("03-two-up", [3, 9])
write("04-max-peak-first", mountain(MAX_N, 1))
write("05-max-peak-last", mountain(MAX_N, MAX_N))
write("06-max-peak-middle", mountain(MAX_N, MAX_N // 2))
write("07-max-random-peak", mountain(MAX_N, rng.randint(1, MAX_N)))
write("08-max-peak-second", mountain(MAX_N, 2))
write("09-max-peak-before-last", mountain(MAX_N, MAX_N - 1))
write("10-small", mountain(10, 6))
write("11-max-minus-one", mountain(MAX_N - 1, rng.randint(1, MAX_N - 1)))
write("12-max-random-peak-2", mountain(MAX_N, rng.randint(1, MAX_N)))
