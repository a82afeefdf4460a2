// Plain BFS by number of steps, counting the stones on the first shortest walk found: fewest steps is not
// fewest stones.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n, m;
    scanf("%d %d", &n, &m);
    vector<string> g(n);
    static char buf[1024];
    for (auto& row : g) { scanf("%s", buf); row = buf; }
    vector<int> steps(n * m, -1), stones(n * m, 0);
    queue<int> q;
    steps[0] = 0; q.push(0);
    int dr[] = {1, -1, 0, 0}, dc[] = {0, 0, 1, -1};
    while (!q.empty()) {
        int cell = q.front(); q.pop();
        int r = cell / m, c = cell % m;
        for (int k = 0; k < 4; k++) {
            int nr = r + dr[k], nc = c + dc[k];
            if (nr < 0 || nr >= n || nc < 0 || nc >= m) continue;
            int next = nr * m + nc;
            if (steps[next] < 0) {
                steps[next] = steps[cell] + 1;
                stones[next] = stones[cell] + (g[nr][nc] == '#');
                q.push(next);
            }
        }
    }
    printf("%d\n", stones[n * m - 1]);
}
