// symbolize.c: turn the raw return addresses of a recording into frames
// (function, file, line, module), inlined calls expanded, with elfutils' libdw.
//
// Each row of `modules` gets its own offline Dwfl with that one file reported
// at its recorded load bias: rows of a library loaded, unloaded and loaded
// again may overlap in address, and one Dwfl cannot hold overlapping modules.
// The file's GNU build-id must match the recorded one, or its frames stay
// unsymbolized (a rebuilt binary would give confident wrong answers).
// debuginfod is never asked: symbolizing must not touch the network.
// This file must not print anything except one warning per unusable module.
#define _GNU_SOURCE
#include "viewer.h"

#include <dlfcn.h>
#include <libiberty/demangle.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// ---------------------------------------------------------------------------
// Modules

// A file opened for symbolizing, kept for the life of the process: `run`
// symbolizes every recording a program tree made (a shell script's children
// share libc, whose compressed debug sections take most of the time), and
// the file is reported at bias 0, so any recording's load address fits it.
// A function symbol of an ELF symbol table.
typedef struct elf_sym {
    GElf_Addr lo, hi; // hi == lo: the symbol has no size
    const char *name; // owned by libelf
    int rank;         // binding: 0 global, 1 weak, 2 other
} elf_sym;

typedef struct elf_file {
    char *path;
    Dwfl *dwfl;
    Dwfl_Module *mod;      // NULL when the file cannot be read
    char build_id[2 * 64 + 1]; // hex; "" when it has none
    // The symbol table sorted by address, built on first need: libdwfl's
    // dwfl_module_addrname scans the whole table for every address, and a
    // program without debug info (bash) asks it for all of its frames.
    elf_sym *syms;
    size_t nsyms;
    bool syms_read;
    // Its compile units by address range, built on first need, for files
    // libdw cannot search by address itself (see unit_by_ranges).
    struct unit_range *units;
    size_t nunits;
    bool units_read;
} elf_file;

static elf_file *opened;
static size_t nopened, capopened;

// A row of `modules` of the recording being symbolized.
typedef struct module {
    char *path, *build_id;
    uint64_t base, lo, hi;
    Dwfl_Module *mod;    // in `opened`; NULL until first used or when unusable
    size_t file;         // index in `opened`, when usable
    bool tried, usable;
} module;

static char *no_debuginfo_path = NULL;

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &no_debuginfo_path,
};

static bool is_own_preload(const char *path) {
    return strcmp(tpprof_basename(path), "libtpprof.so") == 0;
}

static void hex(const unsigned char *bits, int n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        out[2 * i] = digits[bits[i] >> 4];
        out[2 * i + 1] = digits[bits[i] & 15];
    }
    out[2 * n] = 0;
}

// The file at path, opened into its own Dwfl on first use (one Dwfl a file:
// a library loaded twice may overlap itself in address); NULL when out of
// memory. A file that cannot be read is warned about once.
static elf_file *file_open(const char *path) {
    for (size_t i = 0; i < nopened; i++)
        if (strcmp(opened[i].path, path) == 0)
            return &opened[i];
    elf_file *grown = tpprof_grow(opened, nopened, &capopened, sizeof *grown);
    if (!grown)
        return NULL;
    opened = grown;
    elf_file *f = &opened[nopened];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(path)))
        return NULL;
    nopened++;
    f->dwfl = dwfl_begin(&offline_callbacks);
    if (f->dwfl) {
        dwfl_report_begin(f->dwfl);
        f->mod = dwfl_report_elf(f->dwfl, path, path, -1, 0, true);
        dwfl_report_end(f->dwfl, NULL, NULL);
    }
    if (!f->mod) {
        fprintf(stderr, "tpprof: warning: cannot read %s (%s); its frames stay unsymbolized\n", path,
                dwfl_errmsg(-1));
        return f;
    }
    const unsigned char *bits = NULL;
    GElf_Addr vaddr = 0;
    int n = dwfl_module_build_id(f->mod, &bits, &vaddr);
    if (n > 0 && n <= 64)
        hex(bits, n, f->build_id);
    return f;
}

void tpprof_symbolize_release(void) {
    for (size_t i = 0; i < nopened; i++) {
        if (opened[i].dwfl)
            dwfl_end(opened[i].dwfl);
        free(opened[i].path);
        free(opened[i].syms);
        free(opened[i].units);
    }
    free(opened);
    opened = NULL;
    nopened = capopened = 0;
}

static int cmp_sym(const void *a, const void *b) {
    const elf_sym *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->rank - y->rank;
}

static void syms_read(elf_file *f) {
    f->syms_read = true;
    int n = dwfl_module_getsymtab(f->mod);
    if (n <= 1)
        return;
    f->syms = malloc((size_t)n * sizeof *f->syms);
    if (!f->syms)
        return; // names fall back to libdwfl's own scan
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr = 0;
        GElf_Word shndx = 0;
        const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, &shndx, NULL, NULL);
        int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
        if (!name || !name[0] || sym.st_shndx == SHN_UNDEF || addr == 0 ||
            (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
            continue;
        f->syms[f->nsyms++] = (elf_sym){
            .lo = addr,
            .hi = addr + sym.st_size,
            .name = name,
            .rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2,
        };
    }
    qsort(f->syms, f->nsyms, sizeof *f->syms, cmp_sym);
}

