// The coordinator's dashboard: a job list, then per job its health in
// words, a timeline of rounds, shard progress, step time, samples/s,
// straggler scores and GPU charts over time, and its members. It polls the
// JSON API (about once a second; less often for very large jobs) and asks
// for the history since its last answer, so an update carries only what
// is new. Jobs past LINE_LIMIT members are drawn as percentiles and the
// slowest few members rather than a line each.
//
// window.cohortDashboard exposes the state for tests and benchmarks:
// ready, refreshes, error, timings ({fetch_ms, render_ms, members, parts}
// per refresh; parts: words_ms, charts_ms, table_ms, layout_ms) and
// refresh(). Open with #refresh=0 to stop polling.
import { getJson, jobPath } from "./api.js";
import * as fmt from "./format.js";
import { TimeChart, memberLines, percentileLines, points, line } from "./charts.js";
import { renderTimeline } from "./timeline.js";
import { MembersTable } from "./members.js";
import { verdict, shardBars, epochProgress } from "./panels.js";

export const LINE_LIMIT = 64;
const SLOWEST = 8;       // members drawn beside the percentiles of a large job
const WINDOW = 600;      // seconds of the charts' x axis
const MEMBER_AGE = 1800; // a member's cached points go once it is silent this long

const params = new URLSearchParams(location.hash.slice(1));
const dashboard = (window.cohortDashboard = { ready: false, refreshes: 0, error: null, timings: [], refresh });
const panels = new Map();

// Appends the points of `src` (columns, time first) newer than `target`'s
// newest, and keeps at most `limit`.
function appendColumns(target, src, limit) {
  const last = target.time.length ? target.time[target.time.length - 1] : -Infinity;
  let start = 0;
  while (start < src.time.length && src.time[start] <= last) start++;
  const before = target.time.length;
  for (const [key, column] of Object.entries(src)) {
    if (!Array.isArray(column)) continue;
    if (!target[key]) target[key] = new Array(before).fill(null);
    for (let i = start; i < column.length; i++) target[key].push(column[i]);
  }
  const n = target.time.length;
  for (const column of Object.values(target)) {
    if (Array.isArray(column)) {
      while (column.length < n) column.push(null);
      if (n > limit) column.splice(0, n - limit);
    }
  }
}

function last(column) {
  return column && column.length ? column[column.length - 1] : null;
}

class JobPanel {
  constructor(name) {
    this.name = name;
    this.since = 0;
    this.series = { time: [] };
    this.members = new Map();
    this.shown = [];
    this.section = document.createElement("section");
    this.section.className = "job";
    this.section.dataset.job = name;
    this.section.id = "job-" + name;
    this.section.innerHTML = `<h2>job ${fmt.html(name)}</h2><div class="summary"></div><div class="verdict"></div>
      <h3>Rounds</h3><div class="timeline-box"></div>
      <h3>Shards</h3><div class="shards"></div>
      <h3>Training</h3><div class="charts">
        <div class="chart"><canvas data-chart="step_time"></canvas></div>
        <div class="chart"><canvas data-chart="samples_per_sec"></canvas></div>
        <div class="chart"><canvas data-chart="throughput"></canvas></div>
        <div class="chart"><canvas data-chart="score"></canvas></div></div>
      <div class="gpu" hidden><h3>GPUs</h3><div class="charts">
        <div class="chart"><canvas data-chart="gpu_memory"></canvas></div>
        <div class="chart"><canvas data-chart="gpu_utilization"></canvas></div>
        <div class="chart"><canvas data-chart="gpu_temperature"></canvas></div></div></div>
      <h3>Members</h3><div class="members-box"></div>`;
    this.part = (cls) => this.section.querySelector("." + cls);
    this.table = new MembersTable(this.part("members-box"));
    this.charts = null;
  }

  async fetch() {
    const view = await getJson(jobPath(this.name));
    const aggregate = view.members.length > LINE_LIMIT;
    const query = `?since=${this.since}` + (aggregate ? `&members=slowest&limit=${SLOWEST}` : "");
    const history = await getJson(jobPath(this.name, "/history" + query));
    this.view = view;
    this.aggregate = aggregate;
    this.merge(history);
  }

