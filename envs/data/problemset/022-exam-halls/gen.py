"""Hidden tests for Exam Halls: `python gen.py OUTDIR`."""
import os
import random
import sys

rng = random.Random(2202)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def write(name, exams):
    with open(os.path.join(out, f"{name}.in"), "w") as f:
        f.write(f"{len(exams)}\n" + "".join(f"{l} {r}\n" for l, r in exams))


def rand(n, span, length):
    res = []
    for _ in range(n):
        l = rng.randint(1, span)
        res.append((l, min(10**9, l + rng.randint(0, length))))
    return res


write("01", [(1, 1)])
write("02", [(1, 10**9)] * 200000)  # every exam needs its own hall
# chain of touching exams: [i, i+1] share a day with the next one; closed intervals need 2 halls, half-open 1
write("03", [(i, i + 1) for i in range(1, 200001)])
write("04", [(i, i) for i in range(1, 200001)])
chain = [(2 * i + 1, 2 * i + 3) for i in range(100000)]
rng.shuffle(chain)
write("05", chain)
write("06", rand(200000, 10**9, 10**4))
write("07", rand(200000, 10**6, 10**6))
write("08", rand(200000, 1000, 10))
write("09", [(10**9 - i, 10**9) for i in range(200000)])
for i in range(10, 14):
    write(f"{i}", rand(rng.randint(1, 30), 20, 5))
write("14", [(1, 1), (1, 2), (2, 3), (3, 3), (3, 5), (5, 5)])
