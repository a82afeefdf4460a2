// 020-river-levels: segment tree for range add / range min without pushing tags down: a node stores the minimum
// of its segment including every add applied to the whole node (add[v]), so mn[v] = min(mn[2v], mn[2v+1]) + add[v]
// and a query adds the tags on its path. O((n + q) log n). Levels reach 2*10^14: 64-bit.
#include <bits/stdc++.h>
using namespace std;
int n;
vector<long long> mn, add;
void build(int v, int lo, int hi, const vector<long long> &a) {
    if (lo == hi) { mn[v] = a[lo]; return; }
    int mid = (lo + hi) / 2;
    build(2 * v, lo, mid, a);
    build(2 * v + 1, mid + 1, hi, a);
    mn[v] = min(mn[2 * v], mn[2 * v + 1]);
}
void update(int v, int lo, int hi, int l, int r, long long x) {
    if (r < lo || hi < l) return;
    if (l <= lo && hi <= r) { mn[v] += x; add[v] += x; return; }
    int mid = (lo + hi) / 2;
    update(2 * v, lo, mid, l, r, x);
    update(2 * v + 1, mid + 1, hi, l, r, x);
    mn[v] = min(mn[2 * v], mn[2 * v + 1]) + add[v];
}
long long query(int v, int lo, int hi, int l, int r) {
    if (r < lo || hi < l) return LLONG_MAX;
    if (l <= lo && hi <= r) return mn[v];
    int mid = (lo + hi) / 2;
    return min(query(2 * v, lo, mid, l, r), query(2 * v + 1, mid + 1, hi, l, r)) + add[v];
}
int main() {
    int q;
    scanf("%d %d", &n, &q);
    vector<long long> a(n + 1);
    for (int i = 1; i <= n; i++) scanf("%lld", &a[i]);
    mn.assign(4 * n, 0);
    add.assign(4 * n, 0);
    build(1, 1, n, a);
    string out;
    while (q--) {
        int type, l, r;
        scanf("%d %d %d", &type, &l, &r);
        if (type == 1) {
            long long x;
            scanf("%lld", &x);
            update(1, 1, n, l, r, x);
        } else {
            out += to_string(query(1, 1, n, l, r));
            out += '\n';
        }
    }
    fputs(out.c_str(), stdout);
}
