// Computes every z[i] by direct comparison: O(n^2) on strings like aaaa...a.
#include <bits/stdc++.h>
using namespace std;
int main() {
    static char buf[200005];
    scanf("%s", buf);
    string s = buf;
    int n = s.size();
    vector<int> cnt(n + 2, 0);
    for (int i = 1; i < n; i++) {
        int z = 0;
        while (i + z < n && s[z] == s[i + z]) z++;
        cnt[z]++;
    }
    for (int k = n; k >= 0; k--) cnt[k] += cnt[k + 1];
    int q;
    scanf("%d", &q);
    while (q--) { int k; scanf("%d", &k); printf("%d\n", cnt[k]); }
}
