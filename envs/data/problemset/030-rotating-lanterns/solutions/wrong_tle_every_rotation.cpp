// Burnside over every rotation i = 0..n-1 with k^gcd(i, n): O(n log n) per question, too slow for n = 10^9.
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
const ll MOD = 1000000007;
ll power(ll b, ll e) { ll r = 1; b %= MOD; for (; e; e >>= 1, b = b * b % MOD) if (e & 1) r = r * b % MOD; return r; }
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        ll n, k;
        scanf("%lld %lld", &n, &k);
        ll sum = 0;
        for (ll i = 0; i < n; i++) sum = (sum + power(k, std::gcd(i, n))) % MOD;
        printf("%lld\n", sum * power(n, MOD - 2) % MOD);
    }
}
