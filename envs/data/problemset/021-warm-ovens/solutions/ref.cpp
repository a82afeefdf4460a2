// Binary search on the answer T: loaves(T) = sum max(0, floor((T - w_i) / t_i)), capped at m to avoid overflow.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n; long long m;
    scanf("%d %lld", &n, &m);
    vector<long long> w(n), t(n);
    long long hi = LLONG_MAX;
    for (int i = 0; i < n; i++) { scanf("%lld %lld", &w[i], &t[i]); hi = min(hi, w[i] + t[i] * m); }
    long long lo = 0;  // loaves(lo) < m, loaves(hi) >= m
    while (hi - lo > 1) {
        long long mid = lo + (hi - lo) / 2, got = 0;
        for (int i = 0; i < n && got < m; i++)
            if (mid > w[i]) got += (mid - w[i]) / t[i];
        if (got >= m) hi = mid; else lo = mid;
    }
    printf("%lld\n", hi);
}
