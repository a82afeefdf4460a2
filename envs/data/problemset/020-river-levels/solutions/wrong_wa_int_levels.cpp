// 020-river-levels, wrong: the same segment tree with 32-bit levels; long floods overflow.
#include <bits/stdc++.h>
using namespace std;
int n;
vector<int> mn, add;
void build(int v, int lo, int hi, const vector<int> &a) {
    if (lo == hi) { mn[v] = a[lo]; return; }
    int mid = (lo + hi) / 2;
    build(2 * v, lo, mid, a);
    build(2 * v + 1, mid + 1, hi, a);
    mn[v] = min(mn[2 * v], mn[2 * v + 1]);
}
void update(int v, int lo, int hi, int l, int r, int x) {
    if (r < lo || hi < l) return;
    if (l <= lo && hi <= r) { mn[v] += x; add[v] += x; return; }
    int mid = (lo + hi) / 2;
    update(2 * v, lo, mid, l, r, x);
    update(2 * v + 1, mid + 1, hi, l, r, x);
    mn[v] = min(mn[2 * v], mn[2 * v + 1]) + add[v];
}
int query(int v, int lo, int hi, int l, int r) {
    if (r < lo || hi < l) return INT_MAX;
    if (l <= lo && hi <= r) return mn[v];
    int mid = (lo + hi) / 2;
    return min(query(2 * v, lo, mid, l, r), query(2 * v + 1, mid + 1, hi, l, r)) + add[v];
}
int main() {
    int q;
    scanf("%d %d", &n, &q);
    vector<int> a(n + 1);
    for (int i = 1; i <= n; i++) scanf("%d", &a[i]);
    mn.assign(4 * n, 0);
    add.assign(4 * n, 0);
    build(1, 1, n, a);
    while (q--) {
        int type, l, r;
        scanf("%d %d %d", &type, &l, &r);
        if (type == 1) {
            int x;
            scanf("%d", &x);
            update(1, 1, n, l, r, x);
        } else {
            printf("%d\n", query(1, 1, n, l, r));
        }
    }
}
