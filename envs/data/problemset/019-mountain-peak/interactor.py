"""Interactor of 019-mountain-peak: `interactor.py INPUT LOG`; INPUT holds n, then h_1 .. h_n.

Prints n; answers `? i` with h_i, at most 40 times; `! p` ends the game. Exit 0 AC, 1 WA (wrong peak, too many
questions, no answer), 2 PE (malformed line or index out of range), 3 on a broken test."""
import sys

MAX_QUESTIONS = 40
try:
    numbers = list(map(int, open(sys.argv[1]).read().split()))
    n, h = numbers[0], numbers[1:]
    assert len(h) == n
    peak = max(range(n), key=h.__getitem__) + 1
    assert all(h[i] < h[i + 1] for i in range(peak - 1)) and all(h[i] > h[i + 1] for i in range(peak - 1, n - 1))
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
    if len(parts) != 2 or parts[0] not in ("?", "!") or not parts[1].lstrip("-").isdigit():
        finish(2, f"malformed line {line.strip()[:40]!r}")
    value = int(parts[1])
    if parts[0] == "!":
        finish(0 if value == peak else 1, f"answered {value}, the peak is {peak} ({questions} questions)")
    questions += 1
    if questions > MAX_QUESTIONS:
        finish(1, f"more than {MAX_QUESTIONS} questions")
    if not 1 <= value <= n:
        finish(2, f"post {value} outside [1, {n}]")
    print(h[value - 1], flush=True)
