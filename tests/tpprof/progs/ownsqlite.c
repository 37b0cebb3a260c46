// ownsqlite.c: a program that uses SQLite itself, as the sqlite3 shell or
// Python do, and configures it before anything else, as the library asks
// (sqlite3_config is refused once it is initialized). Then it shuts the
// library down and switches it to single-thread mode, which pulls it from
// under any other user in the process: the recorder must have its own.
// Prints the return code of every call; the recorded run must print exactly
// what the native run prints, and its recording go on to the end (the block
// lost in lost_after_shutdown).
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *volatile sink;

static void on_log(void *arg, int code, const char *msg) { (void)arg, (void)code, (void)msg; }

static int use_db(void) {
    sqlite3 *db;
    int rc = sqlite3_open(":memory:", &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(5000)); SELECT count(*) FROM t", NULL,
                          NULL, NULL);
    sqlite3_close(db);
    return rc;
}

__attribute__((noinline)) static void lost_after_shutdown(void) {
    char *p = malloc(3333);
    memset(p, 1, 3333);
    sink = p;
    sink = NULL;
}

int main(void) {
    printf("config multithread %d\n", sqlite3_config(SQLITE_CONFIG_MULTITHREAD));
    printf("config log %d\n", sqlite3_config(SQLITE_CONFIG_LOG, on_log, NULL));
    printf("config memstatus %d\n", sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0));
    printf("initialize %d\n", sqlite3_initialize());
    printf("use %d\n", use_db());
    printf("shutdown %d\n", sqlite3_shutdown());
    printf("config singlethread %d\n", sqlite3_config(SQLITE_CONFIG_SINGLETHREAD));
    printf("threadsafe after %d\n", sqlite3_threadsafe());
    printf("use again %d\n", use_db());
    lost_after_shutdown();
    return 0;
}
