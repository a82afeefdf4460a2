// Offline: sort the lists by right end. Sweeping r, a Fenwick tree holds 1 at the last occurrence of every series seen
// so far (moving the 1 when a series reappears); a list [l, r] then counts the 1s in [l, r]. O((n + q) log n).
#include <bits/stdc++.h>
using namespace std;
int n, q;
vector<int> bit;
void add(int i, int d) { for (; i <= n; i += i & -i) bit[i] += d; }
int sum(int i) { int s = 0; for (; i > 0; i -= i & -i) s += bit[i]; return s; }
int main() {
    scanf("%d %d", &n, &q);
    vector<int> c(n + 1);
    for (int i = 1; i <= n; i++) scanf("%d", &c[i]);
    vector<array<int, 3>> w(q);
    for (int j = 0; j < q; j++) { scanf("%d %d", &w[j][1], &w[j][0]); w[j][2] = j; }  // (r, l, index)
    sort(w.begin(), w.end());
    bit.assign(n + 1, 0);
    unordered_map<int, int> last;
    last.reserve(2 * n);
    vector<int> ans(q);
    int r = 0;
    for (auto& [wr, wl, j] : w) {
        while (r < wr) {
            r++;
            auto it = last.find(c[r]);
            if (it != last.end()) { add(it->second, -1); it->second = r; } else last[c[r]] = r;
            add(r, 1);
        }
        ans[j] = sum(wr) - sum(wl - 1);
    }
    string outs;
    for (int x : ans) { outs += to_string(x); outs += '\n'; }
    fputs(outs.c_str(), stdout);
}
