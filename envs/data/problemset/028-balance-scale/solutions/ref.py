"""Binary insertion sort: nugget k goes among the k - 1 sorted ones by binary search (ceil(log2 k) weighings),
Q(n) = n ceil(log2 n) - 2^ceil(log2 n) + 1 weighings in total."""
import sys


def lighter(i, j):
    print("?", i, j, flush=True)
    return sys.stdin.readline().strip() == "<"


n = int(sys.stdin.readline())
order = []
for x in range(1, n + 1):
    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi) // 2
        if lighter(x, order[mid]):
            hi = mid
        else:
            lo = mid + 1
    order.insert(lo, x)
print("!", *order, flush=True)
