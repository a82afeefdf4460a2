// Burnside's lemma over the n rotations: the rotation by i fixes k^gcd(i, n) colourings, and exactly phi(n / d)
// rotations have gcd d, so the answer is (1 / n) * sum over d | n of phi(n / d) * k^d  (mod p = 10^9 + 7 > n,
// so n is invertible). Divisors and phi come from the factorisation of n by trial division with primes <= 31623.
#include <bits/stdc++.h>
using namespace std;
typedef long long ll;
const ll MOD = 1000000007;
ll power(ll b, ll e) { ll r = 1; b %= MOD; for (; e; e >>= 1, b = b * b % MOD) if (e & 1) r = r * b % MOD; return r; }
int main() {
    vector<int> primes;
    vector<bool> comp(31624);
    for (int i = 2; i < 31624; i++) if (!comp[i]) { primes.push_back(i); for (int j = i * i; j < 31624; j += i) comp[j] = true; }
    int t;
    scanf("%d", &t);
    while (t--) {
        ll n, k;
        scanf("%lld %lld", &n, &k);
        vector<pair<ll, int>> f;
        ll m = n;
        for (int p : primes) {
            if ((ll)p * p > m) break;
            if (m % p == 0) { int e = 0; while (m % p == 0) { m /= p; e++; } f.push_back({p, e}); }
        }
        if (m > 1) f.push_back({m, 1});
        vector<pair<ll, ll>> divs = {{1, 1}};  // (divisor e, phi(e))
        for (auto [p, e] : f) {
            size_t sz = divs.size();
            ll pk = 1;
            for (int j = 1; j <= e; j++) {
                ll ph = pk * (p - 1);
                pk *= p;
                for (size_t i = 0; i < sz; i++) divs.push_back({divs[i].first * pk, divs[i].second * ph});
            }
        }
        ll sum = 0;
        for (auto [e, ph] : divs) sum = (sum + ph % MOD * power(k, n / e)) % MOD;  // e = n / d
        printf("%lld\n", sum * power(n, MOD - 2) % MOD);
    }
}
