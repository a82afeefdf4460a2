// 010-convoy-trucks: binary search on C in [max w, sum w]; C is feasible iff the greedy that fills each truck
// as far as it can uses at most k trucks (feasibility is monotone in C). O(n log(sum w)).
#include <bits/stdc++.h>
using namespace std;
int n, k;
vector<long long> w;
bool fits(long long cap) {
    int trucks = 1;
    long long load = 0;
    for (long long x : w) {
        if (load + x > cap) { trucks++; load = 0; }
        load += x;
    }
    return trucks <= k;
}
int main() {
    scanf("%d %d", &n, &k);
    w.resize(n);
    long long lo = 0, hi = 0;
    for (auto &x : w) { scanf("%lld", &x); lo = max(lo, x); hi += x; }
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (fits(mid)) hi = mid; else lo = mid + 1;
    }
    printf("%lld\n", lo);
}
