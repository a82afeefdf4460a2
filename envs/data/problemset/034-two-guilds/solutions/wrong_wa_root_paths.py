"""Builds the 'cycle' from the two whole tree paths to the BFS root instead of stopping at the lowest common
ancestor: when the root is not on the odd cycle, merchants repeat."""
import sys

data = sys.stdin.buffer.read().split()
n, m = int(data[0]), int(data[1])
us = list(map(int, data[2:2 + 2 * m:2]))
vs = list(map(int, data[3:3 + 2 * m:2]))
adj = [[] for _ in range(n + 1)]
for u, v in zip(us, vs):
    adj[u].append(v)
    adj[v].append(u)
depth = [-1] * (n + 1)
par = [0] * (n + 1)
for s in range(1, n + 1):
    if depth[s] < 0:
        depth[s] = 0
        queue = [s]
        for x in queue:
            for y in adj[x]:
                if depth[y] < 0:
                    depth[y] = depth[x] + 1
                    par[y] = x
                    queue.append(y)


def to_root(x):
    path = [x]
    while depth[x] > 0:
        x = par[x]
        path.append(x)
    return path


for u, v in zip(us, vs):
    if (depth[u] - depth[v]) % 2 == 0:
        cycle = to_root(u) + to_root(v)[::-1][1:]
        print("NO")
        print(len(cycle))
        print(*cycle)
        break
else:
    print("YES")
    print(*(d % 2 + 1 for d in depth[1:]))
