# 012-far-away, crashes: recursive DFS for the distances; a path of 2*10^5 villages passes the recursion limit.
import sys

data = sys.stdin.buffer.read().split()
n = int(data[0])
adj = [[] for _ in range(n + 1)]
for i in range(n - 1):
    u, v = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    adj[u].append(v)
    adj[v].append(u)


def dfs(v, parent, depth, dist):
    dist[v] = depth
    for u in adj[v]:
        if u != parent:
            dfs(u, v, depth + 1, dist)


def distances(source):
    dist = [0] * (n + 1)
    dfs(source, 0, 0, dist)
    return dist


d1 = distances(1)
a = max(range(1, n + 1), key=d1.__getitem__)
da = distances(a)
b = max(range(1, n + 1), key=da.__getitem__)
db = distances(b)
print(" ".join(str(max(da[v], db[v])) for v in range(1, n + 1)))
