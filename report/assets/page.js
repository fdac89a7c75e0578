// report.html's charts: turns the page's data (the JSON in #p2pfault-data,
// written by package report) into Apache ECharts options. ECharts draws;
// this only says what to draw. Every text from the run that reaches HTML
// (tooltips) goes through echarts.format.encodeHTML; chart labels are drawn
// on the canvas and are not HTML.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('p2pfault-data').textContent);
  const esc = (v) => echarts.format.encodeHTML(String(v));
  const palette = ['#1f77b4', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];
  const srcColor = (i) => palette[((i % palette.length) + palette.length) % palette.length];
  const shade = { fault: 'rgba(220, 60, 60, 0.13)', recovery: 'rgba(60, 110, 200, 0.11)' };
  // How each pull state is marked on a latency chart; the source's colour
  // unless the state has its own.
  const states = {
    'hit': { symbol: 'circle', size: 6 },
    'miss': { symbol: 'diamond', size: 8, color: '#e69500' },
    'failed': { symbol: 'triangle', size: 9, color: '#d62728' },
    'aborted': { symbol: 'rect', size: 7, color: '#555555' },
    // A cross: it returned 200 with another text than the source's.
    'wrong text': { symbol: 'path://M0,2 L2,0 L5,3 L8,0 L10,2 L7,5 L10,8 L8,10 L5,7 L2,10 L0,8 L3,5 Z', size: 10, color: '#111111' },
    // An arrow up: its latency is at least this and was still growing.
    'in flight': { symbol: 'path://M5,0 L10,9 L6.5,9 L6.5,16 L3.5,16 L3.5,9 L0,9 Z', size: [10, 16], color: '#b8008a' },
  };
  const secs = (s) => (+s).toFixed(3) + ' s';
  // With causes (the pulls' cause, package cause) a latency chart colours
  // the pulls that ended by what ended them, one series per cause; a pull
  // in flight or with a wrong text keeps its own mark.
  const causeColors = {
    'p2p': '#1f77b4', 'local': '#2ca02c', 'heartbeat': '#e69500', 'lookup_deadline': '#bcbd22',
    'handshake': '#d62728', 'peer_down': '#8c564b', 'load_timeout': '#9467bd', 'abort_ack': '#e377c2', 'source_failed': '#ff7f0e',
    'unbound_store': '#17becf', 'pull_timeout': '#7f7f7f', 'error': '#000000', 'run_end': '#555555', 'unknown': '#ff00ff',
  };
  const ownMark = new Set(['wrong text', 'in flight']);

  function tipTable(title, cls, rows, attrs) {
    let h = '<div class="tip ' + cls + '"' + (attrs || '') + '><b>' + esc(title) + '</b><table>';
    for (const [k, v] of rows) {
      h += '<tr><td class="k">' + esc(k) + '</td><td class="v">' + esc(v) + '</td></tr>';
    }
    return h + '</table></div>';
  }

  // A pull's details. Fields the page does not know yet (added to the
  // data later) are listed too, under their JSON names.
  const known = new Set(['source', 'trial', 'state', 'start_s', 'latency_s', 'status', 'prompt_tokens', 'cached_tokens', 'ttft_s', 'error', 'pull_text', 'source_text']);
  function pullTip(p) {
    const inFlight = p.state === 'in flight';
    const rows = [
      ['state', p.state],
      ['source', 'source-' + p.source],
      ['start', secs(p.start_s)],
      [inFlight ? 'age at the last event' : 'latency', secs(p.latency_s) + (inFlight ? ' (still running)' : '')],
      ['status', inFlight ? 'no answer yet' : (p.status ? p.status : 'no response')],
      ['cached tokens', p.cached_tokens + ' of ' + p.prompt_tokens + ' prompt tokens' + (p.cached_tokens > 0 ? ' (hit)' : '')],
    ];
    if (p.ttft_s) rows.push(['TTFT', secs(p.ttft_s)]);
    if (p.error) rows.push(['error', p.error]);
    if (p.state === 'wrong text') rows.push(["pull's text", JSON.stringify(p.pull_text)], ["source's text", JSON.stringify(p.source_text)]);
    for (const k of Object.keys(p)) {
      if (!known.has(k)) rows.push([k, typeof p[k] === 'object' ? JSON.stringify(p[k]) : p[k]]);
    }
    return tipTable('pull ' + p.trial, 'pull-tip', rows, ' data-trial="' + esc(p.trial) + '"');
  }

  function markTip(params) {
    const d = params.data || {};
    if (d.fault) {
      const f = d.fault;
      const rows = [['at', secs(f.t_s)], ['source', 'source-' + f.source], ['by', f.by]];
      if (f.error) rows.push(['error', f.error]);
      return tipTable('fault action: ' + f.action, 'fault-tip', rows);
    }
    if (d.window) {
      const w = d.window;
      return tipTable(d.window.kind + ' window, source-' + w.source, 'window-tip', [['from', secs(w.from)], ['to', secs(w.to)]]);
    }
    if (d.bound) return tipTable('faulted_max bound', 'bound-tip', [['bound', secs(d.bound)]]);
    return '';
  }

  function tooltip(row) {
    return {
      trigger: 'item', confine: true,
      formatter: (params) => {
        if (params.componentType === 'markArea' || params.componentType === 'markLine') return markTip(params);
        const v = params.value;
        if (Array.isArray(v) && typeof v[2] === 'number' && row.pulls[v[2]] && String(params.seriesId).startsWith('pulls')) {
          return pullTip(row.pulls[v[2]]);
        }
        if (params.data && params.data.bin) {
          const b = params.data.bin;
          return tipTable(params.seriesName, 'rate-tip', [
            ['pulls started', secs(b.from) + ' – ' + secs(b.to)],
            ['hit', b.hits + ' of ' + b.n + ' (' + Math.round(100 * b.hits / b.n) + ' %)'],
          ]);
        }
        return tipTable(params.seriesName, 'value-tip', [['value', Array.isArray(v) ? v[1] : v]]);
      },
    };
  }

  // The fault and recovery windows shaded, the fault actions marked: two
  // series with no points of their own, so the legend can hide them.
  function windowSeries(row) {
    const fault = [], recovery = [];
    for (const w of row.windows) {
      fault.push([{ xAxis: w.start_s, window: { kind: 'fault', source: w.source, from: w.start_s, to: w.end_s } }, { xAxis: w.end_s }]);
      if (w.recovery_end_s) {
        recovery.push([{ xAxis: w.end_s, window: { kind: 'recovery', source: w.source, from: w.end_s, to: w.recovery_end_s } }, { xAxis: w.recovery_end_s }]);
      }
    }
    const out = [];
    if (fault.length) {
      out.push({
        id: 'fault-window', name: 'fault window', type: 'line', data: [], color: 'rgba(220, 60, 60, 0.45)', legendIcon: 'rect',
        markArea: { itemStyle: { color: shade.fault }, data: fault },
        // Marks sit under the pulls (z 1, the series' 2): a pull at the
        // instant of a fault action shows its own tooltip.
        markLine: {
          z: 1, symbol: 'none', lineStyle: { color: '#a33', type: 'solid', width: 1 },
          label: { formatter: (p) => p.data.fault.action + ' source-' + p.data.fault.source, position: 'insideEndTop', color: '#a33' },
          data: row.faults.map((f) => ({ xAxis: f.t_s, fault: f })),
        },
      });
    }
    if (recovery.length) {
      out.push({ id: 'recovery-window', name: 'recovery window', type: 'line', data: [], color: 'rgba(60, 110, 200, 0.4)', legendIcon: 'rect', markArea: { itemStyle: { color: shade.recovery }, data: recovery } });
    }
    return out;
  }

  function base(row, yAxis) {
    const xmax = Math.max(row.run_end_s, ...row.pulls.map((p) => p.start_s), 1);
    return {
      animation: false,
      grid: { left: 62, right: 30, top: 38, bottom: 62 },
      legend: { top: 4, left: 8, width: '78%', type: 'scroll', itemWidth: 18, itemGap: 8 },
      tooltip: tooltip(row),
      toolbox: { right: 6, top: 0, feature: { dataZoom: { filterMode: 'none' }, restore: {} } },
      xAxis: { type: 'value', name: 'seconds since t0', nameLocation: 'middle', nameGap: 22, min: 0, max: Math.ceil(xmax) },
      yAxis: (Array.isArray(yAxis) ? yAxis : [yAxis]).map((a) => Object.assign({ nameLocation: 'middle', nameGap: 42 }, a)),
      dataZoom: [
        { type: 'inside', xAxisIndex: 0, filterMode: 'none' },
        { type: 'slider', xAxisIndex: 0, filterMode: 'none', height: 14, bottom: 6 },
      ],
    };
  }

  function latency(row, src) {
    const series = windowSeries(row);
    const labels = row.cause_labels || {};
    const byCause = (p) => p.cause && !ownMark.has(p.state);
    for (const cause of Object.keys(causeColors)) {
      if (!labels[cause]) continue;
      const pts = [];
      row.pulls.forEach((p, i) => { if (p.source === src && byCause(p) && p.cause === cause) pts.push([p.start_s, p.latency_s, i]); });
      if (!pts.length) continue;
      series.push({
        id: 'pulls-cause-' + cause, name: labels[cause], type: 'scatter', data: pts, symbol: 'circle', symbolSize: 7,
        color: causeColors[cause], emphasis: { scale: 1.8 },
      });
    }
    for (const [state, st] of Object.entries(states)) {
      const pts = [];
      row.pulls.forEach((p, i) => { if (p.source === src && p.state === state && !byCause(p)) pts.push([p.start_s, p.latency_s, i]); });
      if (!pts.length) continue;
      series.push({
        id: 'pulls-' + state, name: state, type: 'scatter', data: pts, symbol: st.symbol, symbolSize: st.size,
        color: st.color || srcColor(src), emphasis: { scale: 1.8 },
      });
    }
    const bound = row.faulted_bound_s;
    if (bound > 0) {
      series.push({
        id: 'bound', name: 'faulted_max bound', type: 'line', data: [], color: '#b40000', legendIcon: 'path://M0,4 L4,4 L4,6 L0,6 Z M6,4 L10,4 L10,6 L6,6 Z M12,4 L16,4 L16,6 L12,6 Z',
        markLine: { z: 1, symbol: 'none', lineStyle: { type: 'dashed', color: '#b40000' }, label: { formatter: 'bound ' + bound.toFixed(2) + ' s', position: 'insideStartTop' }, data: [{ yAxis: bound, bound: bound }] },
      });
    }
    const opt = base(row, { type: 'value', name: 'latency (s)', min: 0, max: (v) => niceMax(Math.max(v.max, bound * 1.15)) });
    opt.series = series;
    return opt;
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function hitRate(row) {
    const series = windowSeries(row);
    for (const h of row.hit_rate) {
      series.push({
        id: 'rate-' + h.source, name: 'source-' + h.source, type: 'line', color: srcColor(h.source), symbolSize: 5,
        data: h.points.map((b) => ({ value: [b.t_s + h.bin_s / 2, 100 * b.hits / b.n], bin: { from: b.t_s, to: b.t_s + h.bin_s, hits: b.hits, n: b.n } })),
      });
    }
    const opt = base(row, { type: 'value', name: 'hit %', min: 0, max: 100 });
    opt.series = series;
    return opt;
  }

  function ttft(row) {
    const series = windowSeries(row);
    for (const src of row.sources) {
      const pts = [];
      row.pulls.forEach((p, i) => { if (p.source === src && p.ttft_s > 0) pts.push([p.start_s, p.ttft_s, i]); });
      if (pts.length) series.push({ id: 'pulls-ttft-' + src, name: 'source-' + src, type: 'scatter', data: pts, symbolSize: 6, color: srcColor(src) });
    }
    const opt = base(row, { type: 'value', name: 'TTFT (s)', min: 0 });
    opt.series = series;
    return opt;
  }

  function decoder(row) {
    const val = (v) => (v === null || v === undefined ? null : v);
    const line = (id, name, axis, color, get) => ({
      id: id, name: name, type: 'line', yAxisIndex: axis, color: color, showSymbol: false, connectNulls: false,
      data: row.decoder.map((p) => [p.t_s, val(get(p.live))]),
    });
    const series = windowSeries(row).concat([
      line('running', 'running', 0, '#1f77b4', (l) => l.running),
      line('waiting', 'waiting', 0, '#ff7f0e', (l) => l.waiting),
      line('hit-rate', 'ext. hit %', 1, '#2ca02c', (l) => (l.hit_rate === null ? null : 100 * l.hit_rate)),
      line('p2p-read', 'P2P MiB/s', 2, '#9467bd', (l) => (l.p2p_read_bps === null ? null : l.p2p_read_bps / 1048576)),
    ]);
    const opt = base(row, [
      { type: 'value', name: 'requests', min: 0, minInterval: 1 },
      { type: 'value', name: 'hit %', min: 0, max: 100, position: 'right', nameGap: 30 },
      { type: 'value', name: 'MiB/s', min: 0, position: 'right', offset: 52, nameGap: 34, splitLine: { show: false } },
    ]);
    opt.grid.right = 112;
    // Six series: the legend takes two lines rather than pages.
    opt.legend.type = 'plain';
    opt.grid.top = 62;
    opt.tooltip = {
      trigger: 'axis', confine: true,
      formatter: (ps) => {
        const list = Array.isArray(ps) ? ps : [ps];
        if (!list.length) return '';
        const rows = list.map((p) => [p.seriesName, p.value[1] === null ? '–' : (+p.value[1]).toFixed(2)]);
        return tipTable('decoder at ' + secs(list[0].value[0]), 'metrics-tip', rows);
      },
    };
    opt.series = series;
    return opt;
  }

  // A sweep chart: the faulted max, the median after detect and the
  // recovery time of one row of the slice at each value of the swept
  // setting (a category axis: the values as typed, in the order run), each
  // with its check's bound dashed in its colour.
  function sweep(sw) {
    const figs = [
      { id: 'max', name: 'faulted max', data: sw.faulted_max_s, bound: sw.faulted_max_bound_s, what: 'faulted_max bound', color: '#d62728' },
      { id: 'median', name: 'median after detect', data: sw.median_after_detect_s, bound: sw.faulted_median_bound_s, what: 'faulted_median bound', color: '#1f77b4' },
      { id: 'recover', name: 'recover_s', data: sw.recover_s, bound: sw.recovery_window_s, what: 'recovery window', color: '#2ca02c' },
    ];
    const series = figs.map((f) => ({
      id: 'sweep-' + f.id, name: f.name, type: 'line', color: f.color, symbolSize: 8, connectNulls: false,
      data: f.data,
      markLine: f.bound > 0 ? {
        symbol: 'none', lineStyle: { type: 'dashed', color: f.color },
        label: { formatter: f.what + ' ' + f.bound.toFixed(2) + ' s', position: 'insideEndTop', color: f.color },
        data: [{ yAxis: f.bound, bound: f.bound }],
      } : undefined,
    }));
    const top = Math.max(...figs.map((f) => f.bound * 1.15), ...figs.flatMap((f) => f.data.filter((v) => v !== null)));
    return {
      animation: false,
      grid: { left: 62, right: 30, top: 38, bottom: 48 },
      legend: { top: 4, left: 8 },
      tooltip: {
        trigger: 'axis', confine: true,
        formatter: (ps) => {
          const list = Array.isArray(ps) ? ps : [ps];
          if (!list.length) return '';
          const rows = list.map((p) => [p.seriesName, p.value === null || p.value === undefined ? '–' : secs(p.value)]);
          return tipTable(sw.setting + ' = ' + list[0].name, 'sweep-tip', rows);
        },
      },
      xAxis: { type: 'category', name: sw.setting, nameLocation: 'middle', nameGap: 28, data: sw.values },
      yAxis: { type: 'value', name: 'seconds', nameLocation: 'middle', nameGap: 42, min: 0, max: niceMax(top) },
      series: series,
    };
  }

  // The legend lists the series with their own icons: a swatch for a
  // shaded window, a dash for the bound.
  function withLegend(opt) {
    opt.legend.data = opt.series.map((s) => (s.legendIcon ? { name: s.name, icon: s.legendIcon } : s.name));
    return opt;
  }

  const kinds = { latency: null, hit_rate: hitRate, ttft: ttft, decoder: decoder };
  const charts = [];
  for (const row of data.rows) {
    const section = document.getElementById(row.id);
    if (!section) continue;
    const group = [];
    for (const el of section.querySelectorAll('.chart')) {
      const kind = el.dataset.kind;
      if (!(kind in kinds)) continue;
      const opt = kind === 'latency' ? latency(row, +el.dataset.source) : kinds[kind](row);
      const chart = echarts.init(el, null, { renderer: 'canvas' });
      chart.setOption(withLegend(opt));
      group.push(chart);
      charts.push(chart);
    }
    linkZoom(group);
  }

  for (const sw of data.sweeps || []) {
    const el = document.getElementById(sw.id);
    if (!el) continue;
    const chart = echarts.init(el, null, { renderer: 'canvas' });
    chart.setOption(withLegend(sweep(sw)));
    charts.push(chart);
  }

  // The charts of a row share their time axis: zooming one zooms the rest.
  function linkZoom(group) {
    let busy = false;
    for (const c of group) {
      c.on('datazoom', () => {
        if (busy) return;
        const dz = c.getOption().dataZoom[0];
        busy = true;
        for (const o of group) {
          if (o !== c) o.dispatchAction({ type: 'dataZoom', dataZoomIndex: 0, start: dz.start, end: dz.end });
        }
        busy = false;
      });
    }
  }

  window.addEventListener('resize', () => charts.forEach((c) => c.resize()));
  // Says the charts are drawn (a test waits for it).
  document.documentElement.dataset.chartsDrawn = String(charts.length);
})();
