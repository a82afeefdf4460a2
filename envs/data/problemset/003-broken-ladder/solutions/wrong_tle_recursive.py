# 003-broken-ladder, too slow: plain recursion without memoisation, exponential in n.
import sys

sys.setrecursionlimit(10000)
data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
broken = set(map(int, data[2:2 + m]))


def ways(i):
    if i < 0 or i in broken:
        return 0
    if i == 0:
        return 1
    return ways(i - 1) + ways(i - 2)


print(ways(n) % 998244353)
