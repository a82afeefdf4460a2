# 018-market-stalls, wrong: keeps blocks with fewer than k kinds (< instead of <=).
import sys

data = sys.stdin.buffer.read().split()
n, k = int(data[0]), int(data[1])
c = data[2:2 + n]
count, left, best = {}, 0, 0
for right, kind in enumerate(c):
    count[kind] = count.get(kind, 0) + 1
    while len(count) >= k and left <= right:
        gone = c[left]
        left += 1
        count[gone] -= 1
        if count[gone] == 0:
            del count[gone]
    best = max(best, right - left + 1)
print(max(best, 1))
