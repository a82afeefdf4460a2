// 006-three-divisors: x has exactly three divisors iff x = p^2 for a prime p. Sieve the primes up to 10^6, prefix
// counts pi(k); the answer is pi(isqrt(r)) - pi(isqrt(l - 1)). O(N log log N + q).
#include <bits/stdc++.h>
using namespace std;
const int N = 1000000;
long long isqrt_ll(long long v) {
    long long s = (long long)sqrtl((long double)v);
    while (s * s > v) s--;
    while ((s + 1) * (s + 1) <= v) s++;
    return s;
}
int main() {
    vector<int> pi(N + 1, 0);
    vector<char> composite(N + 1, 0);
    for (long long i = 2; i <= N; i++) {
        pi[i] = pi[i - 1] + !composite[i];
        if (!composite[i]) for (long long j = i * i; j <= N; j += i) composite[j] = 1;
    }
    int q;
    scanf("%d", &q);
    string out;
    while (q--) {
        long long l, r;
        scanf("%lld %lld", &l, &r);
        out += to_string(pi[isqrt_ll(r)] - pi[isqrt_ll(l - 1)]);
        out += '\n';
    }
    fputs(out.c_str(), stdout);
}
