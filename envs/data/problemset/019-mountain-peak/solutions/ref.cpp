// 019-mountain-peak: binary search on the slope: h[mid] < h[mid+1] means the peak is right of mid, otherwise at or
// left of mid. Two questions per halving: 2 * ceil(log2 10^5) = 34 <= 40.
#include <bits/stdc++.h>
using namespace std;
long long ask(int i) {
    printf("? %d\n", i);
    fflush(stdout);
    long long h;
    scanf("%lld", &h);
    return h;
}
int main() {
    int n;
    scanf("%d", &n);
    int lo = 1, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ask(mid) < ask(mid + 1)) lo = mid + 1; else hi = mid;
    }
    printf("! %d\n", lo);
    fflush(stdout);
}
