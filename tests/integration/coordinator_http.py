"""Plain-HTTP helpers shared by the coordinator's integration tests
(coordinator_restart.py, coordinator_members.py and the member processes
of coordinator_member_worker.py). Standard library only (urllib).
"""

import json
import socket
import urllib.error
import urllib.request


class CaseFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CaseFailed(message)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url, method, path, body=None, raw=None, timeout=10, token=None, headers=None):
    """(status, parsed JSON or raw bytes). `raw` bytes go out as they are
    (application/octet-stream unless `headers` says otherwise); `token` adds
    "Authorization: Bearer TOKEN"."""
    data = None
    all_headers = {}
    if body is not None:
        data = json.dumps(body).encode()
        all_headers["Content-Type"] = "application/json"
    elif raw is not None:
        data = raw
        all_headers["Content-Type"] = "application/octet-stream"
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    all_headers.update(headers or {})
    req = urllib.request.Request(url + path, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, payload, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    if "json" in ctype:
        return status, json.loads(payload)
    return status, payload


def ok(url, method, path, body=None, raw=None, expect=(200, 201), token=None):
    status, answer = request(url, method, path, body, raw, token=token)
    check(status in expect, f"{method} {path}: {status} {answer}")
    return answer
