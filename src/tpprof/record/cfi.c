// cfi.c: an x86-64 DWARF call frame information reader for the stack walk
// (cfiwalk.c), inside the hooks.
//
// Given a code address it finds the module's .eh_frame_hdr with
// _dl_find_object (glibc 2.35+: lock-free, no malloc, safe in a hook, unlike
// dl_iterate_phdr, which takes the loader's lock), binary-searches its table
// for the FDE, parses the FDE and its CIE, runs the CFA program up to the
// address and reduces the row it reaches to a simple rule (cfi.h).
// Deliberately left out: DWARF expressions (a CFA or a register computed by
// one: PLT entries, stack realignment, signal trampolines), registers other
// than rsp and rbp as the CFA's base, modules without a binary-search table,
// .debug_frame. Each of those answers TPPROF_CFI_NONE and libunwind walks that
// stack. Unaligned fields are read with memcpy (UBSan).
// Runs inside malloc hooks: no locks, no malloc, a few hundred bytes of stack.
#define _GNU_SOURCE
#include "record/cfi.h"

#include <dlfcn.h>
#include <features.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Reading the tables.

static inline uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t uleb(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) break;
    }
    if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

// DW_EH_PE_* pointer encodings.
enum {
    PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
    PE_SLEB128 = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
    PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_INDIRECT = 0x80, PE_OMIT = 0xff,
};

// A pointer in encoding enc at *p (moved past it). pcrel is relative to the
// field, datarel to `datarel` (0: none here); the indirect bit is not
// followed (only a personality routine has it, and it is skipped). False
// for a format or an application this reader does not take.
static bool read_ptr(const uint8_t **p, const uint8_t *end, uint8_t enc, uintptr_t datarel, uintptr_t *out) {
    const uint8_t *at = *p;
    uint64_t v = 0;
    size_t n = 0;
    switch (enc & 0x0f) {
    case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: n = 8; break;
    case PE_UDATA2: case PE_SDATA2: n = 2; break;
    case PE_UDATA4: case PE_SDATA4: n = 4; break;
    case PE_ULEB128: v = uleb(p, end); break;
    case PE_SLEB128: v = (uint64_t)sleb(p, end); break;
    default: return false;
    }
    if (n) {
        if ((size_t)(end - at) < n) return false;
        switch (enc & 0x0f) {
        case PE_UDATA2: v = rd16(at); break;
        case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)rd16(at); break;
        case PE_UDATA4: v = rd32(at); break;
        case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)rd32(at); break;
        default: v = rd64(at); break;
        }
        *p = at + n;
    }
    switch (enc & 0x70) {
    case 0: break;
    case PE_PCREL: v += (uintptr_t)at; break;
    case PE_DATAREL:
        if (!datarel) return false;
        v += datarel;
        break;
    default: return false;
    }
    *out = (uintptr_t)v;
    return true;
}

// ---------------------------------------------------------------------------
// CIE and FDE.

struct cie {
    uint64_t code_align, ra_reg;
    int64_t data_align;
    uint8_t fde_enc;
    bool z, signal;
    const uint8_t *insns, *end;
};

