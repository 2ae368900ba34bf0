// Numbers as people read them: 5.0 s, 1.2 GiB, 3 min ago, 1,234/s.

export function seconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "";
  const a = Math.abs(s);
  if (a === 0) return "0 s";
  if (a < 0.001) return (s * 1e6).toFixed(0) + " µs";
  if (a < 1) return (s * 1000).toFixed(a < 0.01 ? 1 : 0) + " ms";
  if (a < 60) return s.toFixed(a < 10 ? 1 : 0) + " s";
  if (a < 3600) return (s / 60).toFixed(a < 600 ? 1 : 0) + " min";
  if (a < 86400) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

export function ago(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "";
  if (s < 1) return "just now";
  if (s < 60) return Math.floor(s) + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return Math.floor(s / 86400) + " d ago";
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

export function bytes(b) {
  if (b === null || b === undefined || !Number.isFinite(b)) return "";
  let i = 0;
  while (Math.abs(b) >= 1024 && i < UNITS.length - 1) {
    b /= 1024;
    i++;
  }
  return (i === 0 ? b.toFixed(0) : b.toFixed(1)) + " " + UNITS[i];
}

export function count(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return "";
  return Math.round(n).toLocaleString("en-US");
}

export function rate(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return "";
  if (n === 0) return "0/s";
  if (Math.abs(n) >= 100) return count(n) + "/s";
  return n.toFixed(Math.abs(n) >= 10 ? 1 : 2) + "/s";
}

export function percent(p) {
  if (p === null || p === undefined || !Number.isFinite(p)) return "";
  return p.toFixed(0) + " %";
}

export function score(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "";
  return x.toFixed(2) + "×";
}

// A clock time for chart axes: 14:03:20.
export function clock(unixSeconds) {
  const d = new Date(unixSeconds * 1000);
  const two = (n) => String(n).padStart(2, "0");
  return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
}

// p in [0, 1] of a list of numbers (nulls left out); null for none.
export function quantile(values, p) {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return null;
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil(p * v.length) - 1))];
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function html(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);
}
