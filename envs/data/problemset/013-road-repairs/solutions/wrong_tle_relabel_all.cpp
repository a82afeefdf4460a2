// 013-road-repairs, too slow: region labels; a merge relabels by scanning all towns. O(n * m).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<int> label(n + 1);
    iota(label.begin(), label.end(), 0);
    int regions = n;
    for (int i = 0; i < m; i++) {
        int u, v;
        scanf("%d %d", &u, &v);
        int a = label[u], b = label[v];
        if (a != b) {
            for (int t = 1; t <= n; t++) if (label[t] == b) label[t] = a;
            regions--;
        }
        printf("%d\n", regions);
    }
}
