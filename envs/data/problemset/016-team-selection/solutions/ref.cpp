// 016-team-selection: crews with at least one veteran = all crews minus crews of non-veterans only:
// C(n, k) - C(n - a, k) (mod p), with factorials and inverse factorials (Fermat: x^(p-2)) up to 10^6.
#include <bits/stdc++.h>
using namespace std;
const long long MOD = 1000000007;
const int N = 1000000;
long long fact[N + 1], inv_fact[N + 1];
long long power(long long b, long long e) {
    long long r = 1;
    for (b %= MOD; e; e >>= 1, b = b * b % MOD) if (e & 1) r = r * b % MOD;
    return r;
}
long long binom(int n, int k) {
    if (k < 0 || k > n) return 0;
    return fact[n] * inv_fact[k] % MOD * inv_fact[n - k] % MOD;
}
int main() {
    fact[0] = 1;
    for (int i = 1; i <= N; i++) fact[i] = fact[i - 1] * i % MOD;
    inv_fact[N] = power(fact[N], MOD - 2);
    for (int i = N; i > 0; i--) inv_fact[i - 1] = inv_fact[i] * i % MOD;
    int q;
    scanf("%d", &q);
    string out;
    while (q--) {
        int n, k, a;
        scanf("%d %d %d", &n, &k, &a);
        out += to_string(((binom(n, k) - binom(n - a, k)) % MOD + MOD) % MOD);
        out += '\n';
    }
    fputs(out.c_str(), stdout);
}
