// GET /: a self-contained status page. Its script polls the JSON API once a
// second; a token, when the coordinator needs one, goes in the URL
// fragment (http://host:port/#token=SECRET), which browsers never send.
#include "coordinator/server/server.hpp"

namespace cohort {

std::string_view Coordinator::Impl::status_page() {
    return R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>cohort coordinator</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; margin-top: .5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f2f2f2; }
.active { color: #070; } .waiting { color: #a60; } .failed, .timed_out { color: #b00; } .stale, .left { color: #777; }
#status { color: #777; }
</style>
</head>
<body>
<h1>cohort coordinator</h1>
<div id="status">loading&hellip;</div>
<div id="jobs"></div>
<script>
"use strict";
const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { "Authorization": "Bearer " + token } : {};

async function fetchJson(path) {
  const response = await fetch(path, { headers, cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.detail || body.error || response.statusText);
  return body;
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
}

function renderJob(job) {
  const section = document.createElement("section");
  section.className = "job";
  section.dataset.job = job.name;
  const title = document.createElement("h2");
  title.textContent = "job " + job.name;
  section.appendChild(title);
  const summary = document.createElement("div");
  summary.className = "summary";
  let text = "phase " + job.phase + ", generation " + job.generation + ", world size " + job.world_size;
  if (job.round && job.round.open) text += "; round open: " + job.round.reason;
  if (job.shards) {
    const done = job.shards.epochs.reduce((n, e) => n + e.done, 0);
    const total = job.shards.epochs.reduce((n, e) => n + e.total, 0);
    text += "; shards done " + done + " of " + total;
  }
  summary.textContent = text;
  section.appendChild(summary);
  const table = document.createElement("table");
  table.className = "members";
  const head = table.createTHead().insertRow();
  for (const name of ["rank", "member", "host", "state", "last heartbeat", "step"]) {
    const th = document.createElement("th");
    th.textContent = name;
    head.appendChild(th);
  }
  const members = job.members.slice().sort((a, b) =>
    (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.id.localeCompare(b.id));
  const tbody = table.createTBody();
  for (const m of members) {
    const row = tbody.insertRow();
    row.dataset.member = m.id;
    cell(row, m.rank);
    cell(row, m.id);
    cell(row, m.host);
    cell(row, m.state + (m.reason ? " (" + m.reason + ")" : ""), m.state);
    cell(row, m.last_heartbeat_age.toFixed(1) + " s ago");
    cell(row, m.step);
  }
  section.appendChild(table);
  return section;
}

async function refresh() {
  try {
    const list = await fetchJson("/v1/jobs");
    const jobs = await Promise.all(list.jobs.map(j => fetchJson("/v1/jobs/" + encodeURIComponent(j.name))));
    const container = document.getElementById("jobs");
    container.replaceChildren(...jobs.map(renderJob));
    document.getElementById("status").textContent =
      jobs.length + " job(s); updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("status").textContent = "cannot reach the coordinator: " + e.message;
  }
}

refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
)html";
}

}  // namespace cohort
