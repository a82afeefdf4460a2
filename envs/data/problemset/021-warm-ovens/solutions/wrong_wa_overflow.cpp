// Sums every oven's count without a cap: at T ~ 10^18 with many fast ovens the 64-bit sum overflows.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n; long long m;
    scanf("%d %lld", &n, &m);
    vector<long long> w(n), t(n);
    for (int i = 0; i < n; i++) scanf("%lld %lld", &w[i], &t[i]);
    long long lo = 0, hi = 2000000000000000000LL;
    while (hi - lo > 1) {
        long long mid = lo + (hi - lo) / 2, got = 0;
        for (int i = 0; i < n; i++)
            if (mid > w[i]) got += (mid - w[i]) / t[i];
        if (got >= m) hi = mid; else lo = mid;
    }
    printf("%lld\n", hi);
}
