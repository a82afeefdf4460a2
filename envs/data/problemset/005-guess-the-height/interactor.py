"""Interactor of 005-guess-the-height: `interactor.py INPUT LOG`; INPUT holds `n x`.

Prints n, then answers `? y` with yes (x >= y) or no, at most 30 times; `! z` ends the game. Exit 0 AC, 1 WA (wrong
height, too many questions, no answer), 2 PE (a malformed line), 3 on a broken test."""
import sys

MAX_QUESTIONS = 30
try:
    n, x = map(int, open(sys.argv[1]).read().split())
    assert 1 <= x <= n
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
        finish(0 if value == x else 1, f"answered {value}, the height is {x} ({questions} questions)")
    questions += 1
    if questions > MAX_QUESTIONS:
        finish(1, f"more than {MAX_QUESTIONS} questions")
    if not 1 <= value <= n:
        finish(2, f"question {value} outside [1, {n}]")
    print("yes" if x >= value else "no", flush=True)