// The name of the function symbol holding addr: the sized symbol starting
// closest below it (a global before a weak before a local alias), else the
// closest sizeless one below it; NULL when there is none.
static const char *sym_name(elf_file *f, GElf_Addr addr) {
    if (!f->syms_read)
        syms_read(f);
    if (!f->syms)
        return dwfl_module_addrname(f->mod, addr);
    size_t a = 0, b = f->nsyms; // first symbol starting above addr
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (f->syms[mid].lo <= addr)
            a = mid + 1;
        else
            b = mid;
    }
    const elf_sym *sizeless = NULL;
    // Back over the symbols at or below addr. Sized ones nest rarely; a few
    // steps find the holder, and one that ends below addr ends the search
    // unless a longer one could still hold it.
    for (size_t i = a, steps = 0; i-- > 0 && steps < 64; steps++) {
        const elf_sym *s = &f->syms[i];
        if (s->hi == s->lo) {
            if (!sizeless)
                sizeless = s;
            continue;
        }
        if (addr < s->hi) {
            // The best-ranked alias at this address (sorted by rank).
            while (i > 0 && f->syms[i - 1].lo == s->lo && f->syms[i - 1].hi > addr)
                s = &f->syms[--i];
            return s->name;
        }
    }
    if (!sizeless)
        return NULL;
    while (sizeless > f->syms && sizeless[-1].lo == sizeless->lo)
        sizeless--;
    return sizeless->name;
}

// Whether the code at addr (an address in the file, bias 0) is the C
// library's signal return trampoline (__restore_rt, a local symbol that a
// stripped libc does not name): the return address of a signal handler's
// frame, which gdb shows as "<signal handler called>".
static bool is_sigreturn(elf_file *f, GElf_Addr addr) {
#if defined(__x86_64__)
    static const unsigned char code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}; // mov $15,%rax; syscall
#elif defined(__aarch64__)
    static const unsigned char code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}; // mov x8,#139; svc #0
#else
    static const unsigned char code[] = {0};
    return false;
#endif
    GElf_Addr bias = 0;
    Elf *elf = f->mod ? dwfl_module_getelf(f->mod, &bias) : NULL;
    for (Elf_Scn *scn = NULL; elf && (scn = elf_nextscn(elf, scn)) != NULL;) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) ||
            addr < sh.sh_addr || addr + sizeof code > sh.sh_addr + sh.sh_size)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t at = (size_t)(addr - sh.sh_addr);
        return d && d->d_buf && at + sizeof code <= d->d_size && memcmp((char *)d->d_buf + at, code, sizeof code) == 0;
    }
    return false;
}

// The module's file, on first use; false when its frames stay unsymbolized.
static bool module_open(module *m) {
    if (m->tried)
        return m->usable;
    m->tried = true;
    // "linux-vdso.so.1" and anonymous entries have no file to read. A
    // relative path ("./plugin.so" as given to dlopen) is tried from here.
    if (!m->path || !strchr(m->path, '/'))
        return false;
    elf_file *f = file_open(m->path);
    if (!f || !f->mod)
        return false;
    if (m->build_id && m->build_id[0] && strcasecmp(f->build_id, m->build_id) != 0) {
        fprintf(stderr,
                "tpprof: warning: %s was rebuilt since the recording (build-id %s, recorded %s); "
                "its frames stay unsymbolized\n",
                m->path, f->build_id[0] ? f->build_id : "none", m->build_id);
        return false;
    }
    m->mod = f->mod;
    m->file = (size_t)(f - opened);
    m->usable = true;
    return true;
}

// ---------------------------------------------------------------------------
// Compile units by address, without .debug_aranges.
//
// libdw 0.188 (Debian 12) finds the unit holding an address only through
// .debug_aranges, which clang does not emit (nor gcc for some units): every
// frame of a clang -g build then had its function from the symbol table
// but no file:line. Here each unit's own ranges (DW_AT_low_pc/high_pc or
// DW_AT_ranges, DWARF 4 and 5) are listed once per file and searched. A
// split unit (-gsplit-dwarf) is found through its skeleton: lines come from
// the skeleton's line table, scopes from the split unit in the .dwo.

typedef struct unit_range {
    Dwarf_Addr lo, hi;
    Dwarf_Die unit;  // the unit (a skeleton, for split DWARF): its line table
    Dwarf_Die scope; // where its functions are: the split unit, or the unit
} unit_range;

static int cmp_unit(const void *a, const void *b) {
    const unit_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static void units_read(elf_file *f) {
    f->units_read = true;
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(f->mod, &bias);
    if (!dw)
        return;
    size_t cap = 0;
    Dwarf_CU *cu = NULL;
    Dwarf_Die unit, split;
    uint8_t type = 0;
    while (dwarf_get_units(dw, cu, &cu, NULL, &type, &unit, &split) == 0) {
        bool is_split = type == DW_UT_skeleton && dwarf_tag(&split) == DW_TAG_compile_unit;
        Dwarf_Addr base, lo, hi;
        for (ptrdiff_t off = 0; (off = dwarf_ranges(&unit, off, &base, &lo, &hi)) > 0;) {
            if (hi <= lo)
                continue;
            unit_range *grown = tpprof_grow(f->units, f->nunits, &cap, sizeof *grown);
            if (!grown)
                return; // what was listed is still searched
            f->units = grown;
            f->units[f->nunits++] = (unit_range){lo, hi, unit, is_split ? split : unit};
        }
    }
    if (f->nunits)
        qsort(f->units, f->nunits, sizeof *f->units, cmp_unit);
}

// The unit holding pc (an address of the debug info), or NULL.
static const unit_range *unit_by_ranges(elf_file *f, Dwarf_Addr pc) {
    if (!f->units_read)
        units_read(f);
    size_t a = 0, b = f->nunits; // first range starting above pc
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (f->units[mid].lo <= pc)
            a = mid + 1;
        else
            b = mid;
    }
    // Ranges of different units do not overlap; a unit's own may nest.
    for (size_t i = a, steps = 0; i-- > 0 && steps < 16; steps++)
        if (pc < f->units[i].hi)
            return &f->units[i];
    return NULL;
}

