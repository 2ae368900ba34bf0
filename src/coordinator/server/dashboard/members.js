// A job's members as a table: sortable (click a heading, again to reverse)
// and filterable (matches id, host, state and reason), in human units, a
// page of PAGE rows at a time: a table of a thousand rows costs the
// browser hundreds of milliseconds to lay out on every refresh.
import * as fmt from "./format.js";

export const PAGE = 100;

const COLUMNS = [
  { key: "rank", title: "rank", value: (m) => m.rank ?? null, text: (m) => m.rank ?? "" },
  { key: "id", title: "member", value: (m) => m.id, text: (m) => m.id },
  { key: "host", title: "host", value: (m) => m.host, text: (m) => m.host },
  { key: "state", title: "state", value: (m) => m.state, text: stateText },
  { key: "step", title: "step", value: (m) => m.step ?? null, text: (m) => fmt.count(m.step) },
  { key: "step_time", title: "step time", value: (m) => m.step_time ?? null, text: (m) => fmt.seconds(m.step_time) },
  { key: "samples_per_sec", title: "samples/s", value: (m) => m.samples_per_sec ?? null, text: (m) => fmt.rate(m.samples_per_sec) },
  { key: "score", title: "straggler score", value: (m) => m.straggler_score ?? null, text: (m) => fmt.score(m.straggler_score) },
  { key: "gpu_memory", title: "GPU memory", value: (m) => m.gpu?.used ?? null,
    text: (m) => (m.gpu && m.gpu.used !== null ? fmt.bytes(m.gpu.used) + " of " + fmt.bytes(m.gpu.total) : "") },
  { key: "gpu_util", title: "GPU util.", value: (m) => m.gpu?.util ?? null, text: (m) => fmt.percent(m.gpu?.util) },
  { key: "gpu_temp", title: "GPU temp.", value: (m) => m.gpu?.temp ?? null,
    text: (m) => (Number.isFinite(m.gpu?.temp) ? m.gpu.temp.toFixed(0) + " °C" : "") },
  { key: "heartbeat", title: "last heartbeat", value: (m) => m.last_heartbeat_age, text: (m) => fmt.ago(m.last_heartbeat_age) },
];

function stateText(m) {
  let s = m.state;
  if (m.hung) s += ", hung";
  else if (m.straggler) s += ", straggler";
  if (m.reason) s += " (" + m.reason.replace(/(\d+\.\d{2,}) s\b/g, (_, n) => fmt.seconds(Number(n))) + ")";
  return s;
}

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;  // missing values last either way
  if (b === null || b === undefined) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

export class MembersTable {
  constructor(container) {
    this.sort = { key: "rank", descending: false };
    this.filter = "";
    this.members = [];
    const bar = document.createElement("div");
    bar.className = "members-bar";
    this.input = document.createElement("input");
    this.input.type = "search";
    this.input.placeholder = "filter members: id, host, state…";
    this.input.className = "member-filter";
    this.input.addEventListener("input", () => {
      this.filter = this.input.value.trim().toLowerCase();
      this.page = 0;
      this.draw();
    });
    this.note = document.createElement("span");
    this.note.className = "members-note";
    this.page = 0;
    const button = (text, step) => {
      const b = document.createElement("button");
      b.textContent = text;
      b.addEventListener("click", () => {
        this.page += step;
        this.draw();
      });
      return b;
    };
    this.previous = button("◀ previous", -1);
    this.next = button("next ▶", +1);
    this.previous.className = "page-previous";
    this.next.className = "page-next";
    bar.append(this.input, this.previous, this.next, this.note);
    this.table = document.createElement("table");
    this.table.className = "members";
    const head = this.table.createTHead().insertRow();
    for (const c of COLUMNS) {
      const th = document.createElement("th");
      th.textContent = c.title;
      th.dataset.key = c.key;
      th.className = c.key;
      th.addEventListener("click", () => {
        this.sort = { key: c.key, descending: this.sort.key === c.key ? !this.sort.descending : false };
        this.draw();
      });
      head.appendChild(th);
    }
    this.body = this.table.createTBody();
    container.append(bar, this.table);
  }

  update(members) {
    this.members = members;
    this.draw();
  }

  draw() {
    const column = COLUMNS.find((c) => c.key === this.sort.key);
    let rows = this.members;
    if (this.filter) {
      rows = rows.filter((m) => (m.id + " " + m.host + " " + stateText(m)).toLowerCase().includes(this.filter));
    }
    const sign = this.sort.descending ? -1 : 1;
    rows = rows.slice().sort((a, b) => {
      const va = column.value(a), vb = column.value(b);
      if (va === null || va === undefined || vb === null || vb === undefined) return compare(va, vb);
      return sign * compare(va, vb) || compare(a.id, b.id);
    });
    for (const th of this.table.tHead.rows[0].cells) {
      th.className = th.dataset.key + (th.dataset.key === this.sort.key ? (this.sort.descending ? " sorted-down" : " sorted-up") : "");
    }
    // GPU columns only when some member reports GPUs.
    this.table.classList.toggle("no-gpu", !this.members.some((m) => m.gpu));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    this.page = Math.min(Math.max(this.page, 0), pages - 1);
    const from = this.page * PAGE;
    const shown = rows.slice(from, from + PAGE);
    this.previous.hidden = this.next.hidden = pages === 1;
    this.previous.disabled = this.page === 0;
    this.next.disabled = this.page === pages - 1;
    const parts = [];
    for (const m of shown) {
      const cls = [m.state, m.straggler ? "straggler" : "", m.hung ? "hung" : ""].join(" ").trim();
      parts.push(`<tr data-member="${fmt.html(m.id)}" class="${cls}">`);
      for (const c of COLUMNS) parts.push(`<td class="${c.key}">${fmt.html(c.text(m))}</td>`);
      parts.push("</tr>");
    }
    this.body.innerHTML = parts.join("");
    const matching = rows.length, total = this.members.length;
    this.note.textContent = (matching === total ? `${fmt.count(total)} members` : `${fmt.count(matching)} of ${fmt.count(total)} members match`) +
      (shown.length < matching ? `; rows ${fmt.count(from + 1)} to ${fmt.count(from + shown.length)}` : "");
  }
}
