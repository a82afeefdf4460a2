"""Hidden tests of 011-festival-lights: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

rng = random.Random(11011)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, state, switches):
    lines = [f"{len(state)} {len(switches)}", state]
    lines += [" ".join(map(str, [len(s)] + sorted(s))) for s in switches]
    (out / f"{name}.in").write_text("\n".join(lines) + "\n")


def random_switches(n, m, size):
    return [rng.sample(range(1, n + 1), rng.randint(1, size)) for _ in range(m)]


def solvable(n, m, size, presses):
    """A target reached by pressing `presses` random switches from the all-on state, then reversed."""
    switches = random_switches(n, m, size)
    on = [1] * n
    for j in rng.sample(range(m), presses):
        for lamp in switches[j]:
            on[lamp - 1] ^= 1
    return "".join(map(str, on)), switches


write("01-min-on", "1", [[1]])
write("02-min-off", "0", [[1]])
write("03-all-on-already", "1" * 20, random_switches(20, 20, 5))
write("04-max-impossible", "0" * 20, [[j] for j in range(1, 20)] + [[1, 2]])  # lamp 20 has no switch
write("05-max-dense", *solvable(20, 20, 20, 11))
write("06-max-sparse", *solvable(20, 20, 3, 7))
# the greedy that presses the switch turning on the most lamps picks the big switch and gets stuck
big = list(range(1, 21))
write("07-greedy-trap", "0" * 10 + "1" * 10, [big, list(range(11, 21)), list(range(1, 6)), list(range(6, 11))])
write("08-max-all-needed", "0" * 20, [[j] for j in range(1, 21)])
write("09-max-random", "".join(rng.choice("01") for _ in range(20)), random_switches(20, 20, 10))
write("10-max-pairs", "0" * 20, [[j, j % 20 + 1] for j in range(1, 21)])
write("11-max-one-switch-per-half", *solvable(20, 20, 10, 19))
write("12-small-random", *solvable(5, 6, 3, 2))
