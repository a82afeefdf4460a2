// The classic O(|s| * |t|) dynamic programming over pairs of end positions, with one rolling row.
#include <bits/stdc++.h>
using namespace std;
int main() {
    static char a[200005], b[200005];
    scanf("%s %s", a, b);
    string s = a, t = b;
    vector<int> prev(t.size() + 1, 0), cur(t.size() + 1, 0);
    int best = 0, end = 0;
    for (size_t i = 1; i <= s.size(); i++) {
        for (size_t j = 1; j <= t.size(); j++) {
            cur[j] = s[i - 1] == t[j - 1] ? prev[j - 1] + 1 : 0;
            if (cur[j] > best) { best = cur[j]; end = j; }
        }
        swap(prev, cur);
    }
    printf("%d\n", best);
    if (best > 0) printf("%s\n", t.substr(end - best, best).c_str());
}
