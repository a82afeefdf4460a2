// 007-two-teams, wrong: believes the difference is n mod 2 (it is n(n+1)/2 mod 2), and builds the team to match.
#include <bits/stdc++.h>
using namespace std;
int main() {
    int t;
    scanf("%d", &t);
    while (t--) {
        long long n;
        scanf("%lld", &n);
        long long total = n * (n + 1) / 2, d = n % 2, target = (total - d) / 2, sum = 0;
        vector<long long> team;
        for (long long i = n; i >= 1; i--)
            if (sum + i <= target) { sum += i; team.push_back(i); }
        printf("%lld %zu\n", d, team.size());
        for (size_t i = 0; i < team.size(); i++) printf("%lld%c", team[i], i + 1 < team.size() ? ' ' : '\n');
    }
}
