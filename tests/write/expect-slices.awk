# expect-slices.awk — from mt-dump text (the input given to mt-write), the
# slices a viewer must show: "name<TAB>tid<TAB>ts<TAB>dur<TAB>depth" per span,
# named by the span's name, else the symbol record for its func (the last,
# physical frame), else a symbol whose entry is func, else 0x<func>
# (formats/mtev-semantics.md).  Spans whose name starts with "bad_" are the
# ones a test expects to be left out, so they are skipped here.
function hex(h,   i, v) {
	v = 0
	for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", tolower(substr(h, i, 1))) - 1
	return v
}
function esc(s,   i, c, out) {
	out = ""
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "\\") out = out "\\\\"
		else if (c == "\t") out = out "\\t"
		else if (c == "\n") out = out "\\n"
		else out = out c
	}
	return out
}
function val(line, key,   i, s, out, c) {
	i = index(line, " " key "=")
	if (!i) return ""
	s = substr(line, i + length(key) + 2)
	if (substr(s, 1, 1) != "\"") { sub(/ .*/, "", s); return s }
	out = ""
	for (i = 2; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "\\") {
			i++; c = substr(s, i, 1)
			if (c == "x") { out = out sprintf("%c", hex(substr(s, i + 1, 2))); i += 2 }
			else out = out c
			continue
		}
		if (c == "\"") break
		out = out c
	}
	return out
}
function lastframe(line,   n, s, i) {
	s = line; n = ""
	while ((i = index(s, " frame=")) > 0) {
		s = substr(s, i)
		n = val(s, "frame")
		s = substr(s, 8)
	}
	return n
}
$1 == "symbol" {
	a = val($0, "addr"); e = val($0, "entry"); n = lastframe($0)
	sym[a] = n
	if (!(e in ent)) ent[e] = n
	next
}
$1 == "span" { spans[++ns] = $0 }
END {
	for (k = 1; k <= ns; k++) {
		l = spans[k]
		name = val(l, "name"); f = val(l, "func")
		if (name == "") name = (f in sym) ? sym[f] : (f in ent) ? ent[f] : f
		if (name ~ /^bad_/) continue
		# escaped as tests/perfetto/tp.js prints strings
		name = esc(name)
		printf "%s\t%s\t%s\t%.0f\t%s\n", name, val(l, "tid"), val(l, "begin"), val(l, "end") - val(l, "begin"), val(l, "depth")
	}
}
