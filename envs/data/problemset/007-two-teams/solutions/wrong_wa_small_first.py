# 007-two-teams, wrong: takes the small shirts first while they fit; the team then stops short of half.
import sys

data = sys.stdin.buffer.read().split()
out = []
for n in map(int, data[1:1 + int(data[0])]):
    total = n * (n + 1) // 2
    team, strength = [], 0
    for i in range(1, n):
        if strength + i > total // 2:
            break
        team.append(i)
        strength += i
    out.append(f"{total - 2 * strength} {len(team)}")
    out.append(" ".join(map(str, team)))
print("\n".join(out))
