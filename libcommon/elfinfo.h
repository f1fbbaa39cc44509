/* ELF facts the stages need, read once with libelf: build-id, loadable
 * segments, and a sorted table of function symbols (.symtab, else .dynsym,
 * plus synthesized PLT entries).  Addresses are ELF virtual addresses
 * (file-relative for PIE and shared objects).
 *
 * A file without .symtab (stripped) that has a build-id gets its function
 * symbols from its separate debug file, as perf and gdb do, found at
 * img_debug_candidate's places (imgfind.h, docs/images.md).  It must carry
 * the same build-id.  Without one, the stripped
 * file's symbols are .dynsym and the PLT stubs, plus one "[FILE+0xADDR]"
 * symbol per FDE of its .eh_frame search table (PT_GNU_EH_FRAME) whose start
 * has no symbol: compilers emit one FDE per function (and one per .cold
 * part), so these are function starts and sizes, as unwinders and perf's
 * fallbacks use them.  Code without CFI (hand-written assembly) stays
 * unnamed.
 *
 * Untyped code labels (hand-written assembly) count as function starts,
 * except a label that the code before it falls into: when the symbol before
 * it (unsized, or sized over the label) decodes linearly up to the label
 * and its last instruction other than nop is not ret, jmp, ud2, hlt or int3
 * (ld.so's _start calls _dl_start and falls into _dl_start_user: one
 * function).  A call to a function that does not return, right before a
 * label, is taken as falling through. */
#ifndef MT_ELFINFO_H
#define MT_ELFINFO_H

#include <stddef.h>
#include <stdint.h>

struct elf_sym {
	uint64_t addr, size; /* size 0: extends to the next symbol */
	const char *name;    /* owned by the elfinfo */
	uint8_t is_plt;	     /* a PLT stub ("name@plt") */
	uint8_t is_label;    /* untyped (STT_NOTYPE) code label, not STT_FUNC */
	uint8_t is_fde;	     /* no symbol: an .eh_frame FDE's range, "[FILE+0xADDR]" */
	uint8_t rank;	     /* 0 exported (.dynsym), 1 global/weak, 2 local, 3 FDE */
};

struct elf_seg {
	uint64_t vaddr, memsz, offset, filesz;
	uint32_t flags; /* PF_X | PF_W | PF_R */
};

/* An executable section of PLT stubs (.plt, .plt.sec, .plt.got, .iplt),
 * entries of @entsize bytes (16 when the header says less than 8). */
struct elf_stubsec {
	uint64_t addr, size, entsize;
};

struct elfinfo {
	char *path;
	int is_pie;		  /* ET_DYN */
	uint8_t build_id[20];
	uint8_t build_id_len;	  /* 0: none */
	struct elf_seg *segs;	  /* PT_LOAD, in file order */
	size_t nsegs;
	struct elf_sym *syms;	  /* functions, sorted by addr, deduplicated */
	size_t nsyms;
	struct elf_sym *aliases;  /* the other names of those addresses, sorted by name */
	size_t naliases;
	int has_symtab;		  /* 0: stripped (only .dynsym or nothing) and no debug file */
	char *debug_path;	  /* the separate debug file whose .symtab was used, or NULL */
	char *strpool;
	struct elf_stubsec stubsecs[4];
	unsigned nstubsecs;
	uint64_t eh_hdr, eh_hdr_size; /* PT_GNU_EH_FRAME (.eh_frame_hdr); 0: none */
};

/* 0 on success; negative errno-style value on failure (-ENOENT, -ENOEXEC for
 * not ELF, ...).  The struct is filled; release it with elfinfo_fini(). */
int elfinfo_load(struct elfinfo *ei, const char *path);
/* The same without the symbol table (nsyms 0; has_symtab is still set):
 * build-id and segments only, cheap on large binaries. */
int elfinfo_load_nosyms(struct elfinfo *ei, const char *path);
void elfinfo_fini(struct elfinfo *ei);

/* Build-id only (cheap).  Returns its length (0: none) or negative errno. */
int elf_read_build_id(const char *path, uint8_t out[20]);

/* The function symbol containing @vaddr (by size, or up to the next symbol
 * when size is 0), or NULL. */
const struct elf_sym *elfinfo_lookup(const struct elfinfo *ei, uint64_t vaddr);
/* Is @vaddr in a PLT stub section?  1: yes, with the stub entry's range
 * [*entry, *end) (PLT0 counts as one); 0: no. */
int elfinfo_stub(const struct elfinfo *ei, uint64_t vaddr, uint64_t *entry, uint64_t *end);
/* The code symbol named @name, or NULL.  A name that is an alias (another
 * symbol at the same address: __GI___libc_malloc, __libc_malloc, malloc)
 * gives the function's symbol, which carries its preferred name: the
 * exported one (.dynsym), else global or weak, else local; then the one with
 * fewest leading underscores, then the shortest. */
const struct elf_sym *elfinfo_find(const struct elfinfo *ei, const char *name);
/* The symbol at exactly @addr when @name is one of its names (its own or
 * an alias), else NULL: how another source's name of a function (a debug
 * file's __GI__IO_setb) becomes the function's one preferred name. */
const struct elf_sym *elfinfo_named_at(const struct elfinfo *ei, uint64_t addr, const char *name);
/* File offset of @vaddr through the PT_LOAD segments; -1 if unmapped. */
int64_t elfinfo_vaddr_to_offset(const struct elfinfo *ei, uint64_t vaddr);
/* Virtual address of file offset @off; -1 if not in a segment's file image. */
int64_t elfinfo_offset_to_vaddr(const struct elfinfo *ei, uint64_t off);

/* The C++ landing pad of the call at @vaddr: the call-site table of the
 * LSDA (.gcc_except_table) that the FDE holding @vaddr points to (its
 * augmentation data), found through .eh_frame_hdr's search table; @raw is
 * the file's bytes (@rawsize).  0: known, *pad the pad's address (0: the
 * call has none, or its function no LSDA); -1: unknown (no FDE, a table
 * that cannot be read). */
int elfinfo_landing_pad(const struct elfinfo *ei, const void *raw, size_t rawsize,
			uint64_t vaddr, uint64_t *pad);

/* The file name in the .gnu_debuglink section of the ELF file at @path
 * into @out (@len bytes): its length (0: none, or too long), or negative
 * errno. */
int elf_read_debuglink(const char *path, char *out, size_t len);

/* Hex string of a build-id into @out (>= 41 bytes). */
void buildid_hex(char *out, const uint8_t *id, size_t len);

#endif
