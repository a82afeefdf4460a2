# 011-festival-lights, too slow: all 2^m subsets, and for each one every lamp's state worked out switch by switch
# (O(2^m * n * m); a 2^m * m loop alone passed on a fast machine).
import sys

data = sys.stdin.read().split()
n, m, state = int(data[0]), int(data[1]), data[2]
masks, pos = [], 3
for _ in range(m):
    c = int(data[pos])
    masks.append(sum(1 << (int(x) - 1) for x in data[pos + 1:pos + 1 + c]))
    pos += 1 + c
best = -1
for s in range(1 << m):
    all_on = True
    for lamp in range(n):
        on = state[lamp] == "1"
        for j in range(m):
            if s >> j & 1 and masks[j] >> lamp & 1:
                on = not on
        all_on = all_on and on
    if all_on:
        presses = bin(s).count("1")
        if best == -1 or presses < best:
            best = presses
print(best)
