// 008-warehouse-robot: breadth-first search from S over free cells, remembering the move into each cell; the
// route is read back from T. O(nm).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<string> g(n);
    char buf[600];
    for (auto &row : g) { scanf("%s", buf); row = buf; }
    int s = -1, t = -1;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < m; c++) {
            if (g[r][c] == 'S') s = r * m + c;
            if (g[r][c] == 'T') t = r * m + c;
        }
    const int dr[4] = {-1, 1, 0, 0}, dc[4] = {0, 0, -1, 1};
    const char name[4] = {'U', 'D', 'L', 'R'};
    vector<int> dist(n * m, -1), how(n * m, -1), queue_;
    dist[s] = 0;
    queue_.push_back(s);
    for (size_t head = 0; head < queue_.size(); head++) {
        int v = queue_[head], r = v / m, c = v % m;
        for (int k = 0; k < 4; k++) {
            int nr = r + dr[k], nc = c + dc[k];
            if (nr < 0 || nr >= n || nc < 0 || nc >= m || g[nr][nc] == '#') continue;
            int u = nr * m + nc;
            if (dist[u] != -1) continue;
            dist[u] = dist[v] + 1;
            how[u] = k;
            queue_.push_back(u);
        }
    }
    if (dist[t] == -1) { puts("-1"); return 0; }
    string route;
    for (int v = t; v != s; ) {
        int k = how[v];
        route += name[k];
        v = (v / m - dr[k]) * m + (v % m - dc[k]);
    }
    reverse(route.begin(), route.end());
    printf("%d\n%s\n", dist[t], route.c_str());
}
