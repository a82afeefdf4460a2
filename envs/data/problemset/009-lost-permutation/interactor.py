"""Interactor of 009-lost-permutation: `interactor.py INPUT LOG`; INPUT holds n, then p_1 .. p_n.

Prints n; answers `? i j` (i != j) with p_i + p_j, at most n times; `! q_1 .. q_n` ends the game. Exit 0 AC,
1 WA (wrong permutation, too many questions, no answer), 2 PE (malformed line), 3 on a broken test."""
import sys

try:
    numbers = list(map(int, open(sys.argv[1]).read().split()))
    n, p = numbers[0], numbers[1:]
    assert sorted(p) == list(range(1, n + 1))
except Exception:
    sys.exit(3)
log = open(sys.argv[2], "w")


def finish(code, message):
    log.write(message + "\n")
    sys.exit(code)


print(n, flush=True)
questions = 0
while True:
    line = sys.stdin.readline()
    if not line:
        finish(1, f"the solution ended without an answer after {questions} questions")
    parts = line.split()
    if not parts or parts[0] not in ("?", "!") or not all(x.lstrip("-").isdigit() for x in parts[1:]):
        finish(2, f"malformed line {line.strip()[:40]!r}")
    values = list(map(int, parts[1:]))
    if parts[0] == "!":
        finish(0 if values == p else 1, f"answered {'correctly' if values == p else 'wrongly'} after "
                                        f"{questions} questions")
    questions += 1
    if questions > n:
        finish(1, f"more than n = {n} questions")
    if len(values) != 2 or values[0] == values[1] or not all(1 <= v <= n for v in values):
        finish(2, f"bad question {line.strip()[:40]!r}")
    print(p[values[0] - 1] + p[values[1] - 1], flush=True)
