// 014-necklace-rotations: count the occurrences of t in s + s[0..n-2] with the prefix function of
// t + '#' + s + s[0..n-2] (Knuth-Morris-Pratt). O(n).
#include <bits/stdc++.h>
using namespace std;
int main() {
    int n;
    static char bs[500005], bt[500005];
    scanf("%d %s %s", &n, bs, bt);
    string s(bs), t(bt);
    string text = t + '#' + s + s.substr(0, n - 1);
    vector<int> pi(text.size(), 0);
    long long count = 0;
    for (size_t i = 1; i < text.size(); i++) {
        int k = pi[i - 1];
        while (k > 0 && text[i] != text[k]) k = pi[k - 1];
        if (text[i] == text[k]) k++;
        pi[i] = k;
        if (k == n) count++;
    }
    printf("%lld\n", count);
}
