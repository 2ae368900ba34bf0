#!/usr/bin/env python3
"""The API-server double speaks the real protocol: Debian's kubectl, with a
kubeconfig pointing at it, lists pods, watches them (and sees an event),
deletes one and reports a missing one as NotFound; raw HTTP checks 409 on a
second create, a watch's BOOKMARK, and the ERROR event with a 410 Status
when the resourceVersion is older than the double's history.

usage: k8s_double_kubectl.py DOUBLE_BINARY
"""
import http.client
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

# Debian's kubectl (kubernetes-client): where another package owns
# /usr/bin/kubectl, scripts/deps.sh puts Debian's binary here instead.
DEBIAN_KUBECTL = "/usr/local/share/cohort/kubernetes-client/kubectl"
KUBECTL = DEBIAN_KUBECTL if os.access(DEBIAN_KUBECTL, os.X_OK) else shutil.which("kubectl")


def start_double(binary, *args):
    proc = subprocess.Popen([binary, "--port", "0", *args], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "listening on URL", printed once ready
    if not line.startswith("listening on "):
        proc.kill()
        sys.exit(f"the double did not start: {line!r}")
    return proc, line.split()[-1]


def request(url, method, path, body=None, content_type="application/json"):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def pod(name, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "worker", "image": "registry.invalid/trainer:1"}]}}


def watch_lines(url, path, count, timeout=10):
    """The first `count` event lines of a watch stream."""
    host = url.split("//")[1]
    conn = http.client.HTTPConnection(host, timeout=timeout)
    conn.request("GET", path)
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    assert resp.getheader("Transfer-Encoding") == "chunked", resp.getheaders()
    lines = []
    deadline = time.monotonic() + timeout
    while len(lines) < count and time.monotonic() < deadline:
        line = resp.readline()
        if not line:
            break
        lines.append(json.loads(line))
    conn.close()
    return lines


def kubectl(home, *args, timeout=20):
    return subprocess.run([KUBECTL, "--kubeconfig", os.path.join(home, "kubeconfig"), *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "HOME": home})


def main():
    binary = sys.argv[1]
    if KUBECTL is None:
        sys.exit("kubectl is not installed: scripts/deps.sh installs Debian's kubernetes-client")
    home = tempfile.mkdtemp(prefix="k8s-double-")
    proc, url = start_double(binary, "--bookmark-ms", "200")
    try:
        with open(os.path.join(home, "kubeconfig"), "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: double
  cluster: {{server: "{url}"}}
contexts:
- name: double
  context: {{cluster: double, namespace: default, user: tester}}
current-context: double
users:
- name: tester
  user: {{token: test-token}}
""")
        status, body = request(url, "POST", "/api/v1/namespaces/default/pods", pod("trainer-0", {"app": "cohort"}))
        assert status == 201, (status, body)
        created = json.loads(body)
        for key in ("uid", "resourceVersion", "creationTimestamp", "namespace"):
            assert key in created["metadata"], created
        assert created["status"]["phase"] == "Pending", created
        status, body = request(url, "POST", "/api/v1/namespaces/default/pods", pod("trainer-0"))
        assert status == 409 and json.loads(body)["reason"] == "AlreadyExists", (status, body)
        request(url, "POST", "/api/v1/namespaces/default/pods", pod("trainer-1", {"app": "other"}))

        # kubectl get pods: discovery, then a Table.
        r = kubectl(home, "get", "pods")
        assert r.returncode == 0, r.stderr
        rows = r.stdout.splitlines()
        assert rows[0].split()[:3] == ["NAME", "READY", "STATUS"], r.stdout
        assert any(l.split()[:3] == ["trainer-0", "0/1", "Pending"] for l in rows), r.stdout
        r = kubectl(home, "get", "pods", "-l", "app=cohort", "-o", "json")
        assert r.returncode == 0, r.stderr
        names = [p["metadata"]["name"] for p in json.loads(r.stdout)["items"]]
        assert names == ["trainer-0"], names

        # kubectl get pods --watch sees the pod's OOMKilled.
        w = subprocess.Popen([KUBECTL, "--kubeconfig", os.path.join(home, "kubeconfig"), "get", "pods", "--watch"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "HOME": home})
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in w.stdout], daemon=True).start()
        seen, deadline, poked = [], time.monotonic() + 20, False
        try:
            while time.monotonic() < deadline and not any("OOMKilled" in l for l in seen):
                try:
                    seen.append(lines.get(timeout=0.2))
                except queue.Empty:
                    pass
                if len(seen) >= 3 and not poked:  # header and both pods listed: the watch is open
                    poked = True
                    time.sleep(0.3)
                    assert request(url, "POST", "/_double/pods/trainer-0/oom_killed")[0] == 200
        finally:
            w.kill()
            w.wait()
        assert any(l.split()[:3] == ["trainer-0", "0/1", "OOMKilled"] for l in seen), seen

        # kubectl delete pod, and a missing one.
        r = kubectl(home, "delete", "pod", "trainer-0")
        assert r.returncode == 0 and 'pod "trainer-0" deleted' in r.stdout, (r.stdout, r.stderr)
        assert request(url, "GET", "/api/v1/namespaces/default/pods/trainer-0")[0] == 404
        r = kubectl(home, "delete", "pod", "trainer-0")
        assert r.returncode != 0 and 'pods "trainer-0" not found' in r.stderr, (r.stdout, r.stderr)

        # The watch protocol by hand: bookmarks, then 410 from a compacted history.
        rv = json.loads(request(url, "GET", "/api/v1/namespaces/default/pods")[1])["metadata"]["resourceVersion"]
        events = watch_lines(url, f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}"
                                  "&allowWatchBookmarks=true", 1)
        assert events and events[0]["type"] == "BOOKMARK", events
        assert int(events[0]["object"]["metadata"]["resourceVersion"]) >= int(rv), events
        request(url, "POST", "/_double/compact")
        events = watch_lines(url, "/api/v1/namespaces/default/pods?watch=true&resourceVersion=1", 1)
        assert events and events[0]["type"] == "ERROR", events
        assert events[0]["object"]["kind"] == "Status" and events[0]["object"]["code"] == 410, events
        print("kubectl get, get --watch and delete work against the double; 409, bookmarks and 410 as the API")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
