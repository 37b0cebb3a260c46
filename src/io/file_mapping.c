/*
 * src/io/file_mapping.c - refcounted mmap'd files and storages that point
 * into them.
 *
 * A storage made here owns one reference on the mapping through its DataPtr
 * (ctx = the mapping, deleter = release), so the file stays mapped exactly as
 * long as some storage or holder needs it and is unmapped by whichever goes
 * last.  This file must not parse any format; safetensors.c does that.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/internal.h"
#include "tensorplay/safetensors.h"

struct tp_file_mapping {
    _Atomic uint32_t refcount;
    void *data; /* NULL for an empty file */
    size_t size;
};

static _Atomic uint64_t live_mappings;

// ----------------------------------------------------------------------------
// lifetime

tp_status tp_file_mapping_open(const char *path, tp_file_mapping **out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "file mapping: NULL output");
    *out = NULL;
    if (!path) return tp__error(TP_STATUS_INVALID_ARGUMENT, "file mapping: NULL path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tp__error(TP_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tp__error(TP_STATUS_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tp__error(TP_STATUS_IO, "cannot map '%s': not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return tp__error(TP_STATUS_IO, "cannot map '%s': too large", path);
    }
    tp_file_mapping *m = calloc(1, sizeof *m);
    if (!m) {
        close(fd);
        return tp__error(TP_STATUS_OUT_OF_MEMORY, "file mapping: no memory");
    }
    m->size = (size_t)sb.st_size;
    if (m->size > 0) {
        /* Private and writable: in-place ops copy the page instead of
         * faulting on it or writing through to the file. */
        m->data = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (m->data == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m);
            return tp__error(TP_STATUS_IO, "cannot map '%s': %s", path, strerror(e));
        }
    }
    close(fd); /* the mapping keeps the file */
    atomic_init(&m->refcount, 1);
    atomic_fetch_add(&live_mappings, 1);
    *out = m;
    return TP_STATUS_OK;
}

void tp_file_mapping_retain(tp_file_mapping *m) {
    if (m) atomic_fetch_add_explicit(&m->refcount, 1, memory_order_relaxed);
}

void tp_file_mapping_release(tp_file_mapping *m) {
    if (!m) return;
    if (atomic_fetch_sub_explicit(&m->refcount, 1, memory_order_acq_rel) != 1) return;
    if (m->data) munmap(m->data, m->size);
    free(m);
    atomic_fetch_sub(&live_mappings, 1);
}

static void mapping_deleter(void *ctx) { tp_file_mapping_release(ctx); }

/* The allocator a mapping's storages name, so profilers and stats say "mmap"
 * rather than "external".  It allocates nothing: a mapped storage is not
 * resizable, and anyone asking it for memory gets a clear error. */
static tp_status mapping_allocate(tp_allocator *self, size_t nbytes, tp_data_ptr *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    return tp__error(TP_STATUS_UNSUPPORTED,
                     "mmap allocator: a file mapping cannot allocate (%zu bytes asked)", nbytes);
}

static tp_allocator mapping_allocator = {
    .name = "mmap",
    .allocate = mapping_allocate,
};

// ----------------------------------------------------------------------------
// views

void *tp_file_mapping_data(const tp_file_mapping *m) { return m ? m->data : NULL; }
size_t tp_file_mapping_size(const tp_file_mapping *m) { return m ? m->size : 0; }
uint64_t tp_file_mapping_live_count(void) { return atomic_load(&live_mappings); }

tp_storage *tp_file_mapping_storage(tp_file_mapping *m, size_t offset, size_t nbytes) {
    if (!m) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "file mapping: NULL mapping");
        return NULL;
    }
    if (offset > m->size || nbytes > m->size - offset) {
        tp__error(TP_STATUS_OUT_OF_BOUNDS,
                  "file mapping: bytes [%zu, %zu + %zu) are outside the %zu-byte file", offset,
                  offset, nbytes, m->size);
        return NULL;
    }
    tp_file_mapping_retain(m);
    tp_data_ptr dp = {
        .ptr = m->data ? (char *)m->data + offset : NULL,
        .ctx = m,
        .deleter = mapping_deleter,
        .device = tp_device_cpu(),
    };
    /* Takes ownership of dp (and so of our reference) even on failure. */
    return tp_storage_new_with_data_ptr(dp, nbytes, &mapping_allocator, false);
}