static bool parse_cie(const uint8_t *c, struct cie *out) {
    uint32_t len = rd32(c);
    if (len == 0 || len == 0xffffffffu) return false; // (64-bit lengths: not in .eh_frame as linkers write it)
    const uint8_t *p = c + 4, *end = p + len;
    if (rd32(p) != 0) return false; // not a CIE
    p += 4;
    uint8_t version = *p++;
    if (version != 1 && version != 3 && version != 4) return false;
    const char *aug = (const char *)p;
    size_t alen = strnlen(aug, (size_t)(end - p));
    if (p + alen >= end) return false;
    p += alen + 1;
    if (version == 4) p += 2; // address and segment sizes
    if (aug[0] == 'e' && aug[1] == 'h') return false;
    out->code_align = uleb(&p, end);
    out->data_align = sleb(&p, end);
    out->ra_reg = version == 1 ? *p++ : uleb(&p, end);
    out->fde_enc = PE_ABSPTR;
    out->z = aug[0] == 'z';
    out->signal = false;
    if (out->z) {
        uint64_t n = uleb(&p, end);
        if (n > (uint64_t)(end - p)) return false;
        const uint8_t *aend = p + n;
        for (size_t i = 1; i < alen; i++) {
            switch (aug[i]) {
            case 'L': p++; break; // the LSDA's encoding (the FDE's data, skipped whole)
            case 'P': {
                uint8_t e = *p++;
                uintptr_t ignored;
                if (!read_ptr(&p, aend, (uint8_t)(e & 0x7f), 1, &ignored)) return false;
                break;
            }
            case 'R': out->fde_enc = *p++; break;
            case 'S': out->signal = true; break;
            case 'B': case 'G': break; // (aarch64's pointer authentication, memory tagging)
            default: return false;     // unknown: where 'R' lies is not known
            }
            if (p > aend) return false;
        }
        p = aend;
    }
    out->insns = p;
    out->end = end;
    return true;
}

// The row of the CFA table, for the registers a walk needs.
enum { RULE_SAME = 0, RULE_UNDEF, RULE_OFFSET, RULE_OTHER };
struct reg_rule {
    uint8_t how;
    int64_t off;
};
struct row {
    uint64_t cfa_reg;
    int64_t cfa_off;
    bool cfa_expr;
    struct reg_rule rbp, ra;
};
enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16, REMEMBER_MAX = 8 };

static void set_rule(struct row *r, uint64_t reg, uint8_t how, int64_t off) {
    struct reg_rule v = {how, off};
    if (reg == REG_RBP) r->rbp = v;
    else if (reg == REG_RA) r->ra = v;
}

static void restore_rule(struct row *r, const struct row *init, uint64_t reg) {
    if (reg == REG_RBP) r->rbp = init->rbp;
    else if (reg == REG_RA) r->ra = init->ra;
}