static void module_close(module *m) {
    free(m->path);
    free(m->build_id);
}

// ---------------------------------------------------------------------------
// C++ and Rust names (Rust's legacy scheme, which looks like C++'s with a
// hash at the end, and its v0 scheme, _R...) through libiberty's demangler,
// the one binutils and gdb use: C++ with its signature, Rust without the
// hash.

static char *demangle(const char *name) {
    if (!name || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "_R", 2) != 0))
        return tpprof_strdup(name);
    char *out = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
    return out ? out : tpprof_strdup(name);
}

// ---------------------------------------------------------------------------
// Frames of one address

static int symtab_push(tpprof_symtab *tab, int64_t ip, int32_t idx, const char *function,
                       const char *file, int64_t line, const char *module_path) {
    tpprof_symbol *rows = tpprof_grow(tab->rows, tab->n, &tab->cap, sizeof *rows);
    if (!rows)
        return -1;
    tab->rows = rows;
    tpprof_symbol *s = &tab->rows[tab->n++];
    s->ip = ip;
    s->idx = idx;
    s->function = demangle(function);
    s->file = tpprof_strdup(file);
    s->line = line;
    s->module = tpprof_strdup(module_path);
    return 0;
}

// The name of a subprogram or inlined subroutine: the linkage name when there
// is one (so C++ demangles with its signature), else DW_AT_name.
static const char *die_name(Dwarf_Die *die) {
    Dwarf_Attribute attr;
    const char *name = NULL;
    if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) ||
        dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr))
        name = dwarf_formstring(&attr);
    if (!name && dwarf_attr_integrate(die, DW_AT_name, &attr))
        name = dwarf_formstring(&attr);
    return name;
}

// A source path as the debug info names it, made absolute against the
// compilation directory when that is absolute, with "." and ".." removed
// lexically ("./csu/../csu/x.c" -> "csu/x.c"), into out.
static const char *source_path(const char *file, const char *comp_dir, char *out, size_t size) {
    if (!file)
        return NULL;
    char joined[4096];
    if (file[0] == '/' || !comp_dir || !comp_dir[0])
        snprintf(joined, sizeof joined, "%s", file);
    else
        snprintf(joined, sizeof joined, "%s/%s", comp_dir, file);
    bool absolute = joined[0] == '/';
    // Split into components, dropping "." and popping on ".." (a relative
    // path keeps the ".." it cannot pop).
    const char *parts[512];
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (strcmp(tok, ".") == 0)
            continue;
        if (strcmp(tok, "..") == 0 && n > 0 && strcmp(parts[n - 1], "..") != 0) {
            n--;
            continue;
        }
        if (strcmp(tok, "..") == 0 && absolute)
            continue;
        if (n < 512)
            parts[n++] = tok;
    }
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        int w = snprintf(out + o, size - o, "%s%s", (absolute || i > 0) ? "/" : "", parts[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    if (n == 0)
        snprintf(out, size, absolute ? "/" : ".");
    return out;
}

// Symbolizing one address at a time with dwarf_getscopes walks its
// compilation unit's top-level DIEs from the start for every address: a
// recording of CPython (1,500 addresses, some in a CU of 10,000 DIEs) took
// 1.5 s. So the addresses of a module are grouped by CU and each CU's tree is
// walked once for all of them, descending only into scopes that hold one.

// One address to symbolize.
typedef struct lookup {
    int64_t ip;           // the return address as recorded (looked up at ip - 1)
    Dwarf_Addr addr;      // ip - 1 in the file's addresses (the module's at bias 0)
    Dwarf_Addr pc;        // addr in the debug info's addresses
    Dwarf_Die cu;         // valid when has_cu
    Dwarf_Off cu_off;
    bool has_cu;
    const char *file;     // from the line table (owned by libdw)
    int line;
    int scope;            // innermost function scope holding it (scopes index), -1: none
    bool hit;             // walk_scopes: a scope at the level being walked holds it
} lookup;

// A subprogram or inlined subroutine holding at least one address, with the
// function scope it is nested in (-1 at the top).
typedef struct scope {
    Dwarf_Die die;
    int parent;
} scope;

typedef struct scopes {
    scope *v;
    size_t n, cap;
} scopes;

static bool is_function_scope(int tag) {
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
}

// DIEs whose address ranges may hold the code of a function scope.
static bool is_code_scope(int tag) {
    return is_function_scope(tag) || tag == DW_TAG_lexical_block;
}

// DIEs without an address range of their own whose children may hold code:
// a namespace, and a partial unit imported by dwz.
static bool is_container(int tag) {
    return tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_imported_unit;
}

// The addresses of `in` (n of them, sorted by pc) inside die's ranges, into
// out (room for n), sorted by pc; how many.
static size_t inside(Dwarf_Die *die, lookup **in, size_t n, lookup **out) {
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    size_t m = 0;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        // First address >= lo, then every one below hi.
        size_t a = 0, b = n;
        while (a < b) {
            size_t mid = a + (b - a) / 2;
            if (in[mid]->pc < lo)
                a = mid + 1;
            else
                b = mid;
        }
        for (; a < n && in[a]->pc < hi; a++)
            if (!in[a]->hit) { // ranges that overlap give it once
                in[a]->hit = true;
                out[m++] = in[a];
            }
    }
    // Ranges may come unsorted: restore the order by pc (few, nearly sorted).
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && out[j - 1]->pc > out[j]->pc; j--) {
            lookup *t = out[j - 1];
            out[j - 1] = out[j];
            out[j] = t;
        }
    return m;
}

