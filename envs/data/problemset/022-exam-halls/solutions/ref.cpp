// Sort exams by first day; a min-heap of (last day, hall) frees the hall that ends earliest.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    scanf("%d", &n);
    vector<array<int, 3>> e(n);
    for (int i = 0; i < n; i++) { scanf("%d %d", &e[i][0], &e[i][1]); e[i][2] = i; }
    sort(e.begin(), e.end());
    priority_queue<pair<int, int>, vector<pair<int, int>>, greater<>> busy;
    vector<int> hall(n);
    int k = 0;
    for (auto& [l, r, i] : e) {
        int h;
        if (!busy.empty() && busy.top().first < l) { h = busy.top().second; busy.pop(); }
        else h = ++k;
        hall[i] = h;
        busy.push({r, h});
    }
    printf("%d\n", k);
    for (int i = 0; i < n; i++) printf("%d%c", hall[i], i + 1 < n ? ' ' : '\n');
}
