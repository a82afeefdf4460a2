"""Rerooting: S(root) from depths; moving the root across edge (p, c) of weight w changes the sum by
w * (n - 2 * size(c)). Iterative BFS order, so deep trees need no recursion."""
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    adj = [[] for _ in range(n + 1)]
    vals = list(map(int, data[1:3 * n - 2]))
    for u, v, w in zip(vals[0::3], vals[1::3], vals[2::3]):
        adj[u].append((v, w))
        adj[v].append((u, w))
    par, pw, depth = [0] * (n + 1), [0] * (n + 1), [0] * (n + 1)
    par[1] = -1
    order = [1]
    for u in order:
        pu, du = par[u], depth[u]
        for v, w in adj[u]:
            if v != pu:
                par[v], pw[v], depth[v] = u, w, du + w
                order.append(v)
    size = [1] * (n + 1)
    for v in reversed(order[1:]):
        size[par[v]] += size[v]
    s = [0] * (n + 1)
    s[1] = sum(depth)
    for v in order[1:]:
        s[v] = s[par[v]] + pw[v] * (n - 2 * size[v])
    sys.stdout.write(" ".join(map(str, s[1:])) + "\n")


main()
