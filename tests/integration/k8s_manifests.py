#!/usr/bin/env python3
"""examples/kubernetes/ is what a user applies: `kubectl apply
--dry-run=client` accepts every manifest (kubectl needs an API server for
discovery even in a client dry run, so it talks to the API-server double),
and the worker pod template, given a name as cohort-run gives it, is a pod
kubectl accepts too. A manifest with a typo in a kind must fail the same
way, so the check can fail.

usage: k8s_manifests.py DOUBLE_BINARY EXAMPLES_KUBERNETES_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    double, examples = sys.argv[1], sys.argv[2]
    # Debian's kubectl, where scripts/deps.sh put it beside another one.
    debian_kubectl = "/usr/local/share/cohort/kubernetes-client/kubectl"
    kubectl = debian_kubectl if os.access(debian_kubectl, os.X_OK) else shutil.which("kubectl")
    if kubectl is None:
        sys.exit("kubectl is not installed: scripts/deps.sh installs Debian's kubernetes-client")
    home = tempfile.mkdtemp(prefix="k8s-manifests-")
    proc = subprocess.Popen([double, "--port", "0", "--namespace", "training"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        url = line.split()[-1]
        config = os.path.join(home, "kubeconfig")
        with open(config, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
current-context: d
clusters: [{{name: d, cluster: {{server: "{url}"}}}}]
contexts: [{{name: d, context: {{cluster: d, user: u, namespace: training}}}}]
users: [{{name: u, user: {{token: t}}}}]
""")

        def apply(path):
            return subprocess.run([kubectl, "--kubeconfig", config, "apply", "--dry-run=client", "--validate=false",
                                   "-f", path], capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "HOME": home})

        expected = {
            "rbac.yaml": ["serviceaccount/cohort-launcher created (dry run)", "role.rbac.authorization.k8s.io/"
                          "cohort-launcher created (dry run)", "rolebinding.rbac.authorization.k8s.io/cohort-launcher "
                          "created (dry run)"],
            "coordinator.yaml": ["deployment.apps/cohort-coordinator created (dry run)",
                                 "service/cohort-coordinator created (dry run)"],
        }
        for name, lines in expected.items():
            r = apply(os.path.join(examples, name))
            assert r.returncode == 0, (name, r.stdout, r.stderr)
            assert r.stdout.splitlines() == lines, (name, r.stdout)
        # The template, named as cohort-run names a worker's pod.
        with open(os.path.join(examples, "worker-pod.yaml")) as f:
            template = f.read()
        named = template.replace("metadata:\n", "metadata:\n  name: resnet-node-0-0\n  namespace: training\n", 1)
        assert named != template, "worker-pod.yaml has no metadata: to name"
        path = os.path.join(home, "worker-pod.yaml")
        with open(path, "w") as f:
            f.write(named)
        r = apply(path)
        assert r.returncode == 0 and r.stdout.strip() == "pod/resnet-node-0-0 created (dry run)", (r.stdout, r.stderr)
        # The check can fail: a kind the server does not know.
        with open(os.path.join(examples, "rbac.yaml")) as f:
            broken = f.read().replace("kind: RoleBinding", "kind: RoleBindng")
        with open(path, "w") as f:
            f.write(broken)
        r = apply(path)
        assert r.returncode != 0 and "RoleBindng" in r.stderr, (r.stdout, r.stderr)
        print("examples/kubernetes: every manifest passes kubectl apply --dry-run=client")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
