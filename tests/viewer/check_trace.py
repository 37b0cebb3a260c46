#!/usr/bin/env python3
# check_trace.py TRACE.json [--full] [--storages N] [--allocator NAME]: load a
# `tpprof export --format perfetto` file with Python's json module and check
# it against the Trace Event Format (the schema chrome://tracing and
# Perfetto's JSON importer read). Prints one line per problem; exit 1 if any.
import json
import sys

args = sys.argv[1:]
path = args.pop(0)
want_full = '--full' in args
want_storages = int(args[args.index('--storages') + 1]) if '--storages' in args else None
want_allocator = args[args.index('--allocator') + 1] if '--allocator' in args else None
# --cap N: at most N allocation events on any thread, and every thread that
# had more carries a note and a "tid T: not shown" counter track whose last
# point, with the events shown, adds up to --events-on TID TOTAL.
cap = int(args[args.index('--cap') + 1]) if '--cap' in args else None
events_on = {}
if '--events-on' in args:
    i = args.index('--events-on')
    events_on[int(args[i + 1])] = int(args[i + 2])
problems = []


def problem(msg):
    problems.append(msg)


with open(path, 'rb') as f:
    doc = json.loads(f.read().decode('utf-8'))  # strict UTF-8, as browsers read it

if not isinstance(doc, dict) or not isinstance(doc.get('traceEvents'), list):
    print('no traceEvents array')
    sys.exit(1)
if doc.get('displayTimeUnit') not in ('ms', 'ns'):
    problem('displayTimeUnit must be ms or ns')

counters, instants, open_async, slices, names = {}, 0, {}, 0, set()
per_thread, notes, last_hidden = {}, {}, {}
for i, e in enumerate(doc['traceEvents']):
    where = 'event %d (%r)' % (i, e)[:200]
    if not isinstance(e.get('name'), str) or not isinstance(e.get('ph'), str) or not isinstance(e.get('pid'), int):
        problem(where + ': name, ph (strings) and pid (integer) are required')
        continue
    ph = e['ph']
    if ph != 'M' and (not isinstance(e.get('ts'), (int, float)) or e['ts'] < 0):
        problem(where + ': ts must be a number >= 0')
    if ph == 'M':
        if e['name'] not in ('process_name', 'thread_name') or not isinstance(e.get('args', {}).get('name'), str):
            problem(where + ': metadata needs args.name')
        names.add(e['name'])
    elif ph == 'C':
        a = e.get('args')
        if not isinstance(a, dict) or not a or not all(isinstance(v, (int, float)) for v in a.values()):
            problem(where + ': a counter needs numeric args')
        else:
            counters.setdefault(e['name'], set()).update(a.keys())
            if e['name'].startswith('tid ') and e['name'].endswith(': not shown'):
                last_hidden[int(e['name'][4:-11])] = a
    elif ph == 'i' and e.get('cat') == 'tpprof':
        # A note: what the export left out, on the thread it concerns.
        a = e.get('args', {})
        if not isinstance(a.get('note'), str) or not isinstance(a.get('not_shown'), int) or \
                not isinstance(e.get('tid'), int):
            problem(where + ': a note needs args.note, args.not_shown and a tid')
        else:
            notes[e['tid']] = a['not_shown']
    elif ph == 'i':
        instants += 1
        if e.get('s') not in ('t', 'p', 'g') or not isinstance(e.get('tid'), int):
            problem(where + ': an instant needs s in t/p/g and a tid')
        else:
            per_thread[e['tid']] = per_thread.get(e['tid'], 0) + 1
        a = e.get('args', {})
        if not isinstance(a.get('address'), str) or not a['address'].startswith('0x'):
            problem(where + ': address must be a hex string')
        if 'stack' in a and not (isinstance(a['stack'], list) and all(isinstance(s, str) for s in a['stack'])):
            problem(where + ': stack must be a list of strings')
        if e['name'] not in ('free', 'munmap') and 'stack' not in a:
            problem(where + ': an allocation carries its stack')
    elif ph in ('b', 'e'):
        key = (e.get('cat'), e.get('id'))
        if not isinstance(e.get('cat'), str) or not isinstance(e.get('id'), int):
            problem(where + ': async events need cat and an integer id')
        if ph == 'b':
            if key in open_async:
                problem(where + ': begun twice')
            open_async[key] = e
        else:
            b = open_async.pop(key, None)
            if b is None:
                problem(where + ': ends what never began')
            elif b['name'] != e['name'] or e['ts'] < b['ts']:
                problem(where + ': ends before it began, or under another name')
            else:
                slices += 1
    else:
        problem(where + ': unexpected ph ' + ph)

if open_async:
    problem('%d async slices never end' % len(open_async))
for name in ('heap', 'mmap', 'RSS'):
    if counters.get(name) != {'bytes'}:
        problem('counter track %s with args.bytes expected, got %r' % (name, counters.get(name)))
if want_allocator and counters.get(want_allocator) != {'reserved', 'allocated'}:
    problem('allocator counter %r with reserved and allocated expected, got %r' % (want_allocator, sorted(counters)))
if want_full and instants == 0:
    problem('a --full recording gives allocation events')
if not want_full and instants:
    problem('an aggregate recording has no allocation events')
if want_storages is not None and slices != want_storages:
    problem('%d storage slices, expected %d' % (slices, want_storages))
if cap is not None:
    for tid, n in per_thread.items():
        if n > cap:
            problem('thread %d has %d events, over the cap of %d' % (tid, n, cap))
    for tid, hidden in notes.items():
        h = last_hidden.get(tid)
        if per_thread.get(tid, 0) != cap or not h:
            problem('thread %d: a note, but %d events shown and counters %r' % (tid, per_thread.get(tid, 0), h))
        elif h['events'] != hidden or h['allocations'] + h['frees'] < hidden:
            problem('thread %d: the counter track says %r, the note %d' % (tid, h, hidden))
for tid, total in events_on.items():
    if per_thread.get(tid, 0) + notes.get(tid, 0) != total:
        problem('thread %d: %d shown + %d not shown, expected %d in all' % (
            tid, per_thread.get(tid, 0), notes.get(tid, 0), total))
if 'process_name' not in names:
    problem('no process_name')
for p in problems:
    print(p)
print('%s: %d events, %d instants, %d slices, counters %s' % (
    'FAIL' if problems else 'ok', len(doc['traceEvents']), instants, slices, sorted(counters)))
sys.exit(1 if problems else 0)
