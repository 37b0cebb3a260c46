// report.js: the interactive parts of `tpprof report --format html`: the
// memory timeline (hover: values, click: what was live then) and the icicle
// flame graph (metric switch, search, zoom). Embedded into the page by the
// build; reads the JSON the C generator wrote into #tp-data. No framework, no
// network: the page must work from file://. Everything it shows is inserted
// as text (textContent), never as HTML, so names need no escaping here.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('tp-data').textContent);
  var SVG = 'http://www.w3.org/2000/svg';

  function fmt(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return i === 0 ? b + ' B' : b.toFixed(b < 10 ? 2 : b < 100 ? 1 : 0) + ' ' + u[i];
  }
  function count(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
  function secs(ns) { return (ns / 1e9).toFixed(3) + ' s'; }
  function el(tag, attrs, text) {
    var e = tag.indexOf('svg:') === 0 ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ------------------------------------------------------------------ timeline
  function drawTimeline() {
    var box = document.getElementById('timeline-chart');
    var tl = D.timeline;
    if (!box || !tl || !tl.t.length) return;
    var series = [
      {name: 'heap', color: '#4e79a7', v: tl.heap},
      {name: 'mmap', color: '#f28e2b', v: tl.mmap},
      {name: 'RSS', color: '#59a14f', v: tl.rss}
    ];
    (D.devices || []).forEach(function (d, i) {
      var c = ['#b07aa1', '#9c755f', '#e15759', '#76b7b2'][i % 4];
      if (d.reserved) series.push({name: d.name + ' reserved', color: c, v: d.reserved, t: d.t, dash: '6,3'});
      series.push({name: d.name + ' allocated', color: c, v: d.allocated, t: d.t, dash: '2,2'});
    });
    var W = Math.max(600, box.clientWidth || 1000), H = 260, L = 70, R = 10, T = 10, B = 28;
    var t0 = tl.t[0], t1 = tl.t[tl.t.length - 1], max = 1;
    series.forEach(function (s) {
      (s.t || []).forEach(function (t) { if (t > t1) t1 = t; if (t < t0) t0 = t; });
      s.v.forEach(function (v) { if (v > max) max = v; });
    });
    if (tl.peak_bytes > max) max = tl.peak_bytes;
    if (t1 <= t0) t1 = t0 + 1;
    function x(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function y(v) { return T + (1 - v / max) * (H - T - B); }
    var svg = el('svg:svg', {width: W, height: H, id: 'timeline-svg'});
    for (var g = 0; g <= 4; g++) {
      var gv = max * g / 4;
      svg.appendChild(el('svg:line', {x1: L, x2: W - R, y1: y(gv), y2: y(gv), stroke: '#eee'}));
      svg.appendChild(el('svg:text', {x: L - 4, y: y(gv) + 4, 'text-anchor': 'end', 'font-size': 10}, fmt(Math.round(gv))));
    }
    svg.appendChild(el('svg:text', {x: L, y: H - 8, 'font-size': 10}, secs(t0)));
    svg.appendChild(el('svg:text', {x: W - R, y: H - 8, 'font-size': 10, 'text-anchor': 'end'}, secs(t1)));
    series.forEach(function (s) {
      var ts = s.t || tl.t, pts = [];
      for (var i = 0; i < s.v.length; i++) pts.push(x(ts[i]).toFixed(1) + ',' + y(s.v[i]).toFixed(1));
      var a = {points: pts.join(' '), fill: 'none', stroke: s.color, 'stroke-width': 1.5, 'class': 'series'};
      if (s.dash) a['stroke-dasharray'] = s.dash;
      svg.appendChild(el('svg:polyline', a));
    });
    if (tl.peak_bytes) {
      var px = x(tl.peak_t);
      svg.appendChild(el('svg:line', {x1: px, x2: px, y1: T, y2: H - B, stroke: '#e15759', 'stroke-dasharray': '4,3', id: 'peak-mark'}));
      // The label on whichever side of the mark has room.
      var right = px < W / 2;
      svg.appendChild(el('svg:text', {x: right ? px + 4 : px - 4, y: T + 12, 'font-size': 11, fill: '#e15759',
                                      'text-anchor': right ? 'start' : 'end'},
        'peak ' + fmt(tl.peak_bytes) + ' (heap + mmap) at ' + secs(tl.peak_t)));
    }
    var cursor = el('svg:line', {x1: 0, x2: 0, y1: T, y2: H - B, stroke: '#888', visibility: 'hidden'});
    svg.appendChild(cursor);
    box.appendChild(svg);
    var legend = document.getElementById('timeline-legend');
    series.forEach(function (s) {
      var sw = el('span'); sw.style.background = s.color; legend.appendChild(sw);
      legend.appendChild(document.createTextNode(s.name));
    });
    var tip = document.getElementById('timeline-tip');
    function timeAt(ev) {
      var r = svg.getBoundingClientRect();
      var t = t0 + (ev.clientX - r.left - L) / (W - L - R) * (t1 - t0);
      return Math.min(t1, Math.max(t0, t));
    }
    function nearest(ts, t) {
      var best = 0;
      for (var i = 1; i < ts.length; i++) if (Math.abs(ts[i] - t) < Math.abs(ts[best] - t)) best = i;
      return best;
    }
    svg.addEventListener('mousemove', function (ev) {
      var t = timeAt(ev), i = nearest(tl.t, t);
      cursor.setAttribute('x1', x(tl.t[i])); cursor.setAttribute('x2', x(tl.t[i]));
      cursor.setAttribute('visibility', 'visible');
      var parts = [secs(tl.t[i]), 'heap ' + fmt(tl.heap[i]), 'mmap ' + fmt(tl.mmap[i]), 'RSS ' + fmt(tl.rss[i])];
      (D.devices || []).forEach(function (d) {
        if (!d.t.length) return;
        var k = 0;
        while (k + 1 < d.t.length && d.t[k + 1] <= tl.t[i]) k++;
        parts.push(d.name + ' ' + fmt(d.allocated[k]) + (d.reserved ? ' / ' + fmt(d.reserved[k]) : ''));
      });
      tip.textContent = parts.join('   ');
    });
    svg.addEventListener('click', function (ev) { showLive(timeAt(ev)); });
  }

  // What was live at time t: the nearest snapshot (full recordings), or the
  // peak (aggregate recordings keep only that moment).
  function showLive(t) {
    var box = document.getElementById('live-at'), L = D.live;
    if (!box || !L || !L.snaps.length) return;
    var best = L.snaps[0];
    L.snaps.forEach(function (s) { if (Math.abs(s.t - t) < Math.abs(best.t - t)) best = s; });
    box.textContent = '';
    box.appendChild(el('p', {}, (L.full ? 'Live at ' + secs(best.t) : L.note) + ': ' + fmt(best.total) +
      ' in ' + count(best.blocks) + ' blocks, by allocation site:'));
    var tab = el('table'), hr = el('tr');
    ['bytes', 'blocks', 'site'].forEach(function (h, i) { hr.appendChild(el('th', i < 2 ? {'class': 'num'} : {}, h)); });
    tab.appendChild(hr);
    best.rows.forEach(function (r) {
      var tr = el('tr');
      tr.appendChild(el('td', {'class': 'num'}, fmt(r[0])));
      tr.appendChild(el('td', {'class': 'num'}, count(r[1])));
      tr.appendChild(el('td', {'class': 'mono'}, r[2]));
      tab.appendChild(tr);
    });
    box.appendChild(tab);
  }

  // ------------------------------------------------------------------ flame graph
  function Flame() {
    var F = D.flame, box = document.getElementById('flame-chart');
    if (!box || !F || !F.parent.length) return;
    var n = F.parent.length, kids = [];
    for (var i = 0; i < n; i++) kids.push([]);
    for (i = 1; i < n; i++) kids[F.parent[i]].push(i);
    var metric = 'bytes', focus = 0, term = document.getElementById('flame-search').value || '';
    var tip = document.getElementById('flame-tip'), ROW = 18;
    var labels = {bytes: 'bytes allocated', calls: 'allocation calls', peak: 'bytes live at the peak',
                  leaked: 'bytes live at exit (lost first)'};
    function val(i) { return F.v[metric][i]; }
    function show(v) { return metric === 'calls' ? count(v) + ' calls' : fmt(v); }
    function color(i) {
      if (metric === 'leaked') return F.v.lost[i] > 0 ? 'hsl(4,' + (50 + 40 * F.v.lost[i] / Math.max(1, F.v.leaked[i])) + '%,55%)' : '#bbb';
      var h = 0, s = F.names[F.name[i]];
      for (var k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) >>> 0;
      return 'hsl(' + (20 + h % 40) + ',' + (60 + h % 30) + '%,' + (55 + h % 15) + '%)';
    }
    function order(i) {
      // Lost first in the leak view, then the largest first.
      return kids[i].slice().sort(function (a, b) {
        if (metric === 'leaked' && (F.v.lost[b] > 0) !== (F.v.lost[a] > 0)) return F.v.lost[b] > 0 ? 1 : -1;
        return val(b) - val(a);
      });
    }
    function draw() {
      box.textContent = '';
      var W = box.clientWidth || 1000, maxDepth = 0, top = '', topv = -1;
      var path = [], p = focus;
      while (p !== 0) { path.unshift(p); p = F.parent[p]; }
      path.unshift(0);
      var total = val(focus);
      function frame(i, depth, x, w) {
        var d = el('div', {'class': 'frame', 'data-depth': depth, 'data-name': F.names[F.name[i]]});
        d.style.left = x + 'px'; d.style.width = Math.max(1, w) + 'px'; d.style.top = depth * ROW + 'px';
        d.style.background = color(i);
        if (w > 30) d.textContent = F.names[F.name[i]];
        if (term && F.names[F.name[i]].indexOf(term) >= 0) d.classList.add('match');
        d.title = F.names[F.name[i]] + '\n' + show(val(i)) + (total ? ' (' + (100 * val(i) / val(0)).toFixed(1) + '% of all)' : '');
        d.addEventListener('mouseenter', function () { tip.textContent = d.title.replace('\n', ': '); });
        d.addEventListener('click', function (ev) { ev.stopPropagation(); focus = i; draw(); });
        box.appendChild(d);
        if (depth > maxDepth) maxDepth = depth;
        return d;
      }
      // The focused frame's ancestors span the width, faded.
      for (var a = 0; a < path.length - 1; a++) frame(path[a], a, 0, W).classList.add('faded');
      function walk(i, depth, x, w) {
        frame(i, depth, x, w);
        if (depth === 1 && val(i) > topv) { topv = val(i); top = F.names[F.name[i]]; }
        var v = val(i), cx = x;
        if (v <= 0) return;
        order(i).forEach(function (c) {
          var cw = w * val(c) / v;
          if (cw >= 0.5) walk(c, depth + 1, cx, cw);
          cx += cw;
        });
      }
      if (total > 0) walk(focus, path.length - 1, 0, W);
      else box.appendChild(el('p', {'class': 'missing'}, 'Nothing to show for ' + labels[metric] + '.'));
      box.style.height = ((maxDepth + 1) * ROW + 4) + 'px';
      if (focus === 0) box.setAttribute('data-top', top);
      box.setAttribute('data-metric', metric);
      var m = document.getElementById('flame-matched');
      if (term) {
        var hit = 0;
        (function sum(i) { if (F.names[F.name[i]].indexOf(term) >= 0) { hit += val(i); return; } kids[i].forEach(sum); })(0);
        m.textContent = 'matched ' + show(hit) + ' (' + (val(0) ? (100 * hit / val(0)).toFixed(1) : '0') + '%)';
      } else m.textContent = '';
    }
    document.getElementById('flame-metric').addEventListener('change', function (ev) { metric = ev.target.value; focus = 0; draw(); });
    document.getElementById('flame-search').addEventListener('input', function (ev) { term = ev.target.value; draw(); });
    document.getElementById('flame-reset').addEventListener('click', function () { focus = 0; draw(); });
    draw();
  }

  // A link can name a moment and a search: report.html#at=2500000&search=parse
  // (at: ns since the start) opens with what was live then and the matches lit.
  var hash = {};
  location.hash.slice(1).split('&').forEach(function (kv) {
    var i = kv.indexOf('=');
    if (i > 0) hash[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1));
  });
  drawTimeline();
  if (D.live && D.live.snaps.length)
    showLive(hash.at !== undefined ? Number(hash.at) : D.live.full && D.timeline ? D.timeline.peak_t : 0);
  if (hash.search !== undefined) {
    var box = document.getElementById('flame-search');
    if (box) box.value = hash.search;
  }
  Flame();
  document.body.setAttribute('data-ready', '1');
})();
