"""Offline in reverse: start from the bridges never closed, reopen the closed ones from last to first with a
disjoint-set union (union by size, path halving), tracking the largest zone."""
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n, m, q = int(data[0]), int(data[1]), int(data[2])
    us = [0] + list(map(int, data[3:3 + 2 * m:2]))
    vs = [0] + list(map(int, data[4:4 + 2 * m:2]))
    closing = list(map(int, data[3 + 2 * m:3 + 2 * m + q]))
    par = list(range(n + 1))
    size = [1] * (n + 1)
    best = 1

    def find(x):
        while par[x] != x:
            par[x] = par[par[x]]
            x = par[x]
        return x

    def unite(a, b):
        nonlocal best
        a, b = find(a), find(b)
        if a != b:
            if size[a] < size[b]:
                a, b = b, a
            par[b] = a
            size[a] += size[b]
            if size[a] > best:
                best = size[a]

    closed = [False] * (m + 1)
    for c in closing:
        closed[c] = True
    for i in range(1, m + 1):
        if not closed[i]:
            unite(us[i], vs[i])
    ans = [0] * q
    for j in range(q - 1, -1, -1):
        ans[j] = best
        unite(us[closing[j]], vs[closing[j]])
    sys.stdout.write(" ".join(map(str, ans)) + "\n")


main()
