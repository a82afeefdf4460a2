// Z-function: echo i resonates at strength k iff z[i] >= k; answer with suffix sums of counts of z values.
#include <bits/stdc++.h>
using namespace std;
int main() {
    static char buf[200005];
    scanf("%s", buf);
    string s = buf;
    int n = s.size();
    vector<int> z(n, 0), cnt(n + 2, 0);
    for (int i = 1, l = 0, r = 0; i < n; i++) {
        if (i < r) z[i] = min(r - i, z[i - l]);
        while (i + z[i] < n && s[z[i]] == s[i + z[i]]) z[i]++;
        if (i + z[i] > r) { l = i; r = i + z[i]; }
        cnt[z[i]]++;
    }
    for (int k = n; k >= 0; k--) cnt[k] += cnt[k + 1];
    int q;
    scanf("%d", &q);
    string outs;
    while (q--) { int k; scanf("%d", &k); outs += to_string(cnt[k]); outs += '\n'; }
    fputs(outs.c_str(), stdout);
}
