// Mobius inversion: #coprime pairs = sum_d mu(d) * C(c_d, 2), c_d = number of a_i divisible by d.
#include <bits/stdc++.h>
using namespace std;
int main() {
    const int A = 1000000;
    int n;
    scanf("%d", &n);
    vector<int> freq(A + 1), mu(A + 1, 1), primes;
    vector<bool> composite(A + 1);
    for (int i = 0, x; i < n; i++) { scanf("%d", &x); freq[x]++; }
    mu[1] = 1;
    for (int i = 2; i <= A; i++) {  // linear sieve
        if (!composite[i]) { primes.push_back(i); mu[i] = -1; }
        for (int p : primes) {
            if ((long long)p * i > A) break;
            composite[p * i] = true;
            if (i % p == 0) { mu[p * i] = 0; break; }
            mu[p * i] = -mu[i];
        }
    }
    long long ans = 0;
    for (int d = 1; d <= A; d++) {
        if (!mu[d]) continue;
        long long c = 0;
        for (int m = d; m <= A; m += d) c += freq[m];
        ans += mu[d] * (c * (c - 1) / 2);
    }
    printf("%lld\n", ans);
}
