"""BFS 2-colouring of every component; a feud inside one colour closes an odd cycle through the BFS tree: walk
both ends up to their lowest common ancestor (du + dv - 2 dl + 1 vertices, odd since du and dv share parity)."""
import sys


def main():
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
        if depth[s] >= 0:
            continue
        depth[s] = 0
        queue = [s]
        for x in queue:
            dx = depth[x] + 1
            for y in adj[x]:
                if depth[y] < 0:
                    depth[y] = dx
                    par[y] = x
                    queue.append(y)
    for u, v in zip(us, vs):
        if (depth[u] - depth[v]) % 2:
            continue
        left, right = [], []
        while depth[u] > depth[v]:
            left.append(u)
            u = par[u]
        while depth[v] > depth[u]:
            right.append(v)
            v = par[v]
        while u != v:
            left.append(u)
            u = par[u]
            right.append(v)
            v = par[v]
        cycle = left + [u] + right[::-1]
        sys.stdout.write(f"NO\n{len(cycle)}\n{' '.join(map(str, cycle))}\n")
        return
    sys.stdout.write("YES\n" + " ".join(str(d % 2 + 1) for d in depth[1:]) + "\n")


main()