// Drops the addresses marked hit from v (n, sorted by pc), keeping the order;
// how many remain.
static size_t drop_hit(lookup **v, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i]->hit)
            v[k++] = v[i];
    return k;
}

// Walks the children of `parent` that hold any of the n addresses (sorted by
// pc, none marked hit), recording for each address its innermost function
// scope; marks hit each address some scope below holds. `outer` is the
// function scope around them. As with dwarf_getscopes, the first sibling
// that holds an address takes it (an assembler CU names one routine once for
// each of its aliases). `depth` bounds partial units that import each other.
static int walk_scopes(Dwarf_Die *parent, lookup **in, size_t n, int outer, scopes *sc, int depth) {
    if (n == 0 || depth > 256)
        return 0;
    // cur: the addresses no earlier sibling took; sub: a child's share.
    lookup **cur = malloc(2 * n * sizeof *cur);
    if (!cur)
        return tpprof_error_set("out of memory");
    lookup **sub = cur + n;
    memcpy(cur, in, n * sizeof *cur);
    Dwarf_Die child;
    int result = 0;
    bool more = dwarf_child(parent, &child) == 0;
    for (; more && n > 0 && result == 0; more = dwarf_siblingof(&child, &child) == 0) {
        int tag = dwarf_tag(&child);
        if (is_container(tag)) {
            Dwarf_Die unit, *into = &child;
            Dwarf_Attribute attr;
            if (tag == DW_TAG_imported_unit) {
                if (!dwarf_formref_die(dwarf_attr(&child, DW_AT_import, &attr), &unit))
                    continue;
                into = &unit;
            }
            result = walk_scopes(into, cur, n, outer, sc, depth + 1);
            n = drop_hit(cur, n);
            continue;
        }
        if (!is_code_scope(tag))
            continue;
        size_t m = inside(&child, cur, n, sub); // marks them hit
        if (m == 0)
            continue; // no range here (a declaration, an abstract instance), or none of ours
        n = drop_hit(cur, n);
        int here = outer;
        if (is_function_scope(tag)) {
            scope *v = tpprof_grow(sc->v, sc->n, &sc->cap, sizeof *v);
            if (!v) {
                result = -1;
                break;
            }
            sc->v = v;
            here = (int)sc->n;
            sc->v[sc->n++] = (scope){.die = child, .parent = outer};
            for (size_t i = 0; i < m; i++)
                sub[i]->scope = here;
        }
        // Below, they start unmarked; they stay hit for this level.
        for (size_t i = 0; i < m; i++)
            sub[i]->hit = false;
        result = walk_scopes(&child, sub, m, here, sc, depth + 1);
        for (size_t i = 0; i < m; i++)
            sub[i]->hit = true;
    }
    free(cur);
    return result;
}

// Appends the frames of one address: its function scopes innermost first
// (inlined calls expanded), else the ELF symbol table's name.
static int emit_frames(module *m, const lookup *l, const scopes *sc, tpprof_symtab *out) {
    const char *file = l->file, *comp_dir = NULL;
    int line = l->line;
    char path[4096];
    int32_t idx = 0;
    if (l->has_cu && l->scope >= 0) {
        Dwarf_Attribute attr;
        Dwarf_Die cu = l->cu;
        comp_dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &attr));
        Dwarf_Files *files = NULL;
        size_t nfiles = 0;
        bool have_files = dwarf_getsrcfiles(&cu, &files, &nfiles) == 0;
        for (int k = l->scope; k >= 0; k = sc->v[k].parent) {
            Dwarf_Die die = sc->v[k].die;
            int tag = dwarf_tag(&die);
            if (symtab_push(out, l->ip, idx++, die_name(&die),
                            source_path(file, comp_dir, path, sizeof path), line, m->path) != 0)
                return -1;
            if (tag == DW_TAG_subprogram)
                break;
            // The next frame out is where this inlined call was made.
            Dwarf_Word call_file = 0, call_line = 0;
            file = NULL;
            line = 0;
            if (have_files && dwarf_formudata(dwarf_attr(&die, DW_AT_call_file, &attr), &call_file) == 0 &&
                call_file < nfiles)
                file = dwarf_filesrc(files, call_file, NULL, NULL);
            if (dwarf_formudata(dwarf_attr(&die, DW_AT_call_line, &attr), &call_line) == 0)
                line = (int)call_line;
        }
    }
    if (idx == 0) {
        // No DWARF for this address: the ELF symbol table still names it.
        if (l->has_cu) {
            Dwarf_Attribute attr;
            Dwarf_Die cu = l->cu;
            comp_dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &attr));
        }
        // (A handler's return address is the trampoline's first byte, not a
        // call's next instruction: looked up at addr + 1. First: the nearest
        // symbol below it would be some other function's.)
        const char *name = is_sigreturn(&opened[m->file], l->addr + 1) ? "<signal handler called>"
                                                                        : sym_name(&opened[m->file], l->addr);
        return symtab_push(out, l->ip, 0, name, source_path(file, comp_dir, path, sizeof path), line,
                           m->path);
    }
    return 0;
}

