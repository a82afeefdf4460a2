// 013-road-repairs, wrong: every repaired road merges two regions, even a road inside one region.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    long long regions = n;
    for (int i = 0; i < m; i++) {
        int u, v;
        scanf("%d %d", &u, &v);
        if (regions > 1) regions--;
        printf("%lld\n", regions);
    }
}
