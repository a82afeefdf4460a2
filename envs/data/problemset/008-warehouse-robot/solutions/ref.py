# 008-warehouse-robot: BFS from S on the flattened grid (a border of shelves avoids bounds checks). O(nm).
import sys


def main():
    data = sys.stdin.read().split()
    n, m = int(data[0]), int(data[1])
    width = m + 2
    cells = "#" * width + "".join("#" + row + "#" for row in data[2:2 + n]) + "#" * width
    s, t = cells.index("S"), cells.index("T")
    steps = ((-width, "U"), (width, "D"), (-1, "L"), (1, "R"))
    how = [None] * len(cells)
    how[s] = ""
    frontier = [s]
    blocked = [c == "#" for c in cells]
    while frontier and how[t] is None:
        following = []
        for v in frontier:
            for delta, letter in steps:
                u = v + delta
                if how[u] is None and not blocked[u]:
                    how[u] = letter
                    following.append(u)
        frontier = following
    if how[t] is None:
        print(-1)
        return
    back = {"U": width, "D": -width, "L": 1, "R": -1}
    route, v = [], t
    while v != s:
        route.append(how[v])
        v += back[how[v]]
    print(len(route))
    print("".join(reversed(route)))


main()
