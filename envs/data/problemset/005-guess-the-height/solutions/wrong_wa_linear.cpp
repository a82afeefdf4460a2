// 005-guess-the-height, wrong: climbs one metre at a time, far more than 30 questions for a high balloon.
#include <bits/stdc++.h>
using namespace std;
int main() {
    long long n;
    cin >> n;
    long long y = 1;
    while (y < n) {
        cout << "? " << y + 1 << endl;
        string answer;
        if (!(cin >> answer)) return 0;
        if (answer != "yes") break;
        y++;
    }
    cout << "! " << y << endl;
}
