// 018-market-stalls: two pointers. Extend the block to the right; while it shows more than k kinds, drop stalls
// on the left (counts per kind in a hash map). Each stall enters and leaves once: O(n).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, k;
    scanf("%d %d", &n, &k);
    vector<int> c(n);
    for (auto &x : c) scanf("%d", &x);
    unordered_map<int, int> count;
    count.reserve(2 * n);
    int distinct = 0, best = 0;
    for (int left = 0, right = 0; right < n; right++) {
        if (count[c[right]]++ == 0) distinct++;
        while (distinct > k)
            if (--count[c[left++]] == 0) distinct--;
        best = max(best, right - left + 1);
    }
    printf("%d\n", best);
}
