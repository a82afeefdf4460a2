# 013-road-repairs: disjoint-set union with path halving and union by size. O(m alpha(n)).
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n, m = int(data[0]), int(data[1])
    parent = list(range(n + 1))
    size = [1] * (n + 1)
    regions, out = n, []
    for u, v in zip(map(int, data[2::2]), map(int, data[3::2])):
        while parent[u] != u:
            parent[u] = u = parent[parent[u]]
        while parent[v] != v:
            parent[v] = v = parent[parent[v]]
        if u != v:
            if size[u] < size[v]:
                u, v = v, u
            parent[v] = u
            size[u] += size[v]
            regions -= 1
        out.append(regions)
    sys.stdout.write("\n".join(map(str, out)) + "\n")


main()
