// Binary search on the length with one polynomial hash computed modulo 2^64 (unsigned overflow) and no string
// comparison: Thue-Morse words collide.
#include <bits/stdc++.h>
using namespace std;
typedef unsigned long long ull;
string s, t;
vector<ull> hs, ht, pw;
ull get(const vector<ull>& h, int i, int L) { return h[i + L] - h[i] * pw[L]; }
int found = -1;
bool check(int L) {
    if (L == 0) return true;
    unordered_map<ull, int> seen;
    seen.reserve(2 * s.size());
    for (int i = 0; i + L <= (int)s.size(); i++) seen.emplace(get(hs, i, L), i);
    for (int i = 0; i + L <= (int)t.size(); i++)
        if (seen.count(get(ht, i, L))) { found = i; return true; }
    return false;
}
int main() {
    static char a[200005], b[200005];
    scanf("%s %s", a, b);
    s = a; t = b;
    const ull B = 131;
    int n = max(s.size(), t.size());
    pw.assign(n + 1, 1);
    for (int i = 1; i <= n; i++) pw[i] = pw[i - 1] * B;
    hs.assign(s.size() + 1, 0); ht.assign(t.size() + 1, 0);
    for (size_t i = 0; i < s.size(); i++) hs[i + 1] = hs[i] * B + s[i];
    for (size_t i = 0; i < t.size(); i++) ht[i + 1] = ht[i] * B + t[i];
    int lo = 0, hi = min(s.size(), t.size()), at = 0;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (check(mid)) { lo = mid; at = found; } else hi = mid - 1;
    }
    printf("%d\n", lo);
    if (lo > 0) printf("%s\n", t.substr(at, lo).c_str());
}
