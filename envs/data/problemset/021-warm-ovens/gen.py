"""Hidden tests for Warm Ovens: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2101)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def write(name, m, ovens):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(ovens)} {m}\n" + "".join(f"{w} {t}\n" for w, t in ovens))


write("01", 1, [(0, 1)])
write("02", 1000000000, [(1000000000, 1000000000)])  # answer 10^18 + 10^9: needs a high enough upper bound
write("03", 1000000000, [(1000000000, 1000000000)] * 200000)
# many fast ovens: an unbounded sum of floor((T - w) / t) overflows 64 bits at T ~ 10^18
write("04", 1000000000, [(0, 1)] * 200000)
write("05", 1000000000, [(rng.randint(0, 10), rng.randint(1, 3)) for _ in range(200000)])
write("06", 1000000000, [(1000000000, 1000000000)] * 199999 + [(0, 1)])
write("07", 1000000000, [(rng.randint(0, 10**9), rng.randint(1, 10**9)) for _ in range(200000)])
write("08", 123456789, [(rng.randint(0, 10**9), rng.randint(1, 1000)) for _ in range(200000)])
write("09", 1000000000, [(10**9, 1)] + [(0, 10**9)] * 199999)
for i in range(10, 14):
    n = rng.randint(1, 50)
    write(f"{i}", rng.randint(1, 100), [(rng.randint(0, 30), rng.randint(1, 10)) for _ in range(n)])
write("14", 999999999, [(rng.randint(0, 5), rng.choice([1, 10**9])) for _ in range(200000)])
