"""Interactor of 028-balance-scale: `interactor.py INPUT LOG`; INPUT holds `n` and the hidden weights w_1..w_n
(a permutation of 1..n).

Prints n, answers `? i j` (i != j) with `<` if w_i < w_j else `>`, at most
limit(n) = n * ceil(log2 n) - 2^ceil(log2 n) + 1 times (the worst case of binary insertion sort and of top-down
merge sort, Knuth TAOCP vol. 3, 5.3.1); `! p_1 ... p_n` must list the indices from the lightest to the heaviest.
Exit 0 AC, 1 WA (wrong order, too many weighings, no answer), 2 PE (malformed line), 3 broken test."""
import sys

try:
    numbers = list(map(int, open(sys.argv[1]).read().split()))
    n, weights = numbers[0], numbers[1:]
    assert len(weights) == n and sorted(weights) == list(range(1, n + 1))
except Exception:
    sys.exit(3)
log = open(sys.argv[2], "w")


def limit(n):
    """Worst-case comparisons of binary insertion sort: n * ceil(log2 n) - 2^ceil(log2 n) + 1."""
    c = (n - 1).bit_length()  # ceil(log2 n) for n >= 1
    return n * c - (1 << c) + 1


def finish(code, message):
    log.write(message + "\n")
    sys.exit(code)


MAX = limit(n)
print(n, flush=True)
asked = 0
while True:
    line = sys.stdin.readline()
    if not line:
        finish(1, f"the solution ended without an answer after {asked} weighings")
    parts = line.split()
    if not parts or parts[0] not in ("?", "!") or not all(p.isdigit() for p in parts[1:]):
        finish(2, f"malformed line {line.strip()[:40]!r}")
    if parts[0] == "!":
        order = [int(p) for p in parts[1:]]
        if sorted(order) != list(range(1, n + 1)):
            finish(2, "the answer is not a permutation of 1..n")
        ok = all(weights[a - 1] < weights[b - 1] for a, b in zip(order, order[1:]))
        finish(0 if ok else 1, f"{'right' if ok else 'wrong'} order after {asked} weighings (limit {MAX})")
    if len(parts) != 3:
        finish(2, f"malformed line {line.strip()[:40]!r}")
    i, j = int(parts[1]), int(parts[2])
    if not (1 <= i <= n and 1 <= j <= n and i != j):
        finish(2, f"bad weighing {i} {j}")
    asked += 1
    if asked > MAX:
        finish(1, f"more than {MAX} weighings")
    print("<" if weights[i - 1] < weights[j - 1] else ">", flush=True)