  merge(h) {
    this.now = h.now;
    this.since = h.now;
    this.limits = h.limits;
    appendColumns(this.series, h.series, h.limits.job_points);
    for (const m of h.members) {
      if (!this.members.has(m.id)) this.members.set(m.id, { id: m.id, time: [] });
      appendColumns(this.members.get(m.id), m, h.limits.member_points);
    }
    for (const [id, m] of this.members) {
      if (!m.time.length || last(m.time) < h.now - MEMBER_AGE) this.members.delete(id);
    }
    this.shown = this.aggregate ? h.members.map((m) => this.members.get(m.id)).filter(Boolean) : [...this.members.values()];
    this.rounds = h.rounds;
    this.events = (this.events ?? []).concat(h.events).slice(-h.limits.events);
  }

  makeCharts() {
    const make = (key, title, format) => new TimeChart(this.section.querySelector(`canvas[data-chart="${key}"]`), { title, format });
    this.charts = {
      step_time: make("step_time", "step time", fmt.seconds),
      samples_per_sec: make("samples_per_sec", "samples/s per member", fmt.rate),
      throughput: make("throughput", "samples/s, whole job", fmt.rate),
      score: make("score", "straggler score (1 = the median's speed)", fmt.score),
      gpu_memory: make("gpu_memory", "GPU memory used", fmt.bytes),
      gpu_utilization: make("gpu_utilization", "GPU utilisation", fmt.percent),
      gpu_temperature: make("gpu_temperature", "GPU temperature", (v) => (Number.isFinite(v) ? v.toFixed(0) + " °C" : "")),
    };
  }

  // Returns how long each part took (ms), for window.cohortDashboard.timings.
  render() {
    const t0 = performance.now();
    const v = this.view;
    if (!this.charts) this.makeCharts();
    const active = v.members_by_state.active;
    const progress = epochProgress(v.shards);
    this.part("summary").textContent = `phase ${v.phase}, generation ${v.generation}, world size ${v.world_size}` +
      `; ${fmt.count(active)} active, ${fmt.count(v.members_by_state.waiting)} waiting, ${fmt.count(v.members.length)} members in all` +
      (progress ? `; ${progress.text}` : "") + (v.round.open ? `; round open: ${v.round.reason}` : "");
    const said = verdict(v, this.now);
    const box = this.part("verdict");
    box.className = "verdict " + said.level;
    box.innerHTML = `<strong>${fmt.html(said.headline)}</strong> ${fmt.html(said.text)}` +
      (said.evidence.length ? "<ul>" + said.evidence.map((e) => `<li>${fmt.html(e)}</li>`).join("") + "</ul>" : "");
    renderTimeline(this.part("timeline-box"), { rounds: this.rounds, events: this.events, limits: this.limits }, this.now);
    this.part("shards").replaceChildren(shardBars(v.shards));
    const t1 = performance.now();

    const stragglers = new Set(v.health?.stragglers ?? []);
    // The last WINDOW seconds, or since the first point of a younger job.
    const first = Math.min(this.series.time[0] ?? this.now, ...this.shown.map((m) => m.time[0] ?? this.now));
    const xmin = Math.min(Math.max(first, this.now - WINDOW), this.now - 30), xmax = this.now;
    const s = this.series;
    const c = this.charts;
    c.step_time.update((this.aggregate ? percentileLines(s) : []).concat(memberLines(this.shown, "step_time", stragglers)), xmin, xmax);
    c.samples_per_sec.update(memberLines(this.shown, "samples_per_sec", stragglers), xmin, xmax);
    c.throughput.update([line("all members", points(s.time, s.samples_per_sec), "#2ca02c", { borderWidth: 2 })], xmin, xmax);
    c.score.update(memberLines(this.shown, "score", stragglers), xmin, xmax);
    const gpu = this.shown.some((m) => m.gpu_memory_used || m.gpu_utilization || m.gpu_temperature);
    this.part("gpu").hidden = !gpu;
    if (gpu) {
      c.gpu_memory.update(memberLines(this.shown, "gpu_memory_used", stragglers), xmin, xmax);
      c.gpu_utilization.update(memberLines(this.shown, "gpu_utilization", stragglers), xmin, xmax);
      c.gpu_temperature.update(memberLines(this.shown, "gpu_temperature", stragglers), xmin, xmax);
    }

    for (const m of v.members) {
      const h = this.members.get(m.id);
      m.gpu = h && h.gpu_memory_used
        ? { used: last(h.gpu_memory_used), total: last(h.gpu_memory_total), util: last(h.gpu_utilization), temp: last(h.gpu_temperature) }
        : null;
    }
    const t2 = performance.now();
    this.table.update(v.members);
    return { words_ms: t1 - t0, charts_ms: t2 - t1, table_ms: performance.now() - t2 };
  }
}

