/* rustv0: Rust v0 symbol names demangled as llvm-cxxfilt (LLVM 14) prints
 * them.  The expected strings are llvm-cxxfilt's output for each name: names
 * rustc 1.95 gave a program built with -C symbol-mangling-version=v0, and
 * names written from the grammar (dyn bounds with bindings, fn pointers
 * with binders and ABIs, const arguments, shims). */
#include <string.h>

#include "rustv0.h"
#include "t.h"

static const struct {
	const char *in, *out;
} ok[] = {
	{"_RINvCs1_3foo3barTllEBe_E", "foo::bar::<(i32, i32), (i32, i32)>"}, /* a backref */
	{"_RINvCs1_3foo3barDG_NtB2_2Trp3OutRL0_eEL_EB2_",
	 "foo::bar::<dyn for<'a> foo::Tr<Out = &'a str>>"},
	{"_RINvCs1_3foo3barDINtB2_2TrlEp3OutuEL_EB2_",
	 "foo::bar::<dyn foo::Tr<i32, Out = ()>>"},
	{"_RINvCs1_3foo3barFG0_KCRL0_hRL1_hEuEB2_",
	 "foo::bar::<for<'a, 'b> extern \"C\" fn(&'b u8, &'a u8)>"},
	{"_RINvCs1_3foo3barFUK9rust_calllEtEB2_",
	 "foo::bar::<unsafe extern \"rust-call\" fn(i32) -> u16>"},
	{"_RNvYNtCs1_3foo1SNtB4_2Tr1f",
	 "<foo::S as foo::Tr>::f"},
	{"_RNvXs_Cs1_3fooNtB4_1SNtB4_2Tr1f",
	 "<foo::S as foo::Tr>::f"},
	{"_RINvCs1_3foo3barKan5_Kb1_Kc61_Kj1234567890abcdef12_Kc27_KpEB2_",
	 "foo::bar::<-5, true, 'a', 0x1234567890abcdef12, '\\'', _>"},
	{"_RINvCs1_3foo3barOpPuSQhEB2_",
	 "foo::bar::<*mut _, *const (), [&mut u8]>"},
	{"_RNSNvCs1_3foo1fs0_6vtable",
	 "foo::f::{shim:vtable#2}"},
	{"_RINvCs1_3foo3barDNtB2_2TrNtNtB2_1m4SendEL_EB2_",
	 "foo::bar::<dyn foo::Tr + foo::m::Send>"},
	{"_RINvCs1_3foo3barTlEKc5c_Kcfc_Kc7f_EB2_",
	 "foo::bar::<(i32,), '\\\\', '\\u{fc}', '\\u{7f}'>"},
	{"_RINvCslcjRCX3mt6M_2r2u9gre_6ka8lKc27_Kb0_Kx75bcd15_EB2_",
	 "r2::grüße::<'\\'', false, 123456789>"},
	{"_RINvCslcjRCX3mt6M_2r2u9gre_6ka8lKcfc_Kb1_Kxn5_EB2_",
	 "r2::grüße::<'\\u{fc}', true, -5>"},
	{"_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCslNYArtu3iFV_5alloc5boxed3BoxDG0_INtNtNtB4_3ops8function2FnTRL1_INtNtCsjrHSEGnQ3l9_3std5panic13PanicHookInfoL0_EEEp6OutputuNtNtB4_6marker4SyncNtB2N_4SendEL_EEB1T_",
	 "core::ptr::drop_in_place::<alloc::boxed::Box<dyn for<'a, 'b> core::ops::function::Fn<(&'a std::panic::PanicHookInfo<'b>,), Output = ()> + core::marker::Sync + core::marker::Send>>"},
	{"_RINvNtNtCsjrHSEGnQ3l9_3std3sys9backtrace28___rust_begin_short_backtraceFEuuECslcjRCX3mt6M_2r2",
	 "std::sys::backtrace::__rust_begin_short_backtrace::<fn(), ()>"},
};

/* names llvm-cxxfilt leaves alone too */
static const char *const bad[] = {
	"_ZN3foo3barE",                          /* Itanium */
	"_RNvCs6GmmlP4bgsG_1r4mainXYZ",          /* trailing garbage */
	"_RINvCs1_3foo3barATlyEKj5_EB2_",        /* array length with K */
	"_RNvNSB4_3foo3bar",                     /* backref forwards */
	"_RINvCs1_3foo3barKj_EB2_",              /* a const without digits */
	"_RINvCs1_3foo3barDNtB2_2TrEL0_EB2_",    /* lifetime not bound */
	"_R",
	"_RC",
	"_RNvCs1_3foo99bar",                     /* identifier past the end */
};

int main(void)
{
	char buf[4096];
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		long l = rustv0_demangle(ok[i].in, buf, sizeof buf);
		T_CHECK(l >= 0 && (size_t)l == strlen(ok[i].out) && !strcmp(buf, ok[i].out),
			"%s -> %s (got %s)", ok[i].in, ok[i].out, l >= 0 ? buf : "-1");
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		T_CHECK(rustv0_demangle(bad[i], buf, sizeof buf) < 0, "%s refused", bad[i]);
	/* too small a buffer: refused, not cut */
	T_CHECK(rustv0_demangle(ok[0].in, buf, 10) < 0, "output that does not fit");
	/* backrefs that double the output at each step (2^40 bytes): refused
	 * when the output no longer fits, without expanding the rest */
	char big[1024] = "_RINvCs1_3foo3barTllE";
	size_t prev = 15; /* offsets after "_R" */
	for (int k = 0; k < 40; k++) {
		size_t at = strlen(big) - 2;
		char b62[8];
		size_t v = prev - 1, n = 0;
		do
			b62[n++] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[v % 62];
		while ((v /= 62));
		char e[20];
		size_t w = 0;
		e[w++] = 'B';
		while (n)
			e[w++] = b62[--n];
		e[w++] = '_';
		e[w] = 0;
		strcat(big, "T");
		strcat(big, e);
		strcat(big, e);
		strcat(big, "E");
		prev = at;
	}
	strcat(big, "E");
	T_CHECK(rustv0_demangle(big, buf, sizeof buf) < 0, "exponential backrefs refused");
	return T_DONE();
}
