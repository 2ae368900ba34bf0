// The parts of a job's panel that are words and bars: the health verdict
// (with the hang diagnosis), epoch progress and the shard bars.
import * as fmt from "./format.js";

function nodeNames(nodes, limit = 5) {
  const named = nodes.slice(0, limit).map((n) => `${n.member} (rank ${n.rank})`);
  return named.join(", ") + (nodes.length > limit ? ` and ${nodes.length - limit} more` : "");
}

// {level: good|info|warn|bad, headline, text, evidence[]} for a job view.
export function verdict(v, now) {
  const h = v.health ?? {};
  const nodes = h.nodes ?? [];
  if (h.hung) {
    const d = h.diagnosis;
    return { level: "bad", headline: "Hung.",
             text: d?.summary ?? `${h.hung_nodes} members stopped making progress.`, evidence: d?.evidence ?? [] };
  }
  const stalled = nodes.filter((n) => n.hung);
  if (stalled.length) {
    const d = stalled[0].diagnosis;
    return { level: "bad", headline: `${stalled.length} member(s) stalled:`,
             text: nodeNames(stalled) + ` made no step for ${fmt.seconds(stalled[0].stalled_for)}.` + (d ? " " + d.summary : ""),
             evidence: d?.evidence ?? [] };
  }
  const slow = nodes.filter((n) => n.straggler);
  if (slow.length) {
    const parts = slow.slice(0, 5).map((n) => `${n.member} (rank ${n.rank}) at ${fmt.score(n.relative_score)} the median's speed` +
      (n.slow_since !== undefined ? `, slow for ${fmt.seconds(now - n.slow_since)}` : ""));
    return { level: "warn", headline: `${slow.length} straggler(s):`,
             text: parts.join("; ") + (slow.length > 5 ? `; and ${slow.length - 5} more` : "") + ".", evidence: [] };
  }
  const waiting = v.members_by_state.waiting;
  if (v.phase === "forming") {
    return { level: "info", headline: "Forming:", evidence: [],
             text: `waiting for members to join (${waiting} waiting; the job needs ${v.settings.min_nodes}).` };
  }
  if (v.phase === "rendezvous") {
    return { level: "warn", headline: "Rendezvous:", evidence: [],
             text: `a new round opened ${fmt.ago(now - v.round.opened_at)} because ${v.round.reason}; ${waiting} member(s) back so far.` };
  }
  if (v.shards && v.shards.finished) {
    return { level: "good", headline: "Finished:", text: "every shard of every epoch is done.", evidence: [] };
  }
  const judged = nodes.filter((n) => n.relative_score !== undefined).length;
  return { level: "good", headline: "Healthy:", evidence: [],
           text: `${v.members_by_state.active} active member(s) stepping, no straggler` +
                 (judged ? "" : " (too few steps to judge yet)") + ", no hang." };
}

// {fraction, text} through all epochs, or null without a dataset.
export function epochProgress(shards) {
  if (!shards || !shards.epochs.length) return null;
  const total = shards.epochs.reduce((n, e) => n + e.total, 0);
  const done = shards.epochs.reduce((n, e) => n + e.done, 0);
  const current = shards.epochs.find((e) => e.done < e.total) ?? shards.epochs[shards.epochs.length - 1];
  const fraction = total ? done / total : 0;
  return { fraction, text: `epoch ${current.epoch + 1} of ${shards.epochs.length}, ${(100 * fraction).toFixed(0)} % of shards done` };
}

// A bar per epoch (the last 12): done, leased and to do.
export function shardBars(shards) {
  const box = document.createElement("div");
  box.className = "shard-bars";
  if (!shards) {
    box.textContent = "No dataset registered.";
    return box;
  }
  const epochs = shards.epochs.slice(-12);
  const rows = epochs.map((e) => {
    const pct = (n) => (e.total ? (100 * n) / e.total : 0).toFixed(2);
    return `<div class="epoch" data-epoch="${e.epoch}"><span class="label">epoch ${e.epoch + 1}</span>` +
      `<span class="bar"><span class="done" style="width:${pct(e.done)}%"></span>` +
      `<span class="leased" style="width:${pct(e.leased)}%"></span><span class="todo" style="width:${pct(e.todo)}%"></span></span>` +
      `<span class="numbers">${fmt.count(e.done)} done, ${fmt.count(e.leased)} leased, ${fmt.count(e.todo)} to do of ${fmt.count(e.total)}</span></div>`;
  });
  box.innerHTML = rows.join("") +
    `<div class="shard-totals">${fmt.count(shards.granted)} leases granted, ${fmt.count(shards.requeued)} requeued` +
    ` (taken back from members that failed or overran)</div>`;
  return box;
}
