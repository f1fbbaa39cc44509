/* Demangling Rust's v0 symbol names ("_R..."), for the names that do not
 * come from llvm-symbolizer (mt-symbolize's symbol-table fallback).
 *
 * Written from the published grammar (rustc's "v0 Symbol Format" chapter,
 * RFC 2603).  The output is the readable form llvm-symbolizer and
 * llvm-cxxfilt print, so that one function has one name whichever way it
 * was named: paths without the crates' disambiguating hashes
 * (`std::rt::lang_start::<()>`), closures and shims as `{closure#N}` and
 * `{shim:vtable#N}`, const generic arguments as their values
 * (`r::arr::<3>`), punycode identifiers decoded, and a `.suffix` after the
 * name (`.llvm.1234`) kept as ` (.llvm.1234)`.  Lifetimes bound by `for<>`
 * are named 'a, 'b, ...; erased ones '_. */
#ifndef MT_RUSTV0_H
#define MT_RUSTV0_H

#include <stddef.h>

/* The demangled form of @name (NUL-terminated) in @out (@cap bytes, NUL-
 * terminated).  Returns its length, or -1 when @name is no v0 name, is
 * malformed, or its demangled form does not fit @cap (then @out is
 * undefined). */
long rustv0_demangle(const char *name, char *out, size_t cap);

#endif
