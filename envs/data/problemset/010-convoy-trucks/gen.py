"""Hidden tests of 010-convoy-trucks: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_N, MAX_W = 200_000, 10**9
rng = random.Random(10010)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, k, w):
    (out / f"{name}.in").write_text(f"{len(w)} {k}\n{' '.join(map(str, w))}\n")


write("01-min", 1, [7])
write("02-one-each", 4, [3, 9, 1, 9])
write("03-small-random", 3, [rng.randint(1, 10) for _ in range(12)])
write("04-max-one-truck", 1, [MAX_W] * MAX_N)  # the answer is 2*10^14
write("05-max-random-k", 1000, [rng.randint(1, MAX_W) for _ in range(MAX_N)])
write("06-max-k-equals-n", MAX_N, [rng.randint(1, MAX_W) for _ in range(MAX_N)])
write("07-max-two-trucks", 2, [rng.randint(1, MAX_W) for _ in range(MAX_N)])
# filling trucks up to the average first leaves too much for the last truck
write("08-average-trap", 3, [5, 5, 5, 1, 1, 1, 1, 1, 1, 5, 5, 5, 4])
write("09-max-spiky", 50, [MAX_W if i % 1000 == 0 else 1 for i in range(MAX_N)])
write("10-max-small-weights", 777, [rng.randint(1, 3) for _ in range(MAX_N)])
write("11-max-sorted", 10, sorted(rng.randint(1, MAX_W) for _ in range(MAX_N)))
write("12-average-trap-2", 2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
