// Formatting and parsing with iostreams and stringstreams at -O2.
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 300;
	std::ostringstream os;
	for (int i = 0; i < n; i++)
		os << std::setw(6) << i << ' ' << std::fixed << std::setprecision(3) << i / 7.0 << '\n';
	std::istringstream is(os.str());
	std::vector<double> v;
	int k;
	double d;
	while (is >> k >> d)
		v.push_back(d * k);
	double s = 0;
	for (double e : v)
		s += e;
	std::cout << "n=" << v.size() << " sum=" << std::setprecision(1) << s << std::endl;
	return 0;
}
