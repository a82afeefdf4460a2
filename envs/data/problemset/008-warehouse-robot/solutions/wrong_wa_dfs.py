# 008-warehouse-robot, wrong: depth-first search finds a route, not a shortest one.
import sys

data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
width = m + 2
cells = "#" * width + "".join("#" + row + "#" for row in data[2:2 + n]) + "#" * width
s, t = cells.index("S"), cells.index("T")
how = [None] * len(cells)
how[s] = ""
stack = [s]
while stack and how[t] is None:
    v = stack.pop()
    for delta, letter in ((-width, "U"), (width, "D"), (-1, "L"), (1, "R")):
        u = v + delta
        if how[u] is None and cells[u] != "#":
            how[u] = letter
            stack.append(u)
if how[t] is None:
    print(-1)
else:
    back = {"U": width, "D": -width, "L": 1, "R": -1}
    route, v = [], t
    while v != s:
        route.append(how[v])
        v += back[how[v]]
    print(len(route))
    print("".join(reversed(route)))