static int cmp_lookup(const void *a, const void *b) {
    const lookup *x = *(lookup *const *)a, *y = *(lookup *const *)b;
    if (x->has_cu != y->has_cu)
        return x->has_cu ? -1 : 1;
    if (x->cu_off != y->cu_off)
        return x->cu_off < y->cu_off ? -1 : 1;
    return (x->pc > y->pc) - (x->pc < y->pc);
}

// Appends the frames of the n return addresses `ips` of module m.
static int symbolize_module(module *m, const int64_t *ips, size_t n, tpprof_symtab *out) {
    if (!module_open(m)) {
        for (size_t i = 0; i < n; i++)
            if (symtab_push(out, ips[i], 0, NULL, NULL, 0, m->path) != 0)
                return -1;
        return 0;
    }
    lookup *ls = calloc(n, sizeof *ls);
    lookup **order = calloc(n, sizeof *order);
    scopes sc = {0};
    int result = 0;
    if (!ls || !order) {
        result = tpprof_error_set("out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        lookup *l = &ls[i];
        Dwarf_Addr addr = (Dwarf_Addr)((uint64_t)ips[i] - 1 - m->base);
        l->ip = ips[i];
        l->addr = addr;
        l->scope = -1;
        Dwfl_Line *ln = dwfl_module_getsrc(m->mod, addr);
        if (ln)
            l->file = dwfl_lineinfo(ln, NULL, &l->line, NULL, NULL, NULL);
        Dwarf_Addr bias = 0;
        Dwarf_Die *cu = dwfl_module_addrdie(m->mod, addr, &bias);
        if (cu) {
            l->cu = *cu;
            // A skeleton (split DWARF): its functions are in the split unit.
            uint8_t type = 0;
            Dwarf_Die split;
            if (dwarf_cu_info(cu->cu, NULL, &type, NULL, &split, NULL, NULL, NULL) == 0 &&
                type == DW_UT_skeleton && dwarf_tag(&split) == DW_TAG_compile_unit)
                l->cu = split;
            l->cu_off = dwarf_dieoffset(&l->cu);
            l->has_cu = true;
            l->pc = addr - bias;
        } else if (dwfl_module_getdwarf(m->mod, &bias)) {
            const unit_range *u = unit_by_ranges(&opened[m->file], addr - bias);
            if (u) {
                l->cu = u->scope;
                l->cu_off = dwarf_dieoffset(&l->cu);
                l->has_cu = true;
                l->pc = addr - bias;
                if (!l->file) {
                    Dwarf_Die unit = u->unit;
                    Dwarf_Line *dl = dwarf_getsrc_die(&unit, l->pc);
                    if (dl) {
                        l->file = dwarf_linesrc(dl, NULL, NULL);
                        dwarf_lineno(dl, &l->line);
                    }
                }
            }
        }
        order[i] = l;
    }
    qsort(order, n, sizeof *order, cmp_lookup);
    for (size_t i = 0; i < n && result == 0;) {
        size_t j = i + 1;
        if (!order[i]->has_cu) {
            i = n; // they sort last
            break;
        }
        while (j < n && order[j]->has_cu && order[j]->cu_off == order[i]->cu_off)
            j++;
        result = walk_scopes(&order[i]->cu, order + i, j - i, -1, &sc, 0);
        i = j;
    }
    for (size_t i = 0; i < n && result == 0; i++)
        result = emit_frames(m, &ls[i], &sc, out);
done:
    free(sc.v);
    free(order);
    free(ls);
    return result;
}

// ---------------------------------------------------------------------------
// Whole database

static int cmp_symbol(const void *a, const void *b) {
    const tpprof_symbol *x = a, *y = b;
    if (x->ip != y->ip)
        return x->ip < y->ip ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static void symtab_sort(tpprof_symtab *tab) {
    if (tab->n)
        qsort(tab->rows, tab->n, sizeof *tab->rows, cmp_symbol);
}

typedef struct owned {
    int64_t ip;
    size_t module;
} owned;

static int cmp_owned(const void *a, const void *b) {
    const owned *x = a, *y = b;
    if (x->module != y->module)
        return x->module < y->module ? -1 : 1;
    return (x->ip > y->ip) - (x->ip < y->ip);
}

static int load_modules(tpprof_db *db, module **out, size_t *count) {
    sqlite3_stmt *st = NULL;
    *out = NULL;
    *count = 0;
    if (sqlite3_prepare_v2(db->sql,
                           "SELECT path, build_id, base, lo, hi FROM modules ORDER BY id", -1, &st,
                           NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading modules");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        module *grown = tpprof_grow(*out, *count, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        *out = grown;
        module *m = &(*out)[(*count)++];
        memset(m, 0, sizeof *m);
        m->path = tpprof_strdup((const char *)sqlite3_column_text(st, 0));
        m->build_id = tpprof_strdup((const char *)sqlite3_column_text(st, 1));
        m->base = (uint64_t)sqlite3_column_int64(st, 2);
        m->lo = (uint64_t)sqlite3_column_int64(st, 3);
        m->hi = (uint64_t)sqlite3_column_int64(st, 4);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading modules");
    return 0;
}

// The distinct ips of the stack nodes, gathered through an open-addressing
// set (a PyTorch run's 3.7 M nodes have a few hundred thousand ips; sorting
// them all to drop repeats was a quarter of `tpprof run`'s symbolizing).
struct ip_list {
    int64_t *ips; // distinct, in no order
    size_t n, cap;
    tpprof_u64_set set; // ip + 1
    bool has_max; // UINT64_MAX, which set cannot hold as ip + 1
};

static int add_ip(void *arg, int64_t id, int64_t parent, int64_t ip) {
    (void)id, (void)parent;
    struct ip_list *l = arg;
    uint64_t key = (uint64_t)ip + 1;
    int added;
    if (key == 0) { // ip is -1 as int64 (UINT64_MAX)
        added = !l->has_max;
        l->has_max = true;
    } else if ((added = tpprof_u64_set_add(&l->set, key)) < 0) {
        return -1;
    }
    if (!added)
        return 0;
    int64_t *grown = tpprof_grow(l->ips, l->n, &l->cap, sizeof *grown);
    if (!grown)
        return -1;
    l->ips = grown;
    l->ips[l->n++] = ip;
    return 0;
}

// Symbolizes the distinct ips l gathered (taking l's arrays).
static int symbolize_distinct(tpprof_db *db, struct ip_list *l, tpprof_symtab *out);

int tpprof_symbolize(tpprof_db *db, tpprof_symtab *out) {
    // The distinct ips, gathered here (the recorder keeps nodes in chunks
    // that SQL's DISTINCT would have to decode through the stack_nodes view).
    struct ip_list l = {0};
    if (tpprof_stack_nodes_each(db, add_ip, &l) != 0) {
        tpprof_u64_set_free(&l.set);
        free(l.ips);
        return -1;
    }
    return symbolize_distinct(db, &l, out);
}

int tpprof_symbolize_ips(tpprof_db *db, const int64_t *ips, size_t n, tpprof_symtab *out) {
    struct ip_list l = {0};
    for (size_t i = 0; i < n; i++)
        if (add_ip(&l, 0, 0, ips[i]) != 0) {
            tpprof_u64_set_free(&l.set);
            free(l.ips);
            return tpprof_error_set("out of memory");
        }
    return symbolize_distinct(db, &l, out);
}

static int symbolize_distinct(tpprof_db *db, struct ip_list *l, tpprof_symtab *out) {
    tpprof_u64_set_free(&l->set);
    int64_t *ips = l->ips;
    size_t nips = l->n;
    // Symbolizing must never reach the network (docs: debuginfod disabled).
    unsetenv("DEBUGINFOD_URLS");
    module *mods = NULL;
    size_t nmods = 0;
    if (load_modules(db, &mods, &nmods) != 0) {
        free(ips);
        return -1;
    }
    int result = 0;
    // Each address goes to the latest module row holding it (a dlopen after
    // a dlclose reuses addresses); -1: none.
    // Grouped by owning module (nmods: none), each group in one pass.
    owned *own = result == 0 && nips ? malloc(nips * sizeof *own) : NULL;
    int64_t *batch = own ? malloc(nips * sizeof *batch) : NULL;
    if (result == 0 && nips && !batch)
        result = tpprof_error_set("out of memory");
    for (size_t i = 0; i < nips && result == 0; i++) {
        uint64_t u = (uint64_t)ips[i];
        own[i] = (owned){.ip = ips[i], .module = nmods};
        for (size_t j = nmods; j-- > 0;)
            if (u - 1 >= mods[j].lo && u - 1 < mods[j].hi) {
                own[i].module = j;
                break;
            }
    }
    if (result == 0 && nips)
        qsort(own, nips, sizeof *own, cmp_owned);
    tpprof_py_table *py = NULL;
    if (result == 0 && nips)
        result = tpprof_py_table_load(db, &py);
    for (size_t i = 0; i < nips && result == 0;) {
        size_t k = own[i].module, nb = 0;
        for (; i < nips && own[i].module == k; i++)
            batch[nb++] = own[i].ip;
        if (k == nmods) { // in no module: unknown, or a Python frame (pyframes.c)
            const char *fn, *file;
            int64_t line;
            for (size_t j = 0; j < nb && result == 0; j++)
                result = tpprof_py_table_find(py, batch[j], &fn, &file, &line)
                             ? symtab_push(out, batch[j], 0, fn, file, line, NULL)
                             : symtab_push(out, batch[j], 0, NULL, NULL, 0, NULL);
            continue;
        }
        module *m = &mods[k];
        if (is_own_preload(m->path))
            m->tried = true; // never symbolize our own frames; they are dropped anyway
        result = symbolize_module(m, batch, nb, out);
    }
    tpprof_py_table_free(py);
    free(batch);
    free(own);
    free(ips);
    for (size_t i = 0; i < nmods; i++)
        module_close(&mods[i]);
    free(mods);
    symtab_sort(out);
    return result;
}

// ---------------------------------------------------------------------------
// A merged recording (cmd_merge.c): ip >> 48 is the input (the process)
// whose modules place ip & IP_LOW; modules.process says whose a row is.
// Each (module file, offset) is looked up once for all processes, then its
// frames are copied to every ip that has it: a build's 170 cc1, as and gcc
// processes share most of their code, which symbolizing each recording
// looked up again in every one.

#define IP_LOW ((UINT64_C(1) << 48) - 1)

typedef struct merged_ip {
    int64_t ip;   // tagged
    size_t file;  // its module's identity (index in idents), or SIZE_MAX
    uint64_t off; // ip - the module's base: what the identity's lookup is keyed by
} merged_ip;

static int cmp_merged_ip(const void *a, const void *b) {
    const merged_ip *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

size_t tpprof_symtab_first(const tpprof_symtab *tab, int64_t ip) {
    size_t a = 0, b = tab->n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (tab->rows[mid].ip < ip)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

static int copy_row(tpprof_symtab *out, const tpprof_symbol *r, int64_t ip) {
    tpprof_symbol *rows = tpprof_grow(out->rows, out->n, &out->cap, sizeof *rows);
    if (!rows)
        return -1;
    out->rows = rows;
    out->rows[out->n++] = (tpprof_symbol){.ip = ip, .idx = r->idx, .line = r->line,
                                          .function = tpprof_strdup(r->function),
                                          .file = tpprof_strdup(r->file), .module = tpprof_strdup(r->module)};
    return 0;
}

// A row of SELECT DISTINCT ip FROM symbols into l's set.
static int add_symbol_ip(void *arg, int n, char **vals, char **names) {
    (void)names;
    struct ip_list *l = arg;
    uint64_t key = n > 0 && vals[0] ? (uint64_t)strtoll(vals[0], NULL, 10) + 1 : 0;
    if (key == 0) // (UINT64_MAX: never a frame of a merged recording)
        return 0;
    return tpprof_u64_set_add(&l->set, key) < 0;
}

int tpprof_symbolize_merged(tpprof_db *db, tpprof_symtab *out, size_t *lookups) {
    unsetenv("DEBUGINFOD_URLS");
    if (lookups)
        *lookups = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT path, build_id, base, lo, hi, process FROM modules ORDER BY id", -1, &st,
                           NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading modules");
    module *mods = NULL, *idents = NULL;
    int64_t *proc = NULL;
    size_t nmods = 0, cap = 0, capp = 0, nidents = 0, capi = 0;
    size_t *ident_of = NULL;
    int rc, result = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        module *grown = tpprof_grow(mods, nmods, &cap, sizeof *grown);
        int64_t *pg = grown ? tpprof_grow(proc, nmods, &capp, sizeof *pg) : NULL;
        if (grown)
            mods = grown;
        if (!pg) {
            result = -1;
            break;
        }
        proc = pg;
        module *m = &mods[nmods];
        memset(m, 0, sizeof *m);
        m->path = tpprof_strdup((const char *)sqlite3_column_text(st, 0));
        m->build_id = tpprof_strdup((const char *)sqlite3_column_text(st, 1));
        m->base = (uint64_t)sqlite3_column_int64(st, 2);
        m->lo = (uint64_t)sqlite3_column_int64(st, 3);
        m->hi = (uint64_t)sqlite3_column_int64(st, 4);
        proc[nmods++] = sqlite3_column_int64(st, 5);
    }
    sqlite3_finalize(st);
    if (result == 0 && rc != SQLITE_DONE)
        result = tpprof_db_error(db, "reading modules");
    // Each module row's identity: its path and build id (the same file in
    // every process that loaded it), as one module at base 0, so that an
    // offset is its address.
    ident_of = result == 0 && nmods ? malloc(nmods * sizeof *ident_of) : NULL;
    if (result == 0 && nmods && !ident_of)
        result = tpprof_error_set("out of memory");
    for (size_t i = 0; i < nmods && result == 0; i++) {
        const module *m = &mods[i];
        size_t u = 0;
        for (; u < nidents; u++)
            if (strcmp(idents[u].path ? idents[u].path : "", m->path ? m->path : "") == 0 &&
                strcmp(idents[u].build_id ? idents[u].build_id : "", m->build_id ? m->build_id : "") == 0)
                break;
        if (u == nidents) {
            module *grown = tpprof_grow(idents, nidents, &capi, sizeof *grown);
            if (!grown) {
                result = -1;
                break;
            }
            idents = grown;
            idents[nidents] = (module){.path = tpprof_strdup(m->path), .build_id = tpprof_strdup(m->build_id),
                                       .lo = 0, .hi = UINT64_MAX};
            if (is_own_preload(m->path ? m->path : ""))
                idents[nidents].tried = true; // never symbolized: dropped anyway
            nidents++;
        }
        ident_of[i] = u;
    }
    // The distinct ips of the nodes that have no symbols yet (an input that
    // was symbolized brought its own).
    struct ip_list l = {0}, have = {0};
    if (result == 0)
        result = tpprof_stack_nodes_each(db, add_ip, &l);
    if (result == 0 && sqlite3_exec(db->sql, "SELECT DISTINCT ip FROM symbols", add_symbol_ip, &have, NULL) != SQLITE_OK)
        result = tpprof_db_error(db, "reading symbols");
    merged_ip *v = result == 0 && l.n ? malloc(l.n * sizeof *v) : NULL;
    size_t nv = 0;
    if (result == 0 && l.n && !v)
        result = tpprof_error_set("out of memory");
    for (size_t i = 0; i < l.n && result == 0; i++) {
        uint64_t u = (uint64_t)l.ips[i];
        if (tpprof_u64_set_has(&have.set, u + 1))
            continue; // named already
        int64_t k = (int64_t)(u >> 48);
        uint64_t raw = u & IP_LOW;
        merged_ip *x = &v[nv++];
        *x = (merged_ip){.ip = l.ips[i], .file = SIZE_MAX};
        // The latest module row of its process holding it, as tpprof_symbolize.
        for (size_t j = nmods; j-- > 0;)
            if (proc[j] == k && raw - 1 >= mods[j].lo && raw - 1 < mods[j].hi) {
                x->file = ident_of[j];
                x->off = raw - mods[j].base;
                break;
            }
    }
    tpprof_u64_set_free(&l.set);
    free(l.ips);
    tpprof_u64_set_free(&have.set);
    free(have.ips);
    if (nv)
        qsort(v, nv, sizeof *v, cmp_merged_ip);
    int64_t *offs = result == 0 && nv ? malloc(nv * sizeof *offs) : NULL;
    if (result == 0 && nv && !offs)
        result = tpprof_error_set("out of memory");
    for (size_t i = 0; i < nv && result == 0;) {
        size_t f = v[i].file, start = i;
        if (f == SIZE_MAX) { // in no module: unknown (a Python frame's row came with its input)
            for (; i < nv; i++)
                if ((result = symtab_push(out, v[i].ip, 0, NULL, NULL, 0, NULL)) != 0)
                    break;
            break;
        }
        size_t no = 0;
        for (; i < nv && v[i].file == f; i++)
            if (!no || (uint64_t)offs[no - 1] != v[i].off)
                offs[no++] = (int64_t)v[i].off;
        if (lookups)
            *lookups += no;
        tpprof_symtab once = {0};
        result = symbolize_module(&idents[f], offs, no, &once);
        if (result == 0)
            symtab_sort(&once);
        for (size_t j = start; j < i && result == 0; j++)
            for (size_t r = tpprof_symtab_first(&once, (int64_t)v[j].off); r < once.n && once.rows[r].ip == (int64_t)v[j].off; r++)
                if ((result = copy_row(out, &once.rows[r], v[j].ip)) != 0)
                    break;
        tpprof_symtab_free(&once);
    }
    free(offs);
    free(v);
    for (size_t i = 0; i < nmods; i++)
        module_close(&mods[i]);
    for (size_t i = 0; i < nidents; i++)
        module_close(&idents[i]);
    free(mods);
    free(idents);
    free(proc);
    free(ident_of);
    symtab_sort(out);
    return result;
}

// ---------------------------------------------------------------------------
// Storage

int tpprof_symtab_load(tpprof_db *db, tpprof_symtab *out) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql, "SELECT ip, idx, function, file, line, module FROM symbols",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading symbols");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        tpprof_symbol *rows = tpprof_grow(out->rows, out->n, &out->cap, sizeof *rows);
        if (!rows) {
            sqlite3_finalize(st);
            return -1;
        }
        out->rows = rows;
        tpprof_symbol *s = &out->rows[out->n++];
        s->ip = sqlite3_column_int64(st, 0);
        s->idx = (int32_t)sqlite3_column_int64(st, 1);
        s->function = tpprof_strdup((const char *)sqlite3_column_text(st, 2));
        s->file = tpprof_strdup((const char *)sqlite3_column_text(st, 3));
        s->line = sqlite3_column_int64(st, 4);
        s->module = tpprof_strdup((const char *)sqlite3_column_text(st, 5));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading symbols");
    symtab_sort(out);
    return 0;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

int tpprof_symtab_save(tpprof_db *db, const tpprof_symtab *tab) {
    if (sqlite3_exec(db->sql, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "saving symbols");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db->sql,
                           "INSERT OR REPLACE INTO symbols(ip, idx, function, file, line, module) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, &st, NULL) != SQLITE_OK)
        goto fail;
    for (size_t i = 0; i < tab->n; i++) {
        const tpprof_symbol *s = &tab->rows[i];
        sqlite3_bind_int64(st, 1, s->ip);
        sqlite3_bind_int64(st, 2, s->idx);
        bind_text_or_null(st, 3, s->function);
        bind_text_or_null(st, 4, s->file);
        if (s->line > 0)
            sqlite3_bind_int64(st, 5, s->line);
        else
            sqlite3_bind_null(st, 5);
        bind_text_or_null(st, 6, s->module);
        if (sqlite3_step(st) != SQLITE_DONE)
            goto fail;
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_exec(db->sql, "INSERT OR REPLACE INTO meta(key, value) VALUES ('symbolized', '1')",
                     NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    if (sqlite3_exec(db->sql, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    return 0;
fail:
    tpprof_db_error(db, "saving symbols");
    sqlite3_finalize(st);
    sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

void tpprof_symtab_free(tpprof_symtab *tab) {
    for (size_t i = 0; i < tab->n; i++) {
        free(tab->rows[i].function);
        free(tab->rows[i].file);
        free(tab->rows[i].module);
    }
    free(tab->rows);
    tab->rows = NULL;
    tab->n = tab->cap = 0;
}

int tpprof_symbolize_file(const char *path) {
    tpprof_db *db = tpprof_db_open(path, true);
    if (!db)
        return -1;
    int64_t have = 0;
    int result = tpprof_db_scalar(db, "SELECT COUNT(*) FROM symbols", &have);
    if (result == 0 && have == 0) {
        tpprof_symtab tab = {0};
        result = tpprof_symbolize(db, &tab);
        if (result == 0)
            result = tpprof_symtab_save(db, &tab);
        tpprof_symtab_free(&tab);
    }
    tpprof_db_close(db);
    return result;
}
