// Word frequencies with std containers: ordinary -O2 C++, nothing mt-specific.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>
#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 2000;
	std::unordered_map<std::string, int> freq;
	std::vector<std::string> words;
	unsigned x = 12345;
	for (int i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		std::string w = "w" + std::to_string((x >> 16) % 97);
		freq[w]++;
		words.push_back(std::move(w));
	}
	std::map<int, std::vector<std::string>> byf;
	for (auto &kv : freq)
		byf[kv.second].push_back(kv.first);
	std::sort(words.begin(), words.end());
	words.erase(std::unique(words.begin(), words.end()), words.end());
	for (auto it = byf.rbegin(); it != byf.rend() && std::distance(byf.rbegin(), it) < 3; ++it)
		std::printf("%d %zu\n", it->first, it->second.size());
	std::printf("%zu distinct\n", words.size());
	return 0;
}
