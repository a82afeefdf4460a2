"""Interactor of 028-ridge-summit: `interactor.py INPUT LOG`; INPUT holds `n p seed` (1 <= p <= n).

The hidden heights rise strictly up to the summit p and fall strictly after it:
a_i = 10^9 - (500 * d + noise(d, side)), d = |i - p|, noise in [0, 499] from a fixed hash of (d, side, seed), so
every side is strictly monotone. Prints n, answers `? i` with a_i, at most 40 times; `! i` ends the game.
Exit 0 AC, 1 WA (wrong summit, too many questions, no answer), 2 PE (malformed line or index), 3 broken test."""
import sys

MAX_QUESTIONS = 40
try:
    n, p, seed = map(int, open(sys.argv[1]).read().split())
    assert 1 <= p <= n <= 10**6
except Exception:
    sys.exit(3)
log = open(sys.argv[2], "w")


def height(i):
    """Height of point i: strictly increasing towards p on both sides."""
    d = abs(i - p)
    side = 0 if i < p else 1
    noise = ((d * 1000003 + side * 7919 + seed) * 2654435761) % (1 << 32) % 500 if d else 0
    return 10**9 - (500 * d + noise)


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
    if len(parts) != 2 or parts[0] not in ("?", "!") or not parts[1].isdigit():
        finish(2, f"malformed line {line.strip()[:40]!r}")
    value = int(parts[1])
    if not 1 <= value <= n:
        finish(2, f"index {value} outside [1, {n}]")
    if parts[0] == "!":
        finish(0 if value == p else 1, f"answered {value}, the summit is {p} ({questions} questions)")
    questions += 1
    if questions > MAX_QUESTIONS:
        finish(1, f"more than {MAX_QUESTIONS} questions")
    print(height(value), flush=True)