// Runs the CFA program [p, end) from address loc, stopping before the first
// advance past pc (init: the row after the CIE's program, for
// DW_CFA_restore; NULL while running that one). False on an opcode this
// reader does not know.
static bool run_program(const uint8_t *p, const uint8_t *end, const struct cie *c, uintptr_t loc, uintptr_t pc,
                        struct row *row, const struct row *init) {
    struct row stack[REMEMBER_MAX];
    int depth = 0;
    while (p < end) {
        uint8_t op = *p++, low = op & 0x3f;
        uintptr_t next = loc;
        switch (op >> 6) {
        case 1: // DW_CFA_advance_loc
            next = loc + low * c->code_align;
            if (next > pc) return true;
            loc = next;
            continue;
        case 2: // DW_CFA_offset
            set_rule(row, low, RULE_OFFSET, (int64_t)uleb(&p, end) * c->data_align);
            continue;
        case 3: // DW_CFA_restore
            if (init) restore_rule(row, init, low);
            continue;
        }
        uint64_t reg, n;
        switch (op) {
        case 0x00: break; // nop
        case 0x01:        // set_loc
            if (!read_ptr(&p, end, c->fde_enc, 0, &next)) return false;
            if (next > pc) return true;
            loc = next;
            break;
        case 0x02: // advance_loc1, advance_loc2, advance_loc4: a 1, 2 or 4 byte delta
        case 0x03:
        case 0x04: {
            int w = op == 0x02 ? 1 : op == 0x03 ? 2 : 4;
            if (end - p < w) return false;
            uint32_t delta = w == 1 ? *p : w == 2 ? rd16(p) : rd32(p);
            p += w;
            next = loc + delta * c->code_align;
            if (next > pc) return true;
            loc = next;
            break;
        }
        case 0x05: // offset_extended
            reg = uleb(&p, end);
            set_rule(row, reg, RULE_OFFSET, (int64_t)uleb(&p, end) * c->data_align);
            break;
        case 0x06: // restore_extended
            reg = uleb(&p, end);
            if (init) restore_rule(row, init, reg);
            break;
        case 0x07: // undefined
            set_rule(row, uleb(&p, end), RULE_UNDEF, 0);
            break;
        case 0x08: // same_value
            set_rule(row, uleb(&p, end), RULE_SAME, 0);
            break;
        case 0x09: // register
        case 0x14: // val_offset
            reg = uleb(&p, end);
            (void)uleb(&p, end);
            set_rule(row, reg, RULE_OTHER, 0);
            break;
        case 0x0a: // remember_state
            if (depth == REMEMBER_MAX) return false;
            stack[depth++] = *row;
            break;
        case 0x0b: // restore_state
            if (depth == 0) return false;
            {
                // (The CFA is not part of the remembered registers' state
                // in DWARF, but GCC and libunwind restore it too.)
                *row = stack[--depth];
            }
            break;
        case 0x0c: // def_cfa
            row->cfa_reg = uleb(&p, end);
            row->cfa_off = (int64_t)uleb(&p, end);
            row->cfa_expr = false;
            break;
        case 0x0d: // def_cfa_register
            row->cfa_reg = uleb(&p, end);
            break;
        case 0x0e: // def_cfa_offset
            row->cfa_off = (int64_t)uleb(&p, end);
            break;
        case 0x0f: // def_cfa_expression
            n = uleb(&p, end);
            if (n > (uint64_t)(end - p)) return false;
            p += n;
            row->cfa_expr = true;
            break;
        case 0x10: // expression
        case 0x16: // val_expression
            reg = uleb(&p, end);
            n = uleb(&p, end);
            if (n > (uint64_t)(end - p)) return false;
            p += n;
            set_rule(row, reg, RULE_OTHER, 0);
            break;
        case 0x11: // offset_extended_sf
            reg = uleb(&p, end);
            set_rule(row, reg, RULE_OFFSET, sleb(&p, end) * c->data_align);
            break;
        case 0x12: // def_cfa_sf
            row->cfa_reg = uleb(&p, end);
            row->cfa_off = sleb(&p, end) * c->data_align;
            row->cfa_expr = false;
            break;
        case 0x13: // def_cfa_offset_sf
            row->cfa_off = sleb(&p, end) * c->data_align;
            break;
        case 0x15: // val_offset_sf
            reg = uleb(&p, end);
            (void)sleb(&p, end);
            set_rule(row, reg, RULE_OTHER, 0);
            break;
        case 0x2e: // GNU_args_size
            (void)uleb(&p, end);
            break;
        case 0x2f: // GNU_negative_offset_extended
            reg = uleb(&p, end);
            set_rule(row, reg, RULE_OFFSET, -(int64_t)uleb(&p, end) * c->data_align);
            break;
        default: return false;
        }
    }
    return true;
}

// The row reduced to a rule (cfi.h).
static int reduce(const struct row *row, struct tpprof_cfi_rule *r) {
    if (row->cfa_expr) return TPPROF_CFI_NONE;
    if (row->cfa_reg != REG_RSP && row->cfa_reg != REG_RBP) return TPPROF_CFI_NONE;
    if (row->ra.how == RULE_UNDEF) return r->kind = TPPROF_CFI_END;
    if (row->ra.how != RULE_OFFSET || row->ra.off != -8) return TPPROF_CFI_NONE;
    if (row->cfa_off < 8 || row->cfa_off > INT32_MAX) return TPPROF_CFI_NONE;
    int16_t rbp_off = 0;
    if (row->rbp.how == RULE_OFFSET) {
        if (row->rbp.off >= 0 || row->rbp.off < INT16_MIN) return TPPROF_CFI_NONE;
        rbp_off = (int16_t)row->rbp.off;
    } else if (row->rbp.how != RULE_SAME) {
        return TPPROF_CFI_NONE;
    }
    r->cfa_off = (int32_t)row->cfa_off;
    r->rbp_off = rbp_off;
    r->cfa_rbp = row->cfa_reg == REG_RBP;
    return r->kind = TPPROF_CFI_STEP;
}

