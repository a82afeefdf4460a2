# 010-convoy-trucks, wrong: loads every truck up to the average ceil(S / k) (the last truck takes the rest) and
# prints the heaviest truck.
import sys

data = sys.stdin.buffer.read().split()
n, k = int(data[0]), int(data[1])
w = list(map(int, data[2:2 + n]))
average = -(-sum(w) // k)
loads, load = [], 0
for x in w:
    if load + x > average and len(loads) < k - 1 and load > 0:
        loads.append(load)
        load = 0
    load += x
loads.append(load)
print(max(loads))
