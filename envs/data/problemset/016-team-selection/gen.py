"""Hidden tests of 016-team-selection: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_Q, MAX_N = 10**5, 10**6
rng = random.Random(16016)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, questions):
    (out / f"{name}.in").write_text(f"{len(questions)}\n" + "\n".join(f"{n} {k} {a}" for n, k, a in questions) + "\n")


def question(max_n):
    n = rng.randint(1, max_n)
    return n, rng.randint(1, n), rng.randint(0, n)


write("01-min", [(1, 1, 0), (1, 1, 1)])
write("02-small-all", [(n, k, a) for n in range(1, 9) for k in range(1, n + 1) for a in range(0, n + 1)])
write("03-max-random", [question(MAX_N) for _ in range(MAX_Q)])
write("04-max-big-k", [(MAX_N, rng.randint(MAX_N // 2, MAX_N), rng.randint(0, MAX_N)) for _ in range(MAX_Q)])
write("05-max-no-veterans-needed", [(MAX_N, k, MAX_N) for k in range(1, MAX_Q + 1)])
write("06-max-few-veterans", [(MAX_N, rng.randint(1, MAX_N), rng.randint(0, 3)) for _ in range(MAX_Q)])
# answers whose two binomials wrap around the modulus in different orders: C(n,k) mod p < C(n-a,k) mod p
write("07-max-subtraction-order", [(n, k, 1) for n, k in ((rng.randint(2, MAX_N), 0) for _ in range(MAX_Q))
                                   for k in [rng.randint(1, n - 1)]])
write("08-max-small-n", [question(50) for _ in range(MAX_Q)])
write("09-max-k-one", [(n, 1, rng.randint(0, n)) for n in (rng.randint(1, MAX_N) for _ in range(MAX_Q))])
write("10-max-k-equals-n", [(n, n, rng.randint(0, n)) for n in (rng.randint(1, MAX_N) for _ in range(MAX_Q))])
write("11-one-big", [(MAX_N, MAX_N // 2, MAX_N // 2)])
