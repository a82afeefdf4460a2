"""Upper bound 10^18 for the search: too small when the answer is 10^18 + 10^9."""
import sys

data = sys.stdin.buffer.read().split()
n, m = int(data[0]), int(data[1])
pairs = sorted(zip(map(int, data[3:3 + 2 * n:2]), map(int, data[2:2 + 2 * n:2])))
lo, hi = 0, 10**18
while hi - lo > 1:
    mid = (lo + hi) // 2
    got = 0
    for ti, wi in pairs:
        if mid > wi:
            got += (mid - wi) // ti
            if got >= m:
                break
    if got >= m:
        hi = mid
    else:
        lo = mid
print(hi)