static int rule_of_fde(const uint8_t *fde, uintptr_t pc, struct tpprof_cfi_rule *r) {
    uint32_t len = rd32(fde);
    if (len == 0 || len == 0xffffffffu) return TPPROF_CFI_NONE;
    const uint8_t *p = fde + 4, *end = p + len;
    uint32_t cie_off = rd32(p);
    if (cie_off == 0) return TPPROF_CFI_NONE; // a CIE, not an FDE
    struct cie c;
    if (!parse_cie(p - cie_off, &c) || c.signal || c.ra_reg != REG_RA) return TPPROF_CFI_NONE;
    p += 4;
    uintptr_t begin, range;
    if (!read_ptr(&p, end, c.fde_enc, 0, &begin) || !read_ptr(&p, end, c.fde_enc & 0x0f, 0, &range))
        return TPPROF_CFI_NONE;
    if (pc < begin || pc - begin >= range) return TPPROF_CFI_NONE;
    if (c.z) {
        uint64_t n = uleb(&p, end);
        if (n > (uint64_t)(end - p)) return TPPROF_CFI_NONE;
        p += n;
    }
    struct row row = {.cfa_reg = REG_RSP, .cfa_off = 8}, init;
    if (!run_program(c.insns, c.end, &c, begin, UINTPTR_MAX, &row, NULL)) return TPPROF_CFI_NONE;
    init = row;
    if (!run_program(p, end, &c, begin, pc, &row, &init)) return TPPROF_CFI_NONE;
    return reduce(&row, r);
}

// ---------------------------------------------------------------------------
// Finding the FDE.

int tpprof_cfi_rule_in(const uint8_t *hdr, uintptr_t pc, struct tpprof_cfi_rule *r) {
    memset(r, 0, sizeof *r);
    if (!hdr || hdr[0] != 1) return TPPROF_CFI_NONE;
    uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    const uint8_t *p = hdr + 4, *end = hdr + 4 + 16;
    uintptr_t frame, count;
    if (!read_ptr(&p, end, ptr_enc, (uintptr_t)hdr, &frame) || !read_ptr(&p, end, count_enc, (uintptr_t)hdr, &count))
        return TPPROF_CFI_NONE;
    // The table as linkers write it: (start, FDE) pairs of 32-bit offsets
    // from the header, sorted by start.
    if (table_enc != (PE_DATAREL | PE_SDATA4) || count == 0) return TPPROF_CFI_NONE;
    intptr_t first = (intptr_t)(int32_t)rd32(p);
    if (pc < (uintptr_t)hdr + (uintptr_t)first) return TPPROF_CFI_NONE;
    size_t lo = 0, hi = count; // the last entry whose start is <= pc is in [lo, hi)
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        uintptr_t start = (uintptr_t)hdr + (uintptr_t)(intptr_t)(int32_t)rd32(p + 8 * mid);
        if (start <= pc) lo = mid;
        else hi = mid;
    }
    const uint8_t *fde = hdr + (intptr_t)(int32_t)rd32(p + 8 * lo + 4);
    return rule_of_fde(fde, pc, r);
}

int tpprof_cfi_rule_at(uintptr_t pc, struct tpprof_cfi_rule *r) {
    memset(r, 0, sizeof *r);
#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
    struct dl_find_object o;
    if (_dl_find_object((void *)pc, &o) != 0 || !o.dlfo_eh_frame) return TPPROF_CFI_NONE;
    return tpprof_cfi_rule_in(o.dlfo_eh_frame, pc, r);
#else
    (void)pc;
    return TPPROF_CFI_NONE;
#endif
}
