// Line charts over the clock (Chart.js, embedded from Debian's
// libjs-chart.js), and the datasets the dashboard draws in them: a line per
// member while a job is small, percentiles and the slowest members beyond.
import * as fmt from "./format.js";

export const PALETTE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                        "#7f7f7f", "#ff7f0e", "#393b79", "#637939", "#8c6d31"];
export const STRAGGLER = "#d62728";

// A chart made on its first update, with its first data: drawn once, not
// empty first and then again. Sized from its box once (resize() when the
// window changes) rather than by Chart.js's responsive mode, which reads the
// page's layout again for every chart while the dashboard builds the page.
export class TimeChart {
  constructor(canvas, { title, format }) {
    this.canvas = canvas;
    this.title = title;
    this.format = format;
    this.chart = null;
  }

  options(xmin, xmax, legend) {
    const format = this.format;
    return {
      animation: false,
      parsing: false,
      normalized: true,
      responsive: false,
      maintainAspectRatio: false,
      spanGaps: false,
      elements: { point: { radius: 0 }, line: { borderWidth: 1.5, tension: 0 } },
      interaction: { mode: "nearest", intersect: false },
      scales: {
        x: { type: "linear", min: xmin, max: xmax,
             ticks: { callback: (v) => fmt.clock(v), maxTicksLimit: 6, maxRotation: 0 } },
        y: { beginAtZero: true, ticks: { callback: (v) => format(v), maxTicksLimit: 6 } },
      },
      plugins: {
        title: { display: true, text: this.title, align: "start" },
        legend: { display: legend, position: "bottom", labels: { boxWidth: 12, boxHeight: 2 } },
        tooltip: {
          callbacks: {
            title: (items) => (items.length ? fmt.clock(items[0].parsed.x) : ""),
            label: (item) => item.dataset.label + ": " + format(item.parsed.y),
          },
        },
      },
    };
  }

  update(datasets, xmin, xmax) {
    const legend = datasets.length <= 16;
    if (!this.chart) {
      const box = this.canvas.parentElement;
      this.canvas.width = box.clientWidth;
      this.canvas.height = box.clientHeight;
      this.chart = new globalThis.Chart(this.canvas.getContext("2d"), {
        type: "line", data: { datasets }, options: this.options(xmin, xmax, legend) });
      return;
    }
    const c = this.chart;
    c.data.datasets = datasets;
    c.options.scales.x.min = xmin;
    c.options.scales.x.max = xmax;
    c.options.plugins.legend.display = legend;
    c.update("none");
  }

  resize() {
    const box = this.canvas.parentElement;
    if (this.chart && box.clientWidth > 0) this.chart.resize(box.clientWidth, box.clientHeight);
  }
}

// [{x, y}] of two parallel columns; null where there is no value (a gap).
export function points(times, values) {
  const out = new Array(times.length);
  for (let i = 0; i < times.length; i++) out[i] = { x: times[i], y: values[i] ?? null };
  return out;
}

export function line(label, data, color, options = {}) {
  return { label, data, borderColor: color, backgroundColor: color, borderWidth: 1.5, ...options };
}

// A line per member in `members` (cached rings: {id, time, <field>, ...}),
// stragglers thick and red, the others thin in the palette's colours.
export function memberLines(members, field, stragglers, scale = 1) {
  const lines = [];
  members.forEach((m, i) => {
    if (!m[field] || !m[field].some((v) => v !== null)) return;
    const values = scale === 1 ? m[field] : m[field].map((v) => (v === null ? null : v * scale));
    const slow = stragglers.has(m.id);
    lines.push(line(slow ? m.id + " (straggler)" : m.id, points(m.time, values), slow ? STRAGGLER : PALETTE[i % PALETTE.length],
                    { borderWidth: slow ? 3 : 1.5, order: slow ? 0 : 1 }));
  });
  return lines;
}

// The job's percentile lines from its series: median, 90th, slowest.
export function percentileLines(series) {
  return [
    line("median", points(series.time, series.step_time_p50), "#1f77b4", { borderWidth: 2 }),
    line("90th percentile", points(series.time, series.step_time_p90), "#ff7f0e", { borderDash: [6, 3] }),
    line("slowest", points(series.time, series.step_time_max), "#7f7f7f", { borderDash: [2, 2] }),
  ];
}
