// The textbook O(n^2) DP: for each note, look at every earlier note with a smaller pitch.
#include <bits/stdc++.h>
using namespace std;
const int MOD = 1000000007;
int main() {
    int n;
    scanf("%d", &n);
    vector<int> a(n), len(n), cnt(n);
    for (auto& x : a) scanf("%d", &x);
    int bestLen = 0, total = 0;
    for (int i = 0; i < n; i++) {
        len[i] = 1; cnt[i] = 1;
        for (int j = 0; j < i; j++)
            if (a[j] < a[i]) {
                if (len[j] + 1 > len[i]) { len[i] = len[j] + 1; cnt[i] = cnt[j]; }
                else if (len[j] + 1 == len[i]) cnt[i] = (cnt[i] + cnt[j]) % MOD;
            }
        if (len[i] > bestLen) { bestLen = len[i]; total = cnt[i]; }
        else if (len[i] == bestLen) total = (total + cnt[i]) % MOD;
    }
    printf("%d\n", total);
}
