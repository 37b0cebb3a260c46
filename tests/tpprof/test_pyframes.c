// test_pyframes.c: unit tests of pyframes.c's parts that run without an
// interpreter: the 3.11 location table decoder (line of each code unit), and
// that a process without Python, or a frame id never given, changes nothing.
#include <stdio.h>
#include <string.h>

#include "record/pyframes.h"
#include "record/rings.h"
#include "record/stacks.h"
#include "../check.h"

__thread struct tpprof_thread *tpprof_self; // stacks.c's per-thread cache owner

// CPython 3.11.2's co_linetable of this function (first line 1), and the
// line co_lines() gives each of its 49 code units (0: no location):
//     def sample(xs):
//         total = 0
//         for x in xs:
//             if x > 3:
//                 total += x
//         y = [
//             x
//             for x in xs
//         ]
//         <29 comment and blank lines>
//         return total + len(y)         # line 38
// It has short, one-line, no-column, long (line +30) and no-location
// entries, and a line going back (8 -> 6).
static const uint8_t sample_table[] = {
    0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xd8, 0x0d, 0x0f, 0xf0, 0x00, 0x02, 0x05, 0x17, 0xf0, 0x00, 0x02,
    0x05, 0x17, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x88, 0x71, 0x8a, 0x35, 0x88, 0x35, 0xd8, 0x0c, 0x11, 0x90, 0x51,
    0x89, 0x4a, 0x88, 0x45, 0xf8, 0xf0, 0x02, 0x03, 0x09, 0x06, 0xf0, 0x00, 0x03, 0x09, 0x06, 0xe0, 0x11, 0x13,
    0xf0, 0x05, 0x03, 0x09, 0x06, 0xf1, 0x00, 0x03, 0x09, 0x06, 0xf4, 0x00, 0x03, 0x09, 0x06, 0x80, 0x41, 0xf0,
    0x40, 0x01, 0x00, 0x0c, 0x11, 0x95, 0x33, 0x90, 0x71, 0x91, 0x36, 0x94, 0x36, 0x89, 0x3e, 0xd0, 0x04, 0x19};
static const int sample_lines[49] = {1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 0, 6, 6, 8, 6, 6, 6,
                                     6, 6, 6, 6, 6, 6, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38, 38};

static void test_linetable_gives_cpythons_line_for_every_code_unit(void) {
    for (uint32_t u = 0; u < 49; u++) {
        int got = tpprof_py_linetable_line(sample_table, sizeof sample_table, 1, u);
        CHECK_MSG(got == sample_lines[u], "unit %u: line %d, CPython says %d", u, got, sample_lines[u]);
    }
    // Moved by its first line: a code object starting at line 101.
    CHECK(tpprof_py_linetable_line(sample_table, sizeof sample_table, 101, 31) == 138);
}

static void test_linetable_outside_or_damaged_gives_no_line(void) {
    CHECK(tpprof_py_linetable_line(sample_table, sizeof sample_table, 1, 49) == 0); // past the code
    CHECK(tpprof_py_linetable_line(sample_table, 0, 1, 0) == 0);                    // empty table
    const uint8_t damaged[] = {0x80, 0x00, 0x05, 0x80, 0x00};                       // 0x05: no entry starts there
    CHECK(tpprof_py_linetable_line(damaged, sizeof damaged, 7, 0) == 7);
    CHECK(tpprof_py_linetable_line(damaged, sizeof damaged, 7, 1) == 0);
    const uint8_t cut[] = {0xf0 | 7, 0x4c}; // a long entry cut inside its varints
    CHECK(tpprof_py_linetable_line(cut, sizeof cut, 1, 3) == 1 + 6); // what was read: +6, no fault
}

static void test_hand_made_entries(void) {
    // short (2 units, same line), one-line +2 (1 unit), no-columns -3 (3
    // units), long +70 (8 units), no location (1 unit).
    const uint8_t t[] = {0x80 | 1, 0x00, 0x80 | 12 << 3, 0x01, 0x02, 0x80 | 13 << 3 | 2, 0x07,
                         0x80 | 14 << 3 | 7, 0x4c, 0x02, 0x00, 0x05, 0x06, 0x80 | 15 << 3};
    const int want[] = {10, 10, 12, 9, 9, 9, 79, 79, 79, 79, 79, 79, 79, 79, 0, 0};
    for (uint32_t u = 0; u < sizeof want / sizeof *want; u++)
        CHECK_MSG(tpprof_py_linetable_line(t, sizeof t, 10, u) == want[u], "unit %u: %d, want %d", u,
                  tpprof_py_linetable_line(t, sizeof t, 10, u), want[u]);
}

static void test_without_python_stacks_are_unchanged(void) {
    // No interpreter in this process: nothing is on, a merge gives the
    // native stack back, and a pseudo frame never given does not resolve.
    tpprof_py_init();
    CHECK(!tpprof_py_on);
    CHECK(tpprof_py_meta() == NULL);
    CHECK(tpprof_stacks_init());
    uintptr_t f[3] = {0x401000, 0x402000, 0x403000};
    uint32_t id = tpprof_stack_intern(f, 3);
    CHECK(id != 0 && tpprof_py_merge(id, f, 3) == id);
    struct tpprof_py_frame pf;
    CHECK(!tpprof_py_resolve(TPPROF_PY_TAG | (uint64_t)5 << TPPROF_PY_UNIT_BITS | 3, &pf));
    CHECK(tpprof_py_is_frame(TPPROF_PY_TAG | 1) && !tpprof_py_is_frame(0x7fffffffe000) &&
          !tpprof_py_is_frame(0xffffffff81000000u));
}

int main(void) {
    test_linetable_gives_cpythons_line_for_every_code_unit();
    test_linetable_outside_or_damaged_gives_no_line();
    test_hand_made_entries();
    test_without_python_stacks_are_unchanged();
    return CHECK_DONE();
}
