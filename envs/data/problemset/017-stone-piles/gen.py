"""Hidden tests of 017-stone-piles: `python gen.py OUTDIR`."""
import random
import sys
from pathlib import Path

MAX_SUM, MAX_A = 200_000, 10**9
rng = random.Random(17017)
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)


def write(name, games):
    lines = [str(len(games))]
    for k, piles in games:
        lines += [f"{len(piles)} {k}", " ".join(map(str, piles))]
    (out / f"{name}.in").write_text("\n".join(lines) + "\n")


def losing(n, k, hi):
    """Piles whose values mod (k + 1) XOR to zero (the first player loses): random piles, then a last pile that
    balances them; drawn again when no last pile within [1, hi] does."""
    while True:
        piles = [rng.randint(1, hi) for _ in range(n - 1)]
        x = 0
        for p in piles:
            x ^= p % (k + 1)
        first = x if x else k + 1  # the smallest pile >= 1 with the residue x
        if x <= k and first <= hi:
            return piles + [first + (k + 1) * rng.randint(0, (hi - first) // (k + 1))]


def random_game(n, k_hi, a_hi):
    k = rng.randint(1, k_hi)
    return k, (losing(n, k, a_hi) if rng.random() < 0.5 else [rng.randint(1, a_hi) for _ in range(n)])


write("01-min", [(1, [1]), (1, [2]), (2, [3]), (10**9, [10**9])])
write("02-small-all", [(k, [a, b]) for k in range(1, 5) for a in range(1, 7) for b in range(1, 7)])
write("03-many-small", [random_game(rng.randint(1, 10), 5, 20) for _ in range(10**4)])
write("04-max-one-game-k1", [(1, [rng.randint(1, MAX_A) for _ in range(MAX_SUM)])])
write("05-max-one-game-big-k", [(MAX_A, [rng.randint(1, MAX_A) for _ in range(MAX_SUM)])])
write("06-max-losing", [(k, losing(MAX_SUM, k, MAX_A)) for k in [rng.randint(2, 1000)]])
write("07-random-games", [random_game(20, 10**9, MAX_A) for _ in range(10**4)])
write("08-small-k-games", [random_game(20, 3, MAX_A) for _ in range(10**4)])
# plain Nim (xor of the piles) and "mod k" disagree with the real answer here
write("09-nim-traps", [(1, [2, 1]), (2, [3, 3, 1]), (1, [3]), (2, [4, 1]), (3, [4]), (3, [5, 1])] * 1000)
write("10-max-equal-piles", [(7, [MAX_A] * MAX_SUM)])
write("11-max-mixed", [random_game(rng.randint(1, 40), 10 ** rng.randint(0, 9), MAX_A) for _ in range(5000)])
