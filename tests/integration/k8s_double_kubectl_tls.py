#!/usr/bin/env python3
"""The API-server double over HTTPS with client certificates (mTLS), against
Debian's kubectl: with a kubeconfig holding certificate-authority-data,
client-certificate-data and client-key-data (as kubeadm and kind write
them), `kubectl get pods` lists a pod created over mTLS by Python's ssl; a
kubeconfig without the client certificate, and one with another CA, are
refused. Certificates come from the double's --make-pki (test_pki.hpp),
made here at run time.

usage: k8s_double_kubectl_tls.py DOUBLE_BINARY
"""
import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.request

DEBIAN_KUBECTL = "/usr/local/share/cohort/kubernetes-client/kubectl"
KUBECTL = DEBIAN_KUBECTL if os.access(DEBIAN_KUBECTL, os.X_OK) else shutil.which("kubectl")


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def kubeconfig(path, url, cluster, user):
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: double
  cluster:
    server: "{url}"
{cluster}
contexts:
- name: double
  context: {{cluster: double, namespace: default, user: tester}}
current-context: double
users:
- name: tester
  user:
{user}
""")
    return path


def kubectl(home, config, *args, timeout=30):
    return subprocess.run([KUBECTL, "--kubeconfig", config, *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HOME": home})


def main():
    binary = sys.argv[1]
    if KUBECTL is None:
        sys.exit("kubectl is not installed: scripts/deps.sh installs Debian's kubernetes-client")
    home = tempfile.mkdtemp(prefix="k8s-double-tls-")
    proc = None
    try:
        pki, other = os.path.join(home, "pki"), os.path.join(home, "other")
        for d in (pki, other):
            subprocess.run([binary, "--make-pki", d], check=True, timeout=30)
        proc = subprocess.Popen([binary, "--port", "0", "--tls-cert", f"{pki}/server.crt", "--tls-key",
                                 f"{pki}/server.key", "--client-ca", f"{pki}/ca.crt"],
                                stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        assert line.startswith("listening on https://127.0.0.1:"), line
        url = line.split()[-1]

        # A pod, created over mTLS by another client than kubectl.
        tls = ssl.create_default_context(cafile=f"{pki}/ca.crt")
        tls.load_cert_chain(f"{pki}/client.crt", f"{pki}/client.key")
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-0", "labels": {"app": "cohort"}},
                "spec": {"containers": [{"name": "worker", "image": "registry.invalid/trainer:1"}]}}
        req = urllib.request.Request(url + "/api/v1/namespaces/default/pods", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10, context=tls) as r:
            assert r.status == 201, r.status

        ca_data = f"    certificate-authority-data: {b64(f'{pki}/ca.crt')}"
        cert_data = (f"    client-certificate-data: {b64(f'{pki}/client.crt')}\n"
                     f"    client-key-data: {b64(f'{pki}/client.key')}")
        good = kubeconfig(os.path.join(home, "good"), url, ca_data, cert_data)
        r = kubectl(home, good, "get", "pods")
        assert r.returncode == 0, r.stderr
        rows = r.stdout.splitlines()
        assert rows[0].split()[:3] == ["NAME", "READY", "STATUS"], r.stdout
        assert any(l.split()[:3] == ["trainer-0", "0/1", "Pending"] for l in rows), r.stdout
        r = kubectl(home, good, "get", "pods", "-l", "app=cohort", "-o", "json")
        assert r.returncode == 0, r.stderr
        assert [p["metadata"]["name"] for p in json.loads(r.stdout)["items"]] == ["trainer-0"], r.stdout
        r = kubectl(home, good, "delete", "pod", "trainer-0", "--wait=false")
        assert r.returncode == 0, r.stderr

        # No client certificate: the handshake is refused (a token does not help under mTLS here).
        no_cert = kubeconfig(os.path.join(home, "nocert"), url, ca_data, "    token: test-token")
        r = kubectl(home, no_cert, "get", "pods", "--request-timeout=10s")
        assert r.returncode != 0, r.stdout
        assert "certificate required" in r.stderr or "bad certificate" in r.stderr, r.stderr

        # Another CA: kubectl does not trust the double.
        wrong_ca = kubeconfig(os.path.join(home, "wrongca"), url,
                              f"    certificate-authority-data: {b64(f'{other}/ca.crt')}", cert_data)
        r = kubectl(home, wrong_ca, "get", "pods", "--request-timeout=10s")
        assert r.returncode != 0, r.stdout
        assert "certificate signed by unknown authority" in r.stderr, r.stderr
        print("kubectl over HTTPS with client certificate data: get, get -l -o json, delete; "
              "refused without the client certificate and with another CA")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
