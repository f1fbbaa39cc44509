# fuzz_flags TARGET: the libFuzzer flags of one target (sourced by smoke.sh and
# campaign.sh).  -max_len bounds the inputs libFuzzer makes and cuts longer
# seeds: every record kind and error path fits in it, and an exec's cost grows
# with its input (the MTEV, write and PT targets check every record they get).
fuzz_flags() {
	case $1 in
	mtev | write | ptdecode | ptwalk | ptresync) echo -max_len=4096 ;;
	mtev_text | symtrace) echo -max_len=16384 ;;
	dwcov | perfdata | ptwalkcpu | decstitch) echo -max_len=65536 ;;
	esac
	[ -f "fuzz/$1.dict" ] && echo "-dict=fuzz/$1.dict"
}
