# 003-broken-ladder, wrong: forgets that the roof itself may be broken.
import sys

data = sys.stdin.buffer.read().split()
n, m = int(data[0]), int(data[1])
broken = bytearray(n + 1)
for b in data[2:2 + m]:
    broken[int(b)] = 1
broken[n] = 0
before, last = 0, 1
for i in range(1, n + 1):
    before, last = last, (0 if broken[i] else (last + before) % 998244353)
print(last)
