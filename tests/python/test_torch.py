"""cohort with PyTorch: tensors straight into Communicator calls (zero
copy, every dtype cohort reduces, clear errors for the rest), the DDP comm
hook against DDP over torch's own gloo, and the helpers for programs
without DDP. python3-torch is a dependency (scripts/deps.sh): without it
these tests fail, they do not skip."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

import _support
import cohort

try:
    import torch
except ImportError:  # reported by the test below, not skipped
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
WAIT = 30.0
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8")


def run_ranks(size, body):
    results, errors = [None] * size, [None] * size
    with tempfile.TemporaryDirectory(prefix="cohort-torch-") as folder:
        def rank_main(rank):
            try:
                with cohort.Communicator(rank, size, "file://" + folder, address="127.0.0.1",
                                         timeout=WAIT, connect_timeout=WAIT) as comm:
                    results[rank] = body(comm)
            except BaseException as exc:
                errors[rank] = exc
        threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            if t.is_alive():
                raise AssertionError("a rank hung")
    for rank, exc in enumerate(errors):
        if exc is not None:
            raise AssertionError(f"rank {rank} failed: {exc!r}") from exc
    return results


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Available(unittest.TestCase):
    def test_torch_is_installed(self):
        self.assertIsNotNone(torch, "python3-torch is missing: run scripts/deps.sh (Debian's "
                                    "/usr/bin/python3 sees it)")

    def test_import_cohort_does_not_import_torch(self):
        code = "import sys, cohort, cohort.comm; print('torch' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=_support.child_env(), timeout=60)
        self.assertEqual(out.stdout.strip(), "False", out.stderr)


@unittest.skipIf(torch is None, "python3-torch missing (test_torch_is_installed fails)")
class Tensors(unittest.TestCase):
    def test_every_dtype_in_place_and_out_of_place(self):
        def body(comm):
            for name in DTYPES:
                dtype = getattr(torch, name)
                t = (torch.arange(33) % 7 + comm.rank).to(dtype)
                address = t.data_ptr()
                comm.allreduce(t)
                self.assertEqual(t.data_ptr(), address)  # in place: the tensor's own memory
                expected = ((torch.arange(33) % 7) * 2 + 1).to(dtype)
                self.assertTrue(torch.equal(t, expected), (name, t))
                out = torch.empty(33, dtype=dtype)
                comm.allreduce(torch.ones(33, dtype=dtype), op="max", out=out)
                self.assertTrue(torch.equal(out, torch.ones(33, dtype=dtype)), name)
            return True
        run_ranks(2, body)

    def test_other_collectives_keep_tensor_kinds(self):
        def body(comm):
            g = comm.allgather(torch.full((2, 3), comm.rank, dtype=torch.int32))
            self.assertIsInstance(g, torch.Tensor)
            self.assertEqual(tuple(g.shape), (2, 2, 3))
            self.assertTrue(torch.equal(g[1], torch.ones(2, 3, dtype=torch.int32)))
            rs = comm.reduce_scatter(torch.arange(8, dtype=torch.float64).reshape(2, 4))
            self.assertTrue(torch.equal(rs, torch.arange(8, dtype=torch.float64).reshape(2, 4)[comm.rank] * 2))
            b = torch.full((5,), float(comm.rank), dtype=torch.bfloat16)
            comm.broadcast(b, root=1)
            self.assertTrue(torch.equal(b, torch.ones(5, dtype=torch.bfloat16)))
            w = comm.allreduce_async(torch.ones(1000), op="avg")
            self.assertTrue(torch.equal(w.wait(), torch.ones(1000)))
            return True
        run_ranks(2, body)

    def test_what_cannot_go_through_is_named(self):
        comm = cohort.Communicator(0, 1)
        cases = [(torch.ones(4, requires_grad=True), "requires grad"),
                 (torch.ones(4, 4).t(), "not contiguous"),
                 (torch.ones(3, dtype=torch.complex64), "torch.complex64"),
                 (torch.ones(3, dtype=torch.bool), "torch.bool"),
                 (torch.empty(4, device="meta"), "meta")]
        for tensor, words in cases:
            with self.assertRaises(cohort.InvalidArgument) as caught:
                comm.allreduce(tensor)
            self.assertIn(words, str(caught.exception))
        with self.assertRaises(cohort.InvalidArgument) as caught:
            comm.allreduce(torch.ones(3, dtype=torch.uint8), dtype="float32")
        self.assertIn("has 3 bytes, not a whole number of float32 elements", str(caught.exception))
        comm.allreduce(torch.ones(4, requires_grad=True).detach())  # the documented way out
        comm.close()


@unittest.skipIf(torch is None, "python3-torch missing (test_torch_is_installed fails)")
class Modules(unittest.TestCase):
    def test_broadcast_parameters_and_allreduce_gradients(self):
        import cohort.torch as ct

        def body(comm):
            # Threads share torch's random generator, so known values
            # rather than seeds tell the ranks' weights apart.
            net = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.BatchNorm1d(3))
            with torch.no_grad():
                for t in list(net.parameters()) + list(net.buffers()):
                    t.fill_(comm.rank + 1)
            ct.broadcast_parameters(net, comm, root=1)
            for name, t in list(net.named_parameters()) + list(net.named_buffers()):
                self.assertTrue(torch.equal(t, torch.full_like(t, 2)), name)
            for p in net.parameters():
                p.grad = torch.full_like(p, float(comm.rank))
            ct.allreduce_gradients(net, comm)
            for p in net.parameters():
                self.assertTrue(torch.equal(p.grad, torch.full_like(p, 0.5)))
            with self.assertRaises(cohort.InvalidArgument):
                ct.broadcast_parameters("not a module", comm)
            return True
        run_ranks(2, body)


@unittest.skipIf(torch is None, "python3-torch missing (test_torch_is_installed fails)")
class DistributedDataParallelHook(unittest.TestCase):
    def run_workers(self, size, mode, dies=()):
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="cohort-ddp-") as folder:
            procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "torch_ddp_worker.py"), str(r),
                                       str(size), str(port), "file://" + folder, mode],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=_support.child_env(), cwd=HERE)
                     for r in range(size)]
            outs = []
            try:
                for rank, p in enumerate(procs):
                    out, err = p.communicate(timeout=240)
                    if rank in dies:
                        outs.append(None)
                        continue
                    self.assertEqual(p.returncode, 0, err[-3000:])
                    outs.append(json.loads(out.strip().splitlines()[-1]))
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
        return outs

    def test_training_matches_ddp_over_gloo(self):
        outs = self.run_workers(2, "train")
        for rank, out in enumerate(outs):
            for got, want in zip(out["cohort"], out["gloo"]):
                # Both average the same gradients; gloo sums then divides,
                # cohort's avg too, but the order of float additions may
                # differ: 5 SGD steps stay within 1e-5.
                self.assertEqual(len(got), len(want))
                self.assertLess(max(abs(a - b) for a, b in zip(got, want)), 1e-5, f"rank {rank}")
        self.assertEqual(outs[0]["cohort"], outs[1]["cohort"])  # identical on every rank

    def test_a_failed_bucket_raises_the_named_error_from_backward(self):
        outs = self.run_workers(2, "abort")
        for out in outs:
            self.assertIsNotNone(out["error"], "backward succeeded on an aborted communicator")
            self.assertTrue("aborted" in out["error"] or "gave up" in out["error"], out["error"])
            self.assertRegex(out["error"], r"\bClosed: ", "the cohort error is not named")

    def test_a_killed_peer_is_named_from_backward(self):
        out = self.run_workers(2, "kill", dies=(1,))[0]
        self.assertIsNotNone(out["error"], "backward succeeded with its peer dead")
        self.assertIn("rank 1", out["error"])
        self.assertRegex(out["error"], r"\b(PeerFailed|Closed): ", "the cohort error is not named")


if __name__ == "__main__":
    unittest.main()
