/*
 * tensorplay/storage.h - Storage: refcounted bytes behind one or more tensors.
 *
 * Reference rules follow c10's intrusive_ptr exactly:
 *   - a new storage has strong = 1 and weak = 1;
 *   - the weak count includes +1 while strong > 0;
 *   - when strong drops to 0 the data is released (the DataPtr's deleter runs)
 *     and the struct lives on while weak references remain;
 *   - the struct is freed when weak drops to 0;
 *   - tp_storage_weak_lock() upgrades a weak reference only while strong > 0;
 *     a strong count of 0 is final.
 * Counts are atomic; every change is published through the observer ABI.
 *
 *     tp_storage *s = tp_storage_new(1024, NULL, true);   // new reference
 *     tp_storage_weak_retain(s);                           // s now has strong 1, weak 2
 *     tp_storage_release(s);                               // data freed, struct alive
 *     tp_storage *again = tp_storage_weak_lock(s);         // NULL: data is gone
 *     tp_storage_weak_release(s);                          // struct freed
 */
#ifndef TENSORPLAY_STORAGE_H
#define TENSORPLAY_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tensorplay/allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tp_storage tp_storage;

/* Allocates nbytes from `allocator` (NULL = the CPU allocator registered
 * now).  Returns a new reference, or NULL with the error set. */
tp_storage *tp_storage_new(size_t nbytes, tp_allocator *allocator, bool resizable);

/* Wraps an existing DataPtr without copying; takes ownership of `data`
 * (its deleter runs when the data is released, also if this call fails).
 * `allocator` may be NULL (then the storage cannot be resized).  New reference. */
tp_storage *tp_storage_new_with_data_ptr(tp_data_ptr data, size_t nbytes,
                                         tp_allocator *allocator, bool resizable);

/* Strong references.  retain requires the caller to hold a strong reference. */
void tp_storage_retain(tp_storage *storage);
void tp_storage_release(tp_storage *storage); /* NULL is ignored */

/* Weak references.  weak_retain requires a strong or weak reference. */
void tp_storage_weak_retain(tp_storage *storage);
void tp_storage_weak_release(tp_storage *storage); /* NULL is ignored */
/* New strong reference if strong > 0, else NULL (not an error). */
tp_storage *tp_storage_weak_lock(tp_storage *storage);

uint32_t tp_storage_use_count(const tp_storage *storage);  /* strong */
uint32_t tp_storage_weak_count(const tp_storage *storage); /* weak incl. the +1 */

/* Borrowed views of the fields. */
void *tp_storage_data(const tp_storage *storage);
size_t tp_storage_nbytes(const tp_storage *storage);
tp_allocator *tp_storage_allocator(const tp_storage *storage);
tp_device tp_storage_device(const tp_storage *storage);
bool tp_storage_resizable(const tp_storage *storage);
/* A process-unique id, also used by the observer ABI. */
uint64_t tp_storage_id(const tp_storage *storage);

/* Grows or shrinks the storage: allocates new_nbytes from its allocator,
 * copies min(old, new) bytes, swaps the DataPtr in place (every tensor on
 * this storage sees the new memory) and frees the old data.  Fails with
 * TP_STATUS_INVALID_ARGUMENT if the storage is not resizable. */
tp_status tp_storage_resize(tp_storage *storage, size_t new_nbytes);

/* Swaps in `data` of `nbytes` and returns the old DataPtr, which the caller
 * now owns (and must clear). */
tp_data_ptr tp_storage_set_data_ptr(tp_storage *storage, tp_data_ptr data, size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif
