"""Ternary search: correct, but keeps two thirds per two measurements, about 68 for n = 10^6 (limit 40)."""
import sys


def ask(i):
    print("?", i, flush=True)
    return int(sys.stdin.readline())


n = int(sys.stdin.readline())
lo, hi = 1, n
while hi - lo > 2:
    m1 = lo + (hi - lo) // 3
    m2 = hi - (hi - lo) // 3
    if ask(m1) < ask(m2):
        lo = m1 + 1
    else:
        hi = m2 - 1
best = max(range(lo, hi + 1), key=ask)
print("!", best, flush=True)
