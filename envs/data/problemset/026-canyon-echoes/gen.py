"""Hidden tests for Canyon Echoes: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2606)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
N = 200000


def write(name, s, ks):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{s}\n{len(ks)}\n" + "\n".join(map(str, ks)) + "\n")


def queries(n, q):
    return [1 + int(rng.random() * n) for _ in range(q)]


def fib_word(n):
    a, b = "a", "ab"
    while len(b) < n:
        a, b = b, b + a
    return b[:n]


write("01", "z", [1])
write("02", "a" * N, queries(N, N))  # quadratic naive matching
write("03", "a" * (N - 1) + "b", queries(N, N))
write("04", "".join(rng.choice("ab") for _ in range(N)), queries(20, N))
write("05", fib_word(N), queries(N, N))
write("06", ("abcab" * N)[:N], queries(N, N))
write("07", "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(N)), queries(3, N))
write("08", ("ab" * N)[:N - 1] + "a", list(range(1, N + 1)))
write("09", "".join(rng.choice("ab") for _ in range(12)) * (N // 12), queries(N // 12 * 12, N))
for t in range(10, 14):
    n = 1 + int(rng.random() * 12)
    write(f"{t}", "".join(rng.choice("ab") for _ in range(n)), queries(n, 10))
