# 001-even-split, too slow: sums both sides of every cut again. O(n^2).
import sys

data = sys.stdin.read().split()
t, pos = int(data[0]), 1
for _ in range(t):
    n = int(data[pos])
    a = list(map(int, data[pos + 1:pos + 1 + n]))
    pos += 1 + n
    print(sum(1 for k in range(1, n) if sum(a[:k]) == sum(a[k:])))
