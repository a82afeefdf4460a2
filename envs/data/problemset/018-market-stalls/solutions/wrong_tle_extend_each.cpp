// 018-market-stalls, too slow: from every left end, extend to the right with a set of kinds. O(n^2) when k is big.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, k;
    scanf("%d %d", &n, &k);
    vector<int> c(n);
    for (auto &x : c) scanf("%d", &x);
    int best = 0;
    for (int left = 0; left < n; left++) {
        set<int> seen;
        int right = left;
        while (right < n) {
            seen.insert(c[right]);
            if ((int)seen.size() > k) break;
            right++;
        }
        best = max(best, right - left);
    }
    printf("%d\n", best);
}
