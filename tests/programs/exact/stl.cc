// std containers, strings, iostreams and exceptions thrown inside libstdc++
// (std::stoi), -O2: code nobody here wrote, through PLT stubs into
// libstdc++ and libc, landing pads in main's .cold part.
#include <iostream>
#include <map>
#include <string>
#include <vector>
#include <stdexcept>
#include <algorithm>
int main() {
  std::map<std::string, int> m;
  std::vector<int> v;
  for (int i = 0; i < 40; i++) { m["k" + std::to_string(i % 13)] += i; v.push_back((i * 37) % 11); }
  std::sort(v.begin(), v.end());
  int bad = 0;
  for (const char *s : {"12", "x", "7", "y"}) {
    try { bad += std::stoi(s); } catch (const std::invalid_argument &) { bad += 100; }
  }
  std::cout << m.size() << " " << v[3] << " " << bad << std::endl;
  return 0;
}