function renderJobList() {
  const body = document.querySelector("#jobs tbody");
  const rows = [];
  for (const p of panels.values()) {
    const v = p.view;
    const progress = epochProgress(v.shards);
    rows.push(`<tr data-job="${fmt.html(v.name)}"><td><a href="#job-${fmt.html(v.name)}">${fmt.html(v.name)}</a></td>` +
      `<td class="phase ${v.phase}">${v.phase}</td><td>${v.generation}</td><td>${v.world_size}</td><td>${fmt.count(v.members.length)}</td>` +
      `<td>${progress ? `<progress max="1" value="${progress.fraction}"></progress> ${fmt.html(progress.text)}` : "no dataset"}</td></tr>`);
  }
  body.innerHTML = rows.join("") || `<tr><td colspan="6">no jobs yet</td></tr>`;
}

let running = null;

async function refreshOnce() {
  const status = document.getElementById("status");
  const started = performance.now();
  try {
    const list = await getJson("/v1/jobs");
    const names = new Set(list.jobs.map((j) => j.name));
    for (const [name, p] of panels) {
      if (!names.has(name)) {
        p.section.remove();
        panels.delete(name);
      }
    }
    for (const name of names) {
      if (!panels.has(name)) panels.set(name, new JobPanel(name));
    }
    await Promise.all([...panels.values()].map((p) => p.fetch()));
    const fetched = performance.now();
    const container = document.getElementById("job-panels");
    for (const p of panels.values()) {
      if (!p.section.isConnected) container.appendChild(p.section);
    }
    renderJobList();
    const parts = { words_ms: 0, charts_ms: 0, table_ms: 0 };
    for (const p of panels.values()) {
      for (const [k, ms] of Object.entries(p.render())) parts[k] += ms;
    }
    const laid = performance.now();
    void document.body.offsetHeight;  // layout now, so render_ms includes it
    const done = performance.now();
    parts.layout_ms = done - laid;
    const members = [...panels.values()].reduce((n, p) => n + p.view.members.length, 0);
    dashboard.timings.push({ fetch_ms: fetched - started, render_ms: done - fetched, members, parts });
    if (dashboard.timings.length > 200) dashboard.timings.shift();
    dashboard.members = members;
    dashboard.error = null;
    status.textContent = `${panels.size} job(s); updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    dashboard.error = e.message;
    status.textContent = "cannot reach the coordinator: " + e.message;
  }
  dashboard.refreshes++;
  dashboard.ready = true;
}

async function refresh() {
  if (!running) running = refreshOnce().finally(() => (running = null));
  return running;
}

function interval() {
  const n = dashboard.members ?? 0;
  return n <= 1000 ? 1000 : n <= 5000 ? 2000 : 5000;
}

async function loop() {
  await refresh();
  if (params.get("refresh") !== "0") setTimeout(loop, interval());
}

let resizing = 0;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => {
    for (const p of panels.values()) Object.values(p.charts ?? {}).forEach((c) => c.resize());
  }, 200);
});

loop();
