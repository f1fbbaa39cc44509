# Sourced by the tests (tests/*.bats), bench/ and fuzz/ scripts: sets
# MT_BUILD, the build tree, as an absolute path.  `make` exports it from its
# BUILD (Makefile); run alone, a test takes build/ beside its tests/ folder,
# a script build/ in the current directory (it has gone to the repository root).
if [ -z "${MT_BUILD:-}" ]; then
	if [ -n "${BATS_TEST_DIRNAME:-}" ]; then
		MT_BUILD=$(cd "$BATS_TEST_DIRNAME/.." && pwd)/build
	else
		MT_BUILD=$(pwd)/build
	fi
fi
export MT_BUILD
