// A job's rounds on a time line (SVG, drawn here: a few bars and markers
// need no chart library): amber while a round is open, green while the
// world it formed runs; members joining (green), failing (a red cross) and
// leaving (grey) marked below; and the rounds as a table, newest first.
import * as fmt from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 1000, LANE = 26, TOP = 6, AXIS = 18;
const MARKS = { joined: "#2ca02c", failed: "#d62728", left: "#7f7f7f", timed_out: "#bcbd22", resumed: "#1f77b4" };

function el(name, attrs, parent, title) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (title) {
    const t = document.createElementNS(SVG, "title");
    t.textContent = title;
    e.appendChild(t);
  }
  if (parent) parent.appendChild(e);
  return e;
}

function names(n) {
  if (!n || n.count === 0) return "";
  const more = n.count - n.ids.length;
  return n.ids.join(", ") + (more > 0 ? " and " + more + " more" : "");
}

export function renderTimeline(container, history, now) {
  const rounds = history.rounds;
  const events = history.events;
  const first = Math.min(rounds.length ? rounds[0].opened_at : now, events.length ? events[0].time : now);
  const start = Math.max(first, now - history.limits.job_points * history.limits.interval);
  const span = Math.max(now - start, 1);
  const x = (t) => ((Math.max(t, start) - start) / span) * WIDTH;
  const height = TOP + 2 * LANE + AXIS;

  const svg = el("svg", { viewBox: `0 0 ${WIDTH} ${height}`, class: "timeline", preserveAspectRatio: "none",
                          role: "img", "aria-label": "rounds and member events over time" });
  rounds.forEach((r, i) => {
    const closed = r.closed_at ?? now;
    const end = i + 1 < rounds.length ? rounds[i + 1].opened_at : now;
    const what = `round for generation ${r.generation || "(open)"}: opened ${fmt.clock(r.opened_at)}` +
      (r.closed_at !== undefined ? `, closed after ${fmt.seconds(r.closed_at - r.opened_at)}` : ", open") + ` (${r.reason})`;
    el("rect", { x: x(r.opened_at), y: TOP, width: Math.max(x(closed) - x(r.opened_at), 2), height: LANE - 4,
                 class: "round-open", "data-generation": r.generation }, svg, what);
    if (r.closed_at !== undefined && end > closed) {
      const g = el("g", { class: "world", "data-generation": r.generation }, svg);
      el("rect", { x: x(closed), y: TOP, width: Math.max(x(end) - x(closed), 1), height: LANE - 4, class: "world-run" }, g,
         `generation ${r.generation}: ${r.world_size} members, from ${fmt.clock(closed)}`);
      if (x(end) - x(closed) > 60) {
        el("text", { x: x(closed) + 4, y: TOP + LANE / 2 + 2, class: "world-label" }, g).textContent =
          `gen ${r.generation} · ${r.world_size}`;
      }
    }
  });
  const y = TOP + LANE + LANE / 2;
  for (const e of events) {
    const cx = x(e.time);
    const title = `${e.member ?? "coordinator"} ${e.kind.replace("_", " ")} at ${fmt.clock(e.time)}` + (e.reason ? `: ${e.reason}` : "");
    const attrs = { class: "event " + e.kind, "data-kind": e.kind, "data-member": e.member ?? "" };
    if (e.kind === "failed") {
      const g = el("g", attrs, svg, title);
      el("path", { d: `M${cx - 7} ${y - 7} L${cx + 7} ${y + 7} M${cx - 7} ${y + 7} L${cx + 7} ${y - 7}`,
                   stroke: MARKS.failed, "stroke-width": 3 }, g);
      el("line", { x1: cx, y1: TOP, x2: cx, y2: y + LANE / 2, stroke: MARKS.failed, "stroke-dasharray": "3 2" }, g);
    } else {
      el("circle", { ...attrs, cx, cy: y, r: 4, fill: MARKS[e.kind] ?? "#333" }, svg, title);
    }
  }
  for (let i = 0; i <= 4; i++) {
    const t = start + (span * i) / 4;
    el("text", { x: Math.min(Math.max((WIDTH * i) / 4, 30), WIDTH - 30), y: height - 4, class: "axis",
                 "text-anchor": "middle" }, svg).textContent = fmt.clock(t);
  }

  const table = document.createElement("table");
  table.className = "rounds";
  table.innerHTML = "<thead><tr><th>generation</th><th>opened</th><th>took</th><th>why</th><th>size</th>" +
    "<th>joined</th><th>failed</th><th>left</th></tr></thead>";
  const body = table.createTBody();
  for (const r of rounds.slice().reverse().slice(0, 12)) {
    const row = body.insertRow();
    row.dataset.generation = r.generation;
    if (r.open) row.className = "open";
    if (r.failed.count > 0) row.classList.add("with-failure");
    const took = r.closed_at !== undefined ? fmt.seconds(r.closed_at - r.opened_at) : "open for " + fmt.seconds(now - r.opened_at);
    for (const text of [r.open ? "next" : r.generation, fmt.ago(now - r.opened_at), took, r.reason,
                        r.open ? "" : r.world_size, names(r.joined), names(r.failed), names(r.left)]) {
      row.insertCell().textContent = text;
    }
    row.cells[3].className = "why";
    row.cells[6].className = "failed";
  }
  container.replaceChildren(svg, table);
}
