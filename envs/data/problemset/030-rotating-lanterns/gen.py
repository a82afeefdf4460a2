"""Hidden tests for Rotating Lanterns: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(3010)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
T, MAX = 500, 10**9
RICH = [735134400, 963761198, 698377680, 551350800, 897612484, 1000000000, 999999999, 536870912, 999999937,
        999966000, 882161280]  # many divisors, powers of two, a prime


def write(name, qs):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(qs)}\n" + "".join(f"{n} {k}\n" for n, k in qs))


write("01", [(1, 1)])
write("02", [(n, k) for n in range(1, 11) for k in range(1, 11)])
write("03", [(735134400, MAX)] * T)  # 1344 divisors each
write("04", [(rng.randint(1, MAX), rng.randint(1, MAX)) for _ in range(T)])
write("05", [(rng.choice(RICH), rng.randint(1, MAX)) for _ in range(T)])
write("06", [(999999937, rng.randint(1, MAX)) for _ in range(T)])  # a large prime: slow trial division
write("07", [(MAX, MAX)] * T)
write("08", [(rng.randint(1, 1000), rng.randint(1, 5)) for _ in range(T)])
write("09", [(2 ** rng.randint(0, 29), rng.randint(1, MAX)) for _ in range(T)])
write("10", [(rng.randint(1, MAX), 1) for _ in range(T)])
write("11", [(MAX - i, 2) for i in range(T)])
