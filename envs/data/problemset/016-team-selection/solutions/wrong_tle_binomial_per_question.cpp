// 016-team-selection, too slow: computes each binomial from scratch with k multiplications and inverses.
#include <bits/stdc++.h>
using namespace std;
const long long MOD = 1000000007;
long long power(long long b, long long e) {
    long long r = 1;
    for (b %= MOD; e; e >>= 1, b = b * b % MOD) if (e & 1) r = r * b % MOD;
    return r;
}
long long binom(long long n, long long k) {
    if (k < 0 || k > n) return 0;
    long long r = 1;
    for (long long i = 0; i < k; i++) r = r * ((n - i) % MOD) % MOD * power(i + 1, MOD - 2) % MOD;
    return r;
}
int main() {
    int q;
    scanf("%d", &q);
    while (q--) {
        long long n, k, a;
        scanf("%lld %lld %lld", &n, &k, &a);
        printf("%lld\n", ((binom(n, k) - binom(n - a, k)) % MOD + MOD) % MOD);
    }
}
