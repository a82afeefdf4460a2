# 007-two-teams: difference S mod 2; take shirts from n down while they fit under floor(S / 2). O(n).
import sys


def main():
    data = sys.stdin.buffer.read().split()
    out = []
    for n in map(int, data[1:1 + int(data[0])]):
        total = n * (n + 1) // 2
        target, team = total // 2, []
        for i in range(n, 0, -1):
            if i <= target:
                target -= i
                team.append(i)
        out.append(f"{total % 2} {len(team)}")
        out.append(" ".join(map(str, team)))
    sys.stdout.write("\n".join(out) + "\n")


main()
