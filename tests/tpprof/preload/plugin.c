// plugin.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: plugin.
#include "harness.h"

static void test_plugin(char *prog, char *plugin) {
    char *argv[] = {prog, plugin, NULL};
    struct result r;
    if (!record("plugin.db", argv, NULL, &r)) return;
    int64_t id = qi("SELECT stack_id FROM live_blocks WHERE size = 4242 AND reachability = 1");
    CHECK_MSG(id > 0, "the plugin's 4242 B leak is lost");
    int64_t ips[64];
    int n = stack_ips(id, ips, 64);
    int64_t unloaded = 0;
    CHECK_MSG(n > 1 && ip_in(ips[0], "plugin_leak", &unloaded), "innermost frame resolves to plugin_leak");
    CHECK_MSG(unloaded > 0, "its module row has unloaded_ns set (%lld)", (long long)unloaded);
    CHECK_MSG(n > 1 && ip_in(ips[1], "main", NULL), "caller frame resolves to host's main");
    char v[64] = "";
    qs(v, sizeof v, "SELECT count(*) FROM meta WHERE key = 'bypassing_modules'");
    CHECK_MSG(strcmp(v, "0") == 0, "a plugin loaded normally goes through the hooks (%s)", v);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    if (strcmp(mode, "plugin") == 0 && extra) test_plugin(prog, extra);
    else return -1;
    return check_failures;
}
