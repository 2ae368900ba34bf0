"""cohort.read_launch_env and Communicator.from_env: each launcher's
variables, the precedence, the store, and the errors, with the process
environment set for each test and restored after."""

import contextlib
import os
import tempfile
import threading
import unittest

import _support  # noqa: F401  (puts cohort on sys.path)
import cohort

LAUNCHER_VARIABLES = (
    "COHORT_RANK", "COHORT_WORLD_SIZE", "COHORT_LOCAL_RANK", "COHORT_LOCAL_WORLD_SIZE",
    "COHORT_NODE_RANK", "COHORT_STORE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NODEID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE")


@contextlib.contextmanager
def launched(**variables):
    """The process environment with only `variables` among the launcher's."""
    saved = {name: os.environ.get(name) for name in LAUNCHER_VARIABLES}
    try:
        for name in LAUNCHER_VARIABLES:
            os.environ.pop(name, None)
        os.environ.update({k: str(v) for k, v in variables.items()})
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class ReadLaunchEnvTest(unittest.TestCase):
    def test_nothing_set(self):
        with launched():
            env = cohort.read_launch_env()
        self.assertEqual(env.source, "none")
        self.assertEqual((env.rank, env.world_size), (0, 1))
        self.assertEqual((env.local_rank, env.local_world_size, env.node_rank), (0, 1, 0))
        self.assertIsNone(env.store)
        self.assertIn("no launcher variables found", env.notes[0])

    def test_torchrun(self):
        with launched(RANK=3, WORLD_SIZE=4, LOCAL_RANK=1, LOCAL_WORLD_SIZE=2, GROUP_RANK=1,
                      MASTER_ADDR="node-0", MASTER_PORT=29500):
            env = cohort.read_launch_env()
        self.assertEqual(env, cohort.LaunchEnv(
            rank=3, world_size=4, local_rank=1, local_world_size=2, node_rank=1,
            store="tcp://node-0:29500", source="torchrun", notes=env.notes))
        self.assertIn("rank 3 from RANK", env.notes)

    def test_openmpi_node_rank_is_unknown(self):
        with launched(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=3, OMPI_COMM_WORLD_LOCAL_RANK=1,
                      OMPI_COMM_WORLD_LOCAL_SIZE=3, COHORT_STORE="file:///tmp/x"):
            env = cohort.read_launch_env()
        self.assertEqual(env.source, "openmpi")
        self.assertEqual((env.rank, env.world_size, env.local_rank, env.local_world_size),
                         (1, 3, 1, 3))
        self.assertIsNone(env.node_rank)
        self.assertEqual(env.store, "file:///tmp/x")

    def test_slurm(self):
        with launched(SLURM_PROCID=5, SLURM_NTASKS=7, SLURM_LOCALID=1, SLURM_NODEID=2,
                      SLURM_TASKS_PER_NODE="2(x2),3"):
            env = cohort.read_launch_env()
        self.assertEqual(env.source, "slurm")
        self.assertEqual((env.rank, env.world_size, env.local_rank, env.local_world_size,
                          env.node_rank), (5, 7, 1, 3, 2))

    def test_precedence(self):
        with launched(COHORT_RANK=0, COHORT_WORLD_SIZE=2, RANK=1, WORLD_SIZE=3,
                      OMPI_COMM_WORLD_RANK=2, OMPI_COMM_WORLD_SIZE=4):
            env = cohort.read_launch_env()
        self.assertEqual((env.source, env.world_size), ("cohort", 2))
        self.assertIn("ignored OMPI_COMM_WORLD_RANK=2 (openmpi): COHORT_RANK comes first",
                      env.notes)

    def test_errors_name_the_variable(self):
        cases = [
            ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not a number"),
            ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
            ({"RANK": "1"}, "RANK=1 is set but WORLD_SIZE is not"),
            ({"SLURM_PROCID": "-1", "SLURM_NTASKS": "2"}, "SLURM_PROCID=-1 is negative"),
            ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h"},
             "MASTER_ADDR=h is set but MASTER_PORT is not"),
        ]
        for variables, message in cases:
            with self.subTest(variables=variables), launched(**variables):
                with self.assertRaises(cohort.InvalidArgument) as caught:
                    cohort.read_launch_env()
                self.assertIn(message, str(caught.exception))


class FromEnvTest(unittest.TestCase):
    def test_single_process(self):
        with launched(COHORT_RANK=0, COHORT_WORLD_SIZE=1):
            with cohort.Communicator.from_env(timeout=10) as comm:
                self.assertIsInstance(comm, cohort.Communicator)
                self.assertEqual((comm.rank, comm.size), (0, 1))
                buf = bytearray(b"\x05\x00\x00\x00")
                comm.allreduce(buf, dtype="int32")
                self.assertEqual(buf, bytearray(b"\x05\x00\x00\x00"))

    def test_nothing_set_is_not_found(self):
        with launched():
            with self.assertRaises(cohort.NotFound) as caught:
                cohort.communicator_from_env()
            self.assertIn("COHORT_RANK=0 COHORT_WORLD_SIZE=1", str(caught.exception))
            # Unless rank and size are given.
            with cohort.communicator_from_env(rank=0, size=1) as comm:
                self.assertEqual(comm.size, 1)

    def test_no_store(self):
        with launched(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=3):
            with self.assertRaises(cohort.InvalidArgument) as caught:
                cohort.Communicator.from_env()
        self.assertIn("rank 1 of 3 (from openmpi) needs a store", str(caught.exception))
        self.assertIn("COHORT_STORE", str(caught.exception))

    def test_two_threads_through_the_env_store(self):
        # Threads share the environment: the size and store come from it,
        # each thread's rank from the argument.
        with tempfile.TemporaryDirectory() as folder, \
                launched(COHORT_RANK=0, COHORT_WORLD_SIZE=2, COHORT_STORE="file://" + folder):
            results, errors = {}, []

            def rank_main(rank):
                try:
                    with cohort.Communicator.from_env(rank=rank, timeout=30,
                                                      connect_timeout=30) as comm:
                        buf = bytearray((rank + 1).to_bytes(4, "little"))
                        comm.allreduce(buf, dtype="int32")
                        results[rank] = int.from_bytes(buf, "little")
                except Exception as exc:  # reported by the main thread
                    errors.append(exc)

            threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(results, {0: 3, 1: 3})


if __name__ == "__main__":
    unittest.main()
