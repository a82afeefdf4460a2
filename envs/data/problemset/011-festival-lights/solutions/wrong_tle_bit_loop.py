# 011-festival-lights, too slow in Python: all 2^m subsets with an inner loop over the m switches.
import sys

data = sys.stdin.read().split()
n, m, state = int(data[0]), int(data[1]), data[2]
need = sum(1 << i for i, c in enumerate(state) if c == "0")
masks, pos = [], 3
for _ in range(m):
    c = int(data[pos])
    masks.append(sum(1 << (int(x) - 1) for x in data[pos + 1:pos + 1 + c]))
    pos += 1 + c
best = -1
for s in range(1 << m):
    toggled = 0
    for j in range(m):
        if s >> j & 1:
            toggled ^= masks[j]
    if toggled == need:
        presses = bin(s).count("1")
        if best == -1 or presses < best:
            best = presses
print(best)
