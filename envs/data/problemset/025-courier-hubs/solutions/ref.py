"""Rerooting without adjacency lists. Leaves are peeled one by one: a vertex with one remaining road knows that
road from the XOR of its neighbours and the XOR of its road lengths (every other term has been XORed out), so
peeling yields every vertex's parent after all its children. On the way up, size[p] += size[v] and
down[p] += down[v] + w * size[v] (down[v]: distances from v into its subtree), so S(root) = down[root]; then
S(v) = S(parent) + w * (n - 2 * size[v]) top-down, since crossing the road (p, v) of length w brings size[v]
villages w closer and the other n - size[v] villages w farther."""
import sys


def main():
    data = sys.stdin.buffer.read().split()
    n = int(data[0])
    vals = list(map(int, data[1:3 * n - 2]))
    us, vs, ws = vals[0::3], vals[1::3], vals[2::3]
    deg = [0] * (n + 1)
    xor_nb = [0] * (n + 1)
    xor_w = [0] * (n + 1)
    for u, v, w in zip(us, vs, ws):
        deg[u] += 1
        deg[v] += 1
        xor_nb[u] ^= v
        xor_nb[v] ^= u
        xor_w[u] ^= w
        xor_w[v] ^= w
    size = [1] * (n + 1)
    down = [0] * (n + 1)
    par = [0] * (n + 1)
    order = []
    stack = [v for v in range(1, n + 1) if deg[v] == 1]
    while stack:
        v = stack.pop()
        if deg[v] != 1:
            continue
        p, w = xor_nb[v], xor_w[v]
        par[v] = p
        order.append(v)
        deg[v] = 0
        deg[p] -= 1
        xor_nb[p] ^= v
        xor_w[p] ^= w
        size[p] += size[v]
        down[p] += down[v] + w * size[v]
        if deg[p] == 1:
            stack.append(p)
    s = [0] * (n + 1)
    root = next(v for v in range(1, n + 1) if deg[v] == 0 and (n == 1 or par[v] == 0))
    s[root] = down[root]
    for v in reversed(order):
        s[v] = s[par[v]] + xor_w[v] * (n - 2 * size[v])
    sys.stdout.write(" ".join(map(str, s[1:])) + "\n")


main()
