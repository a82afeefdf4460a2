# 016-team-selection: C(n, k) - C(n - a, k) mod p, factorials up to the largest n asked, inverse factorials by
# Fermat's little theorem.
import sys

MOD = 10**9 + 7


def main():
    data = sys.stdin.buffer.read().split()
    q = int(data[0])
    values = list(map(int, data[1:1 + 3 * q]))
    top = max(values[0::3])
    fact = [1] * (top + 1)
    for i in range(1, top + 1):
        fact[i] = fact[i - 1] * i % MOD
    inv = [1] * (top + 1)
    inv[top] = pow(fact[top], MOD - 2, MOD)
    for i in range(top, 0, -1):
        inv[i - 1] = inv[i] * i % MOD
    out = []
    for j in range(q):
        n, k, a = values[3 * j], values[3 * j + 1], values[3 * j + 2]
        total = fact[n] * inv[k] % MOD * inv[n - k] % MOD
        m = n - a
        without = fact[m] * inv[k] % MOD * inv[m - k] % MOD if k <= m else 0
        out.append((total - without) % MOD)
    sys.stdout.write("\n".join(map(str, out)) + "\n")


main()
