// The coordinator's JSON API, with the bearer token the page was opened
// with (http://host:port/#token=SECRET: a fragment, never sent by the browser).

const token = new URLSearchParams(location.hash.slice(1)).get("token");
const headers = token ? { Authorization: "Bearer " + token } : {};

export async function getJson(path) {
  const response = await fetch(path, { headers, cache: "no-store" });
  let body;
  try {
    body = await response.json();
  } catch (e) {
    throw new Error(path + ": " + response.status + " " + response.statusText + " (not JSON)");
  }
  if (!response.ok) throw new Error(body.detail || body.error || response.statusText);
  return body;
}

export function jobPath(job, rest = "") {
  return "/v1/jobs/" + encodeURIComponent(job) + rest;
}
