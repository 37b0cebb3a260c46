// test_obsorder.c: the observer stripe's tickets (src/tpprof/obsorder.c and
// tpprof_obs_tag in src/tpprof/record/order.h). A thread that sends observer events
// alone owns the stripe and takes tickets with plain stores; when others
// join, the stripe is taken away from it, and from then on every ticket is
// still taken exactly once: the tickets handed out are all different and
// leave no gap, however the threads interleave. An owner that has exited
// hands the stripe on to the next thread. No preload: runs under ASan+UBSan
// too.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record/format.h"
#include "record/order.h"
#include "record/rings.h"
#include "../check.h"

// What obsorder.c needs from the rest of the recorder.
struct tpprof_order_line tpprof_stripes[TPPROF_STRIPES];
struct tpprof_order_line tpprof_epoch;
__thread struct tpprof_thread *tpprof_self;

#define THREADS 4
#define PER_THREAD 200000
#define FIRST 50000

static struct tpprof_thread threads[THREADS + 1]; // [0]: the first owner
static uint32_t *tickets[THREADS + 1];
static int taken[THREADS + 1];
static pthread_barrier_t together;

static void take(int who, int n) {
    for (int i = 0; i < n; i++)
        tickets[who][taken[who]++] = tpprof_hdr_ticket(tpprof_hdr(tpprof_obs_tag(&threads[who]), 0, 0));
}

static void *joiner(void *arg) {
    int who = (int)(intptr_t)arg;
    tpprof_self = &threads[who];
    pthread_barrier_wait(&together);
    take(who, PER_THREAD);
    return NULL;
}

static void *first_owner(void *arg) {
    (void)arg;
    tpprof_self = &threads[0];
    take(0, FIRST);
    pthread_barrier_wait(&together);
    take(0, PER_THREAD);
    return NULL;
}

// The first owner takes FIRST tickets alone, then THREADS joiners and it
// take PER_THREAD each, all at once.
static void owner_then_joiners(void) {
    pthread_t t[THREADS + 1];
    pthread_barrier_init(&together, NULL, THREADS + 1);
    pthread_create(&t[0], NULL, first_owner, NULL);
    for (int w = 1; w <= THREADS; w++) pthread_create(&t[w], NULL, joiner, (void *)(intptr_t)w);
    for (int w = 0; w <= THREADS; w++) pthread_join(t[w], NULL);
    pthread_barrier_destroy(&together);
}

// Every ticket from `start` on, `total` of them, handed out exactly once.
static void check_each_once(uint32_t start, int total) {
    char *seen = calloc((size_t)total, 1);
    int dup = 0, outside = 0;
    for (int w = 0; w <= THREADS; w++)
        for (int i = 0; i < taken[w]; i++) {
            uint32_t k = (tickets[w][i] - start) & TPPROF_TICKET_MASK;
            if (k >= (uint32_t)total) outside++;
            else if (seen[k]++) dup++;
        }
    CHECK_MSG(dup == 0 && outside == 0, "%d tickets handed out twice, %d outside the range", dup, outside);
    uint64_t next = atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);
    CHECK_MSG((((uint32_t)next - start) & TPPROF_TICKET_MASK) == (uint32_t)total, "the stripe moved on by %u, not %d",
          ((uint32_t)next - start) & TPPROF_TICKET_MASK, total);
    free(seen);
}

static void reset(void) {
    memset(threads, 0, sizeof threads);
    memset(taken, 0, sizeof taken);
    tpprof_obs_order_init();
}

static void test_joining_threads_take_the_stripe_away_and_no_ticket_is_taken_twice(void) {
    reset();
    bool biased = atomic_load(&tpprof_obs_owner) == 0;
    if (!biased) fprintf(stderr, "note: no membarrier here: the stripe is contested from the start\n");
    uint32_t start = (uint32_t)atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);
    owner_then_joiners();
    check_each_once(start, FIRST + (THREADS + 1) * PER_THREAD);
    CHECK_MSG(atomic_load(&tpprof_obs_owner) == TPPROF_OBS_CONTESTED, "with live threads sharing it the stripe is contested");
    // Each thread's own tickets rise: its events keep their order.
    int unordered = 0;
    for (int w = 0; w <= THREADS; w++)
        for (int i = 1; i < taken[w]; i++) unordered += tpprof_ticket_diff(tickets[w][i], tickets[w][i - 1]) <= 0;
    CHECK_MSG(unordered == 0, "%d tickets below the thread's previous one", unordered);
}

