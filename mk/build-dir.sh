# Sourced by the tests (tests/*.bats), bench/ and fuzz/ scripts: sets
# MT_BUILD, the build tree, as an absolute path.  `make` exports it from its
# BUILD (Makefile); run alone, a script or test takes ROOT/build, ROOT being
# $1 (default: the current directory, the repository root).
MT_BUILD=${MT_BUILD:-$(cd "${1:-.}" && pwd)/build}
export MT_BUILD
