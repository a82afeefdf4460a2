// 010-convoy-trucks, wrong: loads and bounds in 32-bit int; the total weight overflows.
#include <bits/stdc++.h>
using namespace std;
int n, k;
vector<int> w;
bool fits(int cap) {
    int trucks = 1, load = 0;
    for (int x : w) {
        if (load + x > cap) { trucks++; load = 0; }
        load += x;
    }
    return trucks <= k;
}
int main() {
    scanf("%d %d", &n, &k);
    w.resize(n);
    int lo = 0, hi = 0;
    for (auto &x : w) { scanf("%d", &x); lo = max(lo, x); hi += x; }
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (fits(mid)) hi = mid; else lo = mid + 1;
    }
    printf("%d\n", lo);
}
