"""Correct greedy, but looks for a free hall by scanning all halls: O(n * k), too slow when k is large."""
import sys

data = sys.stdin.buffer.read().split()
n = int(data[0])
ls = list(map(int, data[1:2 * n + 1:2]))
rs = list(map(int, data[2:2 * n + 2:2]))
ends = []  # ends[h - 1]: last day used in hall h
hall = [0] * n
for i in sorted(range(n), key=ls.__getitem__):
    for h, end in enumerate(ends):
        if end < ls[i]:
            ends[h] = rs[i]
            hall[i] = h + 1
            break
    else:
        ends.append(rs[i])
        hall[i] = len(ends)
print(len(ends))
print(*hall)
