"""Checker of 008-warehouse-robot: `checker.py INPUT OUTPUT ANSWER`; exit 0 AC, 1 WA, 2 PE, 3 FAIL.

-1 must match the jury's -1; otherwise the route must have the printed length L, equal to the jury's, stay on free
cells inside the grid and end on T."""
import sys


def verdict(code, message):
    sys.stderr.write(message + "\n")
    sys.exit(code)


lines = open(sys.argv[1]).read().split()
n, m, grid = int(lines[0]), int(lines[1]), lines[2:]
jury = int(open(sys.argv[3]).read().split()[0])
tokens = open(sys.argv[2]).read().split()
if not tokens or not tokens[0].lstrip("-").isdigit():
    verdict(2, "expected the route length or -1")
length = int(tokens[0])
if length == -1 or jury == -1:
    if len(tokens) != 1:
        verdict(2, "extra output after -1")
    if length != jury:
        verdict(1 if jury != -1 else 3, f"printed {length}, the jury found {jury}")
    verdict(0, "unreachable")
if len(tokens) != 2 or len(tokens[1]) != length or set(tokens[1]) - set("UDLR"):
    verdict(2 if len(tokens) != 2 else 1, f"expected a route of {length} letters from UDLR")
row, col = next((r, c) for r in range(n) for c in range(m) if grid[r][c] == "S")
step = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}
for i, move in enumerate(tokens[1], start=1):
    row, col = row + step[move][0], col + step[move][1]
    if not (0 <= row < n and 0 <= col < m) or grid[row][col] == "#":
        verdict(1, f"move {i} ({move}) leaves the grid or hits a shelf")
if grid[row][col] != "T":
    verdict(1, f"the route ends at ({row + 1}, {col + 1}), not at T")
if length > jury:
    verdict(1, f"route of {length} moves, {jury} suffice")
if length < jury:
    verdict(3, f"route of {length} < the jury's {jury}: the jury is wrong")
verdict(0, f"{length} moves")
