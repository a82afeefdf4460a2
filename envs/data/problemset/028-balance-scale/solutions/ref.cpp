// Binary insertion sort: the k-th nugget is placed among the k - 1 sorted ones by binary search, ceil(log2 k)
// weighings; in total sum_k ceil(log2 k) = n ceil(log2 n) - 2^ceil(log2 n) + 1 = Q(n).
#include <bits/stdc++.h>
using namespace std;
bool lighter(int i, int j) {
    printf("? %d %d\n", i, j);
    fflush(stdout);
    char c[4];
    scanf("%3s", c);
    return c[0] == '<';
}
int main() {
    int n;
    scanf("%d", &n);
    vector<int> order;
    for (int x = 1; x <= n; x++) {
        int lo = 0, hi = order.size();  // first position whose nugget is heavier than x
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (lighter(x, order[mid])) hi = mid; else lo = mid + 1;
        }
        order.insert(order.begin() + lo, x);
    }
    printf("!");
    for (int x : order) printf(" %d", x);
    printf("\n");
    fflush(stdout);
}