static void *alone(void *arg) {
    int who = (int)(intptr_t)arg;
    tpprof_self = &threads[who];
    take(who, FIRST);
    return NULL;
}

static void test_an_exited_owner_hands_the_stripe_on(void) {
    reset();
    if (atomic_load(&tpprof_obs_owner) != 0) { // (contested from the start: nothing to hand on)
        fprintf(stderr, "note: no membarrier here: the hand-on is not tested\n");
        return;
    }
    uint32_t start = (uint32_t)atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);
    pthread_t t;
    pthread_create(&t, NULL, alone, (void *)(intptr_t)0);
    pthread_join(t, NULL);
    CHECK_MSG(atomic_load(&tpprof_obs_owner) == (uintptr_t)&threads[0], "the only sender owns the stripe");
    atomic_store(&threads[0].exited, 1); // (rings.c's exit destructor)
    pthread_create(&t, NULL, alone, (void *)(intptr_t)1);
    pthread_join(t, NULL);
    CHECK_MSG(atomic_load(&tpprof_obs_owner) == (uintptr_t)&threads[1], "the next sender owns it after the first exited");
    check_each_once(start, 2 * FIRST);
}

// Where membarrier is refused (a seccomp filter, an old kernel) the stripe
// is contested from the start: every ticket a locked add, each still once.
static void test_without_membarrier_every_ticket_is_a_locked_add(void) {
    reset();
    atomic_store(&tpprof_obs_owner, TPPROF_OBS_CONTESTED); // what tpprof_obs_order_init leaves then
    uint32_t start = (uint32_t)atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);
    owner_then_joiners();
    check_each_once(start, FIRST + (THREADS + 1) * PER_THREAD);
    CHECK_MSG(atomic_load(&tpprof_obs_owner) == TPPROF_OBS_CONTESTED, "nobody took the stripe");
}

// A seccomp filter the program installs after the start can refuse
// membarrier (here: EPERM for it, everything else allowed; it stays for
// the rest of the process, so this test runs last). Taking the stripe away
// then makes do with the page-protection barrier: each ticket still once.
static bool refuse_membarrier(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

static void test_membarrier_refused_after_the_start_still_takes_each_ticket_once(void) {
    reset(); // (registered while it was allowed)
    if (atomic_load(&tpprof_obs_owner) != 0) { // (no membarrier at all here: the test above covers it)
        fprintf(stderr, "note: no membarrier here: its refusal after the start is not tested\n");
        return;
    }
    if (!refuse_membarrier()) {
        fprintf(stderr, "note: could not install a seccomp filter: the page-protection barrier is not tested\n");
        return;
    }
    CHECK_MSG(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0, "membarrier is refused now");
    uint32_t start = (uint32_t)atomic_load(&tpprof_stripes[TPPROF_OBS_STRIPE].v);
    owner_then_joiners();
    check_each_once(start, FIRST + (THREADS + 1) * PER_THREAD);
    CHECK_MSG(atomic_load(&tpprof_obs_owner) == TPPROF_OBS_CONTESTED, "the stripe was taken away all the same");
}

int main(void) {
    for (int w = 0; w <= THREADS; w++) tickets[w] = malloc((FIRST + PER_THREAD) * sizeof *tickets[w]);
    test_joining_threads_take_the_stripe_away_and_no_ticket_is_taken_twice();
    test_an_exited_owner_hands_the_stripe_on();
    test_without_membarrier_every_ticket_is_a_locked_add();
    test_membarrier_refused_after_the_start_still_takes_each_ticket_once(); // last: the filter stays
    for (int w = 0; w <= THREADS; w++) free(tickets[w]);
    return CHECK_DONE();
}
