# 011-festival-lights, wrong: keeps pressing the unused switch that turns on the most lamps.
import sys

data = sys.stdin.read().split()
n, m, state = int(data[0]), int(data[1]), data[2]
on = sum(1 << i for i, c in enumerate(state) if c == "1")
full = (1 << n) - 1
masks, pos = [], 3
for _ in range(m):
    c = int(data[pos])
    masks.append(sum(1 << (int(x) - 1) for x in data[pos + 1:pos + 1 + c]))
    pos += 1 + c
used, presses = set(), 0
while on != full:
    options = [(bin(on ^ masks[j]).count("1"), j) for j in range(m) if j not in used]
    if not options:
        break
    gain, j = max(options)
    if gain <= bin(on).count("1"):
        break
    on ^= masks[j]
    used.add(j)
    presses += 1
print(presses if on == full else -1)
