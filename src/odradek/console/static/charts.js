// The charts page: fetches the broker's metric history (/charts/data: shared Unix-second timestamps,
// and per chart its series, one value per timestamp, null for no point) and draws one uPlot chart per
// chart, refreshed every sampling interval. Axis and grid colours come from the console's CSS
// variables (so dark mode reads well); series colours are a fixed palette legible on both.
(() => {
  'use strict';
  const PALETTE = ['#1c7ed6', '#e8590c', '#2f9e44', '#ae3ec9', '#f59f00', '#0ca678', '#d6336c',
    '#5c7cfa', '#94d82d', '#fa5252', '#15aabf', '#be4bdb', '#fd7e14', '#868e96'];
  const charts = new Map(); // chart id -> {plot, labels}

  function cssVar(name, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }

  function compact(value, unit) {
    if (value === null || value === undefined) return '';
    const abs = Math.abs(value);
    const si = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (const [size, prefix] of si) {
      if (abs >= size) return (value / size).toFixed(abs >= size * 10 ? 0 : 1) + ' ' + prefix + unit;
    }
    return (abs >= 10 || value === 0 ? value.toFixed(0) : value.toFixed(abs >= 1 ? 1 : 2)) + ' ' + unit;
  }

  function width(container) {
    // two charts a row on a wide window, one on a narrow one
    const room = container.clientWidth || 600;
    return Math.max(320, Math.floor(room >= 1000 ? (room - 24) / 2 : room) - 20); // room for a scroll bar
  }

  function options(chart, container) {
    const fg = cssVar('--fg', '#888');
    const line = cssVar('--line', '#888');
    const axis = {
      stroke: fg,
      grid: {stroke: line, width: 1},
      ticks: {stroke: line, width: 1},
    };
    return {
      title: chart.title,
      width: width(container),
      height: 220,
      scales: {x: {time: true}},
      series: [{}].concat(chart.series.map((s, i) => ({
        label: s.label,
        stroke: PALETTE[i % PALETTE.length],
        width: 1.5,
        spanGaps: false,
        value: (u, v) => compact(v, chart.unit),
      }))),
      axes: [axis, Object.assign({}, axis, {size: 70, values: (u, splits) => splits.map((v) => compact(v, chart.unit))})],
    };
  }

  function columns(data, chart) {
    return [data.time].concat(chart.series.map((s) => s.values));
  }

  function draw(container, data, rebuild) {
    for (const chart of data.charts) {
      const labels = chart.series.map((s) => s.label).join('\n');
      let entry = charts.get(chart.id);
      if (entry && (rebuild || entry.labels !== labels)) {
        entry.plot.destroy();
        entry = undefined;
      }
      if (entry) {
        entry.plot.setData(columns(data, chart));
        continue;
      }
      let box = document.getElementById('chart-' + chart.id);
      if (!box) {
        box = document.createElement('div');
        box.id = 'chart-' + chart.id;
        box.className = 'chart';
        container.appendChild(box);
      }
      const plot = new uPlot(options(chart, container), columns(data, chart), box);
      charts.set(chart.id, {plot, labels});
    }
  }

  function status(text) {
    const line = document.getElementById('charts-status');
    if (line) line.textContent = text;
  }

  async function load(container, rebuild) {
    try {
      const answer = await fetch(container.dataset.source, {headers: {Accept: 'application/json'}, cache: 'no-store'});
      if (!answer.ok) {
        status('The metric history could not be read (HTTP ' + answer.status + ').');
        return;
      }
      const data = await answer.json();
      draw(container, data, rebuild);
      const count = data.time.length;
      status(count === 0
        ? 'Waiting for the first samples (one every ' + data.interval_ms / 1000 + ' s).'
        : count + ' samples since ' + new Date((data.start || data.time[0]) * 1000).toLocaleTimeString() +
          '; the last reading of the metrics took ' + data.sample_cost_ms + ' ms.');
    } catch (error) {
      status('The metric history could not be read: ' + error);
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    const container = document.getElementById('charts');
    if (!container || typeof uPlot === 'undefined') return;
    const refresh = Math.max(1000, Number(container.dataset.refreshMs) || 10000);
    load(container, false);
    setInterval(() => { if (!document.hidden) load(container, false); }, refresh);
    let drawnFor = container.clientWidth;
    new ResizeObserver(() => {
      if (Math.abs(container.clientWidth - drawnFor) < 30) return;
      drawnFor = container.clientWidth;
      for (const entry of charts.values()) entry.plot.setSize({width: width(container), height: 220});
    }).observe(container);
    const dark = window.matchMedia('(prefers-color-scheme: dark)');
    if (dark.addEventListener) dark.addEventListener('change', () => load(container, true));
  });
})();
