"""Python frames in tpprof's stacks: one scenario per mode (tests/python/meson.build).

usage: check_pyframes.py MODE LIBTPPROF TPPROF PYTHON

Runs a script of this folder with PYTHON under the preload, then checks the
recording (py_frames, stack_nodes, symbols) and `tpprof report` (text and
JSON). Exits 0 on success, 1 on a failed check, 77 to skip (a PYTHON whose
version the recorder does not support, or torch missing)."""
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
    return ok


def marker(script, name):
    """The line of `# NAME` in script."""
    with open(os.path.join(HERE, script)) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + name):
                return i
    raise SystemExit("no marker %s in %s" % (name, script))


def record(lib, python, script, out, env=None, args=()):
    e = dict(os.environ, LD_PRELOAD=lib, TPPROF_OUTPUT=out)
    e.pop("PYTHONPATH", None)
    e.update(env or {})
    r = subprocess.run([python, os.path.join(HERE, script), *args], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    return r


def report(tpprof, db, fmt="text"):
    cmd = [tpprof, "report", db] + (["--format", "json"] if fmt == "json" else [])
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit("tpprof report failed: " + r.stderr)
    return r.stdout


def is_py(ip):
    return (ip & 0xFFFFFFFFFFFF) >> 47 == 1


class Recording:
    def __init__(self, path):
        self.db = sqlite3.connect(path)
        self.nodes = {i: (p, ip) for i, p, ip in self.db.execute("SELECT id, parent, ip FROM stack_nodes")}
        self.py = {}
        if self.db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'py_frames'").fetchone()[0]:
            self.py = {i: (f, fl, ln) for i, f, fl, ln in self.db.execute("SELECT id, function, file, line FROM py_frames")}
        self.sym = {ip: f for ip, f in self.db.execute("SELECT ip, function FROM symbols WHERE idx = 0")}

    def meta(self, key):
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def frames(self, stack_id):
        """Innermost first: ('py', function, basename, line) or ('c', function or hex ip)."""
        out = []
        while stack_id:
            parent, ip = self.nodes[stack_id]
            if is_py(ip):
                f, fl, ln = self.py.get(ip, ("?", "?", 0))
                out.append(("py", f, os.path.basename(fl), ln))
            else:
                out.append(("c", self.sym.get(ip) or hex(ip & 0xFFFFFFFFFFFFFFFF)))
            stack_id = parent
        return out

    def sites(self):
        """(stack_id, alloc_count, alloc_bytes) of every site."""
        return list(self.db.execute("SELECT stack_id, alloc_count, alloc_bytes FROM sites"))


def py_names(frames):
    return [f[1] for f in frames if f[0] == "py"]


def first_py(frames):
    return next((f for f in frames if f[0] == "py"), None)


def sites_first(rec, function):
    """Sites whose innermost Python frame is `function`: [(frames, count, bytes)]."""
    out = []
    for sid, n, b in rec.sites():
        fr = rec.frames(sid)
        p = first_py(fr)
        if p and p[1] == function:
            out.append((fr, n, b))
    return out


def fmt(frames):
    return " | ".join(("%s (%s:%d)" % f[1:]) if f[0] == "py" else f[1] for f in frames)


# ---------------------------------------------------------------------------
# Scenarios


def test_leaky(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "leaky.db")
    r = record(lib, python, "leaky.py", db)
    check(r.returncode == 0, "leaky.py runs under the preload (status %d, %s)" % (r.returncode, r.stderr[-300:]))
    line = marker("leaky.py", "LEAK")
    want = "hoard (leaky.py:%d)" % line
    text = report(tpprof, db)
    rec = Recording(db)
    check((rec.meta("python") or "") == "CPython %d.%d.%d" % python_version(python),
          "meta.python names the interpreter: %r" % rec.meta("python"))
    tops = [l for l in text.splitlines() if "< " in l and "malloc" in l]
    check(any(l.rstrip().endswith("< " + want) for l in tops[:3]),
          "the top sites' caller is %s:\n%s" % (want, "\n".join(tops[:3])))
    # The Leaks section: its first entry is a "    size in N blocks" line and
    # the frames under it (indented deeper), up to the next entry.
    lines = text.split("Leaks:", 1)[1].splitlines()[1:] if "Leaks:" in text else []
    first_leak = []
    for l in lines:
        if not l.strip() or (first_leak and re.match(r"^    \S", l)):
            break
        first_leak.append(l)
    check(any(l.strip() == want for l in first_leak), "the biggest leak's stack shows %s:\n%s" % (want, "\n".join(first_leak)))
    j = json.loads(report(tpprof, db, "json"))
    top = j["top"][0]["stack"]
    pyf = [f for f in top if f.get("module") is None and f.get("function")]
    check(pyf and pyf[0]["function"] == "hoard" and pyf[0]["file"].endswith("leaky.py") and pyf[0]["line"] == line,
          "JSON: the top site's first Python frame is hoard at leaky.py:%d: %s" % (line, pyf[:2]))
    check(top[0].get("module") is not None, "JSON: the innermost frame is native (%s)" % top[0])
    lk = j["leaks"][0]["stack"] if j.get("leaks") else []
    check(any(f.get("function") == "hoard" and f.get("line") == line for f in lk),
          "JSON: the biggest leak's stack holds hoard at line %d" % line)
    # Merged with another recording (ips keep 48 bits, the process above):
    # still Python frames, still the caller.
    merged = os.path.join(tmp, "merged.db")
    subprocess.run([tpprof, "merge", merged, db, db], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    mtext = report(tpprof, merged)
    check(sum(1 for l in mtext.splitlines() if "malloc" in l and l.rstrip().endswith("< " + want)) >= 2,
          "a merge of two recordings names %s as caller in each" % want)
    big = max(rec.sites(), key=lambda s: s[2])
    check(py_names(rec.frames(big[0]))[:3] == ["hoard", "main", "<module>"],
          "the biggest site's Python frames are hoard, main, <module>: %s" % fmt(rec.frames(big[0])))


def test_off(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "off.db")
    r = record(lib, python, "leaky.py", db, env={"TPPROF_PYTHON": "0"})
    check(r.returncode == 0, "leaky.py runs under the preload with TPPROF_PYTHON=0")
    text = report(tpprof, db)
    rec = Recording(db)
    check("off (TPPROF_PYTHON=0)" in (rec.meta("python") or ""), "meta.python says off: %r" % rec.meta("python"))
    check(not any(is_py(ip) for _, ip in rec.nodes.values()), "no Python frame in any stack")
    check("leaky.py" not in text, "the report names no Python line")
    big = max(rec.sites(), key=lambda s: s[2])
    check(big[1] >= 20000, "the leak is still recorded natively (%d calls)" % big[1])


def test_nested(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "nested.db")
    r = record(lib, python, "nested.py", db)
    check(r.returncode == 0, "nested.py runs under the preload (%s)" % r.stderr[-300:])
    report(tpprof, db)  # symbolizes
    rec = Recording(db)
    m = {k: marker("nested.py", k)
         for k in ("LEAF", "MIDDLE", "OUTER", "TOP", "KEY", "SORTER", "GEN", "CONSUME", "INIT", "BOXES", "MAKE")}
    # Inlined Python calls: one evaluation runs leaf, middle, outer and the module.
    s = sites_first(rec, "leaf")
    check(len(s) >= 1 and sum(n for _, n, _ in s) >= 5, "leaf's allocations are found (%d sites)" % len(s))
    if s:
        fr = s[0][0]
        py = [(f[1], f[3]) for f in fr if f[0] == "py"]
        check(py[:4] == [("leaf", m["LEAF"]), ("middle", m["MIDDLE"]), ("outer", m["OUTER"]), ("<module>", m["TOP"])],
              "leaf, middle, outer, <module> in order, each at its line: %s" % py[:4])
        i = fr.index(("py", "leaf", "nested.py", m["LEAF"]))
        check(i > 0 and all(f[0] == "c" for f in fr[:i]), "native frames (the allocator's) come before leaf: %s" % fmt(fr[:i + 1]))
        j = fr.index(("py", "<module>", "nested.py", m["TOP"]))
        check(j + 1 < len(fr) and fr[j + 1] == ("c", "_PyEval_EvalFrameDefault"),
              "the evaluator's native frame follows the Python frames it ran: %s" % fmt(fr[j:j + 2]))
    # A call back into Python from C: key, its evaluator, sorted's native frames, sorter.
    s = sites_first(rec, "key")
    check(len(s) >= 1, "key's allocations are found")
    if s:
        fr = s[0][0]
        names = [f[1] for f in fr]
        k = names.index("key")
        check(fr[k][3] == m["KEY"], "key at its line %d: %s" % (m["KEY"], fr[k]))
        check(fr[k + 1] == ("c", "_PyEval_EvalFrameDefault"), "key's evaluator right after it: %s" % fmt(fr[k:k + 2]))
        srt = names.index("sorter") if "sorter" in names else -1
        between = fr[k + 2:srt] if srt > 0 else []
        check(srt > k and fr[srt][3] == m["SORTER"] and between and all(f[0] == "c" for f in between) and
              "_PyEval_EvalFrameDefault" not in [f[1] for f in between],
              "sorted's native frames, then sorter at line %d: %s" % (m["SORTER"], fmt(fr[k:srt + 1])))
        check(py_names(fr)[:3] == ["key", "sorter", "<module>"], "Python frames key, sorter, <module>: %s" % py_names(fr))
    # A generator runs in its own evaluation, under list()'s native frames.
    s = sites_first(rec, "gen")
    check(len(s) >= 1, "the generator's allocations are found")
    if s:
        fr = s[0][0]
        names = [f[1] for f in fr]
        g, c = names.index("gen"), names.index("consume") if "consume" in names else -1
        check(fr[g][3] == m["GEN"] and c > g and fr[c][3] == m["CONSUME"] and fr[g + 1] == ("c", "_PyEval_EvalFrameDefault"),
              "gen at %d, its evaluator, then consume at %d: %s" % (m["GEN"], m["CONSUME"], fmt(fr[g:c + 1])))
    # A class's __init__: its callers next, whatever runs it (an evaluator
    # under type_call, or 3.13's shim frame, inline, not shown).
    s = sites_first(rec, "Box.__init__")
    check(sum(n for _, n, _ in s) == 50, "the 50 boxes' allocations are found (%d)" % sum(n for _, n, _ in s))
    bad = [fr for fr, _, _ in s if [(f[1], f[3]) for f in fr if f[0] == "py"][:3] !=
           [("Box.__init__", m["INIT"]), ("make_boxes", m["BOXES"]), ("<module>", m["MAKE"])]]
    check(s and not bad, "each is Box.__init__, make_boxes, <module>, each at its line: %s" % [fmt(fr) for fr in bad][:1])


def test_threads(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "threads.db")
    r = record(lib, python, "threads.py", db)
    check(r.returncode == 0, "threads.py runs under the preload (%s)" % r.stderr[-300:])
    report(tpprof, db)
    rec = Recording(db)
    mine = {"work_a": "WORK_A", "work_b": "WORK_B", "work_c": "WORK_C"}
    for fn, mk in mine.items():
        s = sites_first(rec, fn)
        line = marker("threads.py", mk)
        n = sum(c for fr, c, _ in s if first_py(fr)[3] == line)
        check(n >= 200, "%s: its 200 allocations are named by it, at line %d (%d)" % (fn, line, n))
        others = [o for o in mine if o != fn]
        check(all(not set(others) & set(py_names(fr)) for fr, _, _ in s), "%s: no other thread's function in its stacks" % fn)
        check(all(py_names(fr)[1:2] == ["Thread.run"] for fr, _, _ in s), "%s: called by Thread.run" % fn)
        check(all("<module>" not in py_names(fr) for fr, _, _ in s), "%s: not under the main thread's module" % fn)


def test_gil(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "gil.db")
    r = record(lib, python, "gil.py", db)
    if r.returncode != 0 and "ctypes" in r.stderr:
        print("skip: no ctypes")
        sys.exit(77)
    check(r.returncode == 0, "gil.py runs under the preload (%s)" % r.stderr[-300:])
    report(tpprof, db)
    rec = Recording(db)
    rl, hl = marker("gil.py", "RELEASED"), marker("gil.py", "HOLDING")
    # The released thread's malloc calls are 70,001 bytes each.
    rel = [(fr, n, b) for sid, n, b in rec.sites() for fr in [rec.frames(sid)] if b == n * 70001 and n > 0]
    check(sum(n for _, n, _ in rel) >= 300, "the 300 mallocs made with the GIL released are found (%d)" % sum(n for _, n, _ in rel))
    check(rel and all(first_py(fr) and first_py(fr)[1:] == ("released", "gil.py", rl) for fr, _, _ in rel),
          "each is named released (gil.py:%d): %s" % (rl, [fmt(fr) for fr, _, _ in rel][:1]))
    check(all("holding" not in py_names(fr) for fr, _, _ in rel), "never the GIL holder's frames")
    hold = sites_first(rec, "holding")
    check(sum(n for _, n, _ in hold) >= 300 and all(first_py(fr)[3] == hl for fr, _, _ in hold),
          "the holding thread's allocations are named holding (gil.py:%d)" % hl)


def test_fork(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "forky.db")
    r = record(lib, python, "forky.py", db)
    check(r.returncode == 0, "forky.py runs under the preload (%s)" % r.stderr[-300:])
    kids = [f for f in os.listdir(tmp) if re.match(r"forky\.[0-9]+\.db$", f)]
    check(len(kids) == 1, "the child has its own recording: %s" % kids)
    if not kids:
        return
    child = os.path.join(tmp, kids[0])
    text = report(tpprof, child)
    rec = Recording(child)
    line = marker("forky.py", "CHILD")
    s = sites_first(rec, "child_work")
    check(sum(n for fr, n, _ in s if first_py(fr)[3] == line) >= 100,
          "the child's 100 allocations are named child_work (forky.py:%d)" % line)
    check("< child_work (forky.py:%d)" % line in text, "the child's report names the line as caller")
    # The frames above it were the parent's (stack nodes and Python frames
    # made before the fork): the child's file has them too, resolved.
    call = marker("forky.py", "CALL")
    check(all(py_names(fr)[:2] == ["child_work", "<module>"] and [f for f in fr if f[0] == "py"][1][3] == call
              for fr, _, _ in s) and s,
          "each child_work stack goes on to <module> (forky.py:%d): %s" % (call, [fmt(fr) for fr, _, _ in s][:2]))
    check(not sites_first(rec, "parent_work"), "the child's recording has none of the parent's allocations")
    check(sites_first(Recording(db), "parent_work"), "the parent's recording has them")
    check(not sites_first(Recording(db), "child_work"), "the parent's recording has none of them")


def test_recycled(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "recycled.db")
    r = record(lib, python, "recycled.py", db)
    check(r.returncode == 0, "recycled.py runs under the preload (%s)" % r.stderr[-300:])
    m = re.search(r"distinct code addresses: (\d+)", r.stderr)
    check(m and int(m.group(1)) < 200, "its 200 code objects reuse addresses (%s distinct)" % (m and m.group(1)))
    rec = Recording(db)
    # gen_NNN.py's allocation: bytearray(50,000 + 16 * NNN), a byte more.
    named = {}
    for sid, n, b in rec.sites():
        if n == 1 and (b - 50001) % 16 == 0 and 0 <= (b - 50001) // 16 < 200:
            named[(b - 50001) // 16] = first_py(rec.frames(sid))
    check(len(named) == 200, "all 200 allocations found (%d)" % len(named))
    wrong = [(i, p) for i, p in sorted(named.items()) if p is None or p[1:3] != ("<module>", "gen_%03d.py" % i)]
    check(not wrong, "each is named by its own file, gen_NNN.py (wrong: %d, first %s)" % (len(wrong), wrong[:2]))


def test_callers(lib, tpprof, python, tmp):
    db = os.path.join(tmp, "callers.db")
    r = record(lib, python, "callers.py", db)
    check(r.returncode == 0, "callers.py runs under the preload (%s)" % r.stderr[-300:])
    rec = Recording(db)
    make, first, second = (marker("callers.py", m) for m in ("MAKE", "FIRST", "SECOND"))
    by_line, other = {first: 0, second: 0}, []
    for fr, n, b in sites_first(rec, "make"):
        py = [f for f in fr if f[0] == "py"]
        if py[0][2:] != ("callers.py", make) or len(py) < 2 or py[1][1:3] != ("two", "callers.py") or py[1][3] not in by_line:
            other.append(fmt(fr)[:200])
            continue
        by_line[py[1][3]] += n
    check(not other, "every allocation of make (callers.py:%d) is under two's lines %d or %d (%d others: %s)"
          % (make, first, second, len(other), other[:1]))
    check(by_line[first] >= 100 and by_line[first] == by_line[second],
          "the calls from line %d and from line %d make the same allocations: %d and %d"
          % (first, second, by_line[first], by_line[second]))


def test_fpdeep(lib, tpprof, python, tmp):
    so = os.environ.get("TPPROF_TEST_FPDEEP", "")
    if not os.path.exists(so):
        print("skip: no fpdeep library (%r)" % so)
        sys.exit(77)
    db = os.path.join(tmp, "fpdeep.db")
    r = record(lib, python, "fpdeep.py", db, args=(so,))
    check(r.returncode == 0, "fpdeep.py runs under the preload (%s)" % r.stderr[-300:])
    report(tpprof, db)
    rec = Recording(db)
    line = marker("fpdeep.py", "DEEP")
    mine = [(rec.frames(sid), n) for sid, n, b in rec.sites() if n and b == n * 77777]
    check(sum(n for _, n in mine) == 3010, "its 3,010 allocations are found (%d)" % sum(n for _, n in mine))
    native = [(fr, n) for fr, n in mine if not first_py(fr)]
    check(sum(n for _, n in native) == 10 and all(any(f[1] == "fp_deep" for f in fr) for fr, _ in native),
          "the thread's 10 have fp_deep's frames and no Python ones (%d)" % sum(n for _, n in native))
    mine = [(fr, n) for fr, n in mine if first_py(fr) or not any(f[1] == "fp_deep" for f in fr)]
    bad = [(fr, n) for fr, n in mine
           if not any(f[0] == "c" and f[1] == "fp_deep" for f in fr) or not first_py(fr)
           or first_py(fr)[1:] != ("deep_calls", "fpdeep.py", line)]
    check(not bad, "each has its native frames (fp_deep) and its Python line, deep_calls (fpdeep.py:%d): %d without (%s)"
          % (line, sum(n for _, n in bad), [fmt(fr)[:200] for fr, _ in bad][:1]))


def test_torch(lib, tpprof, python, tmp):
    probe = subprocess.run([python, "-c", "import torch"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        print("skip: torch does not import")
        sys.exit(77)
    db = os.path.join(tmp, "torch.db")
    r = record(lib, python, "torch_alloc.py", db)
    check(r.returncode == 0, "torch_alloc.py runs under the preload (%s)" % r.stderr[-300:])
    text = report(tpprof, db)
    rec = Recording(db)
    # Allocations inside libtorch's initializers, run by `import torch`:
    # their stacks hold the script's import line, and the report names it
    # as their caller.
    imp = marker("torch_alloc.py", "IMPORT")
    tensor_line = marker("torch_alloc.py", "TENSOR")
    torch_ips = {ip for ip, in rec.db.execute("SELECT ip FROM symbols WHERE module LIKE '%libtorch%'")}
    inside = 0
    for sid, n, b in rec.sites():
        ips, node = [], sid
        while node:
            parent, ip = rec.nodes[node]
            ips.append(ip)
            node = parent
        pys = [f for f in rec.frames(sid) if f[0] == "py"]
        if pys and torch_ips & set(ips):  # (the library's own threads run no Python)
            # Made by the import, or by make() after it (the tensor).
            if any(f[1:] == ("make", "torch_alloc.py", tensor_line) for f in pys):
                continue
            inside += 1
            if not any(f[1:] == ("<module>", "torch_alloc.py", imp) for f in pys):
                check(False, "a site inside libtorch lacks the import line: %s" % fmt(rec.frames(sid)))
                break
    check(inside >= 1000, "sites inside libtorch all hold `import torch` (torch_alloc.py:%d) (%d sites)" % (imp, inside))
    check("< <module> (torch_alloc.py:%d)" % imp in text or "(torch_alloc.py:%d)" % imp in text,
          "the report names the import line")
    # The tensor made after the import (libtorch's initializers make ~670,000
    # distinct stacks; the stack depot grows with them, and only a failed
    # mmap leaves an allocation without a stack: meta.stacks_full).
    full = int(rec.meta("stacks_full") or 0)
    line = marker("torch_alloc.py", "TENSOR")
    s = [(rec.frames(sid), n, b) for sid, n, b in rec.sites() if b >= 3000017 and sid]
    if full:
        print("note: not checked: the tensor's line (the stack depot filled during import: %d allocations without a stack)" % full)
    else:
        check(any(first_py(fr) and first_py(fr)[1:] == ("make", "torch_alloc.py", line) for fr, _, _ in s),
              "the tensor's storage is named make (torch_alloc.py:%d)" % line)


def python_version(python):
    """(major, minor, micro) of the interpreter `python`."""
    out = subprocess.run([python, "-c", "import sys; print('%d %d %d' % sys.version_info[:3])"],
                         stdout=subprocess.PIPE, text=True).stdout.split()
    return tuple(int(x) for x in out) if len(out) == 3 else (0, 0, 0)


def main():
    mode, lib, tpprof, python = sys.argv[1:5]
    v = python_version(python)
    if not (3, 11) <= v[:2] <= (3, 13):
        print("skip: %s is Python %d.%d; the recorder reads the frames of 3.11 to 3.13" % ((python,) + v[:2]))
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        {"leaky": test_leaky, "off": test_off, "nested": test_nested, "threads": test_threads, "gil": test_gil,
         "fork": test_fork, "recycled": test_recycled, "callers": test_callers, "fpdeep": test_fpdeep, "torch": test_torch}[mode](lib, tpprof, python, tmp)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
