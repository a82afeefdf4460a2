"""Binary search for the first point i with a_i > a_(i+1): two measurements per halving, 40 at most."""
import sys


def ask(i):
    print("?", i, flush=True)
    return int(sys.stdin.readline())


n = int(sys.stdin.readline())
lo, hi = 1, n
while lo < hi:
    mid = (lo + hi) // 2
    if ask(mid) > ask(mid + 1):
        hi = mid
    else:
        lo = mid + 1
print("!", lo, flush=True)
