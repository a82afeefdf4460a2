"""Hidden tests of 007-two-teams: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_SUM = 200_000
rng = random.Random(7007)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, ns):
    assert sum(ns) <= MAX_SUM and len(ns) <= 10**4
    (out / f"{name}.in").write_text(f"{len(ns)}\n" + "\n".join(map(str, ns)) + "\n")


write("01-two", [2])
write("02-small-all", list(range(2, 120)))
write("03-every-residue", [n for n in range(2, 40) for _ in range(4)])
write("04-max-one", [MAX_SUM])
write("05-max-one-odd", [MAX_SUM - 1])
write("06-max-residue-1", [MAX_SUM - 3])
write("07-max-residue-2", [MAX_SUM - 2])
write("08-many-small", [rng.randint(2, 20) for _ in range(10**4)])
write("09-random-sizes", [rng.randint(2, 5000) for _ in range(70)])
write("10-two-big", [MAX_SUM // 2, MAX_SUM // 2 - 1])
write("11-many-twos", [2] * 10**4)
write("12-mixed", [3, 4, 5, 6, 7, 8, 99_999, 99_000])
