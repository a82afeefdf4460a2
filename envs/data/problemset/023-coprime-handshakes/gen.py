"""Hidden tests for Coprime Handshakes: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2303)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N, A = 200000, 10**6


def write(name, a):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(a)}\n{' '.join(map(str, a))}\n")


write("01", [1, 1])
write("02", [6, 10])
write("03", [1] * N)  # answer ~2 * 10^10: overflows 32-bit counts
write("04", [rng.randint(1, A) for _ in range(N)])
write("05", [rng.choice([1, 999983, 2, 3, 5]) for _ in range(N)])
write("06", [2 * 3 * 5 * 7 * 11 * 13] * N)  # 30030 everywhere: no handshakes
write("07", [rng.randint(1, 1000) for _ in range(N)])
write("08", [rng.choice([510510, 720720, 997920, 1, 17, 19 * 23]) for _ in range(N)])
write("09", list(range(A - N + 1, A + 1)))
for i in range(10, 13):
    write(f"{i}", [rng.randint(1, 30) for _ in range(rng.randint(2, 15))])
write("13", [A] * (N - 1) + [1])
