# Loaded by ptsim.bats and ptgen.bats: a recording's branches two ways,
# to compare perf's own decoder with mt-ptsim's / mt-ptgen's truth.

# "tid kind from to" per branch, perf script's view (kinds folded the way perf
# prints them: a syscall is "tr end syscall", every resume "tr strt").
perf_branches() {
	perf --buildid-dir "$1/images" script -i "$1/perf.data" --itrace=b -F tid,flags,ip,addr 2>/dev/null |
	awk '{tid=$1; $1=""; sub(/^ +/,"");
	  n=split($0,a," "); to=a[n]; from=a[n-2]; k=$0; sub(/ +[0-9a-f]+ +=> +[0-9a-f]+$/,"",k);
	  if (k=="jmp") k="jump"; else if (k=="tr strt") k="start"; else if (k=="tr end syscall") k="syscall";
	  else if (k ~ /^tr end/) k="end";
	  print tid, k, from, to}' | sort -s -k1,1n
}

# The same from truth.mt.  perf shows no record for the end of a thread whose
# last act was a system call (exit): that "trace-end 0 -> 0" is dropped.
truth_branches() {
	bin/mt-dump "$1/truth.mt" | awk '$1=="branch"{for(i=2;i<=NF;i++){split($i,kv,"="); v[kv[1]]=kv[2]}
	  k=v["type"]; if (k=="trace-start"||k=="sysret"||k=="iret") k="start"; else if (k=="trace-end"||k=="interrupt") k="end";
	  f=v["from"]; t=v["to"]; sub(/^0x/,"",f); sub(/^0x/,"",t);
	  if (!(k=="end" && f=="0" && t=="0")) print v["tid"], k, f, t}' | sort -s -k1,1n
}
