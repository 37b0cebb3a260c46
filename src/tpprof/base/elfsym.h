// elfsym.h: the size of a loaded function, looked up by its name (elfsym.c).
//
//     void *f = dlsym(RTLD_NEXT, "exit");
//     size_t n = f ? tpprof_elfsym_size(f, "exit") : 0; // [f, f + n): exit's code
#ifndef TPPROF_BASE_ELFSYM_H
#define TPPROF_BASE_ELFSYM_H

#include <stddef.h>

#include "base/base.h"

// The st_size of the dynamic symbol `name` whose address is `addr` (as
// dlsym gave it), read from the symbol table of the loaded object that
// holds `addr` through its GNU hash table; 0 when there is none (no such
// symbol there, an object without a GNU hash table, a symbol of size 0).
// The same answer as dladdr1(addr, ..., RTLD_DL_SYMENT)'s st_size for such
// a symbol, without dladdr1's walk through every symbol of the object to
// find the nearest (about 20 us for the C library, which the constructor
// asked 20 times). Takes no locks but the loader's (dl_iterate_phdr); no
// malloc.
TPPROF_HIDDEN size_t tpprof_elfsym_size(const void *addr, const char *name);

#endif
