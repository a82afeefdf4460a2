// 010-convoy-trucks, too slow: tries capacities max w, max w + 1, ... until the greedy fits.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, k;
    scanf("%d %d", &n, &k);
    vector<long long> w(n);
    long long cap = 0;
    for (auto &x : w) { scanf("%lld", &x); cap = max(cap, x); }
    for (;; cap++) {
        int trucks = 1;
        long long load = 0;
        for (long long x : w) {
            if (load + x > cap) { trucks++; load = 0; }
            load += x;
        }
        if (trucks <= k) break;
    }
    printf("%lld\n", cap);
}
