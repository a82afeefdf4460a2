// 0-1 BFS on the grid: entering soil costs 0 (push front), entering stone costs 1 (push back).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<string> g(n);
    static char buf[1024];
    for (auto& row : g) { scanf("%s", buf); row = buf; }
    vector<int> dist(n * m, INT_MAX);
    deque<int> dq;
    dist[0] = 0; dq.push_back(0);
    int dr[] = {1, -1, 0, 0}, dc[] = {0, 0, 1, -1};
    while (!dq.empty()) {
        int cell = dq.front(); dq.pop_front();
        int r = cell / m, c = cell % m;
        for (int k = 0; k < 4; k++) {
            int nr = r + dr[k], nc = c + dc[k];
            if (nr < 0 || nr >= n || nc < 0 || nc >= m) continue;
            int w = g[nr][nc] == '#', nd = dist[cell] + w, next = nr * m + nc;
            if (nd < dist[next]) { dist[next] = nd; if (w) dq.push_back(next); else dq.push_front(next); }
        }
    }
    printf("%d\n", dist[n * m - 1]);
}
