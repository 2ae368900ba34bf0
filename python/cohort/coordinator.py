"""The elastic coordinator (docs/coordinator.md): host one in this process
with Coordinator, talk to any with CoordinatorClient.

    with cohort.Coordinator(token="secret") as server:
        client = cohort.CoordinatorClient(server.url, token="secret")
        client.create_job("train", {"min_nodes": 2})
        client.join("train", "node-0", address="10.0.0.1:29500")
        world = client.wait_for_world("train", "node-0", timeout=60)
        client.store_set("train", world["generation"], "key", b"value")

Replies are dicts. Errors are cohort exceptions by HTTP status: 400
InvalidArgument, 401 PermissionDenied, 404 NotFound, 408 Timeout, 409
Mismatch, 503 Unavailable; a coordinator that cannot be reached before the
retry deadline raises Unavailable naming the URL.
"""

import ctypes
import json
import os
from ctypes import byref, c_char_p, c_int32, c_uint16, c_uint64

from . import _lib, _util
from .errors import InvalidArgument

__all__ = ["Coordinator", "CoordinatorClient"]

# A lease reported done (COHORT_SHARD_*), by value.
SHARD_OUTCOMES = ("counted", "counted_late", "already_done")
SHARD_ALREADY_DONE = 2
# cohort_*_shard_release's outcomes, by COHORT_SHARD_RELEASED (0) ...
RELEASE_OUTCOMES = ("released", "requeued", "reported")


class Coordinator(_util.Handle):
    """A coordinator served from this process, on a thread of its own, until
    close() (or the end of a `with` block). host None: 127.0.0.1; port 0: any
    free port; token None: $COHORT_COORDINATOR_TOKEN, "": none; data_dir
    None: state in memory only.

    High availability (docs/coordinator.md): etcd="host:2379,host2:2379" makes
    this one of several replicas sharing their state in etcd under
    etcd_prefix; the other keywords (etcd_cacert, etcd_cert, etcd_key,
    etcd_user, etcd_password, leader_ttl, advertise_url, replica_id) are
    cohort-coordinator's flags of the same names.

    HTTPS: tls_cert and tls_key (PEM files) serve https://; tls_client_ca
    also requires every client to present a certificate that CA signed.
    Clients find the CA in $COHORT_COORDINATOR_CACERT. Connection limits:
    max_connections, max_connections_per_client, idle_timeout and
    crowded_idle_timeout (seconds), as the flags of the same names."""

    _kind = "coordinator"
    _destroy_name = "cohort_coordinator_destroy"

    _OPTIONS = ("etcd", "etcd_prefix", "etcd_cacert", "etcd_cert", "etcd_key", "etcd_user",
                "etcd_password", "leader_ttl", "advertise_url", "replica_id",
                "tls_cert", "tls_key", "tls_client_ca",
                "max_connections", "max_connections_per_client", "idle_timeout",
                "crowded_idle_timeout")

    def __init__(self, host=None, port=0, token=None, data_dir=None, **options):
        lib = _lib.load()
        unknown = sorted(set(options) - set(self._OPTIONS))
        if unknown:
            raise InvalidArgument(f"Coordinator: unknown keyword {unknown[0]!r}; "
                                        f"known: {', '.join(self._OPTIONS)}")
        if not options:
            ptr = _util.create(lib.cohort_coordinator_create, _lib.coordinator_p,
                               _util.text("host", host, True), _util.uint("port", port, 16),
                               _util.text("token", token, True),
                               _util.text("data_dir", None if data_dir is None else
                                          _util.fspath(data_dir), True))
        else:
            # JSON carries text: paths are checked as paths, then decoded.
            path = lambda v: os.fsdecode(_util.fspath(v))
            options = {k: path(v) if k.startswith("tls_") else v
                       for k, v in options.items() if v is not None}
            options["port"] = _util.uint("port", port, 16)
            if host is not None:
                options["host"] = host
            if token is not None:
                options["token"] = token
            if data_dir is not None:
                options["data_dir"] = path(data_dir)
            ptr = _util.create(lib.cohort_coordinator_from_json, _lib.coordinator_p,
                               _util.text("options", json.dumps(options)))
        super().__init__(ptr)
        self._lib = lib

    @property
    def port(self):
        out = c_uint16()
        self._lib.cohort_coordinator_port(self._h(), byref(out))
        return out.value

    @property
    def url(self):
        """"http://127.0.0.1:PORT"."""
        out = c_char_p()
        self._lib.cohort_coordinator_url(self._h(), byref(out))
        return _util.decode(out.value)

    def __repr__(self):
        return f"cohort.Coordinator({self.url!r})" if not self.closed else "cohort.Coordinator(closed)"


class CoordinatorClient(_util.Handle):
    """A client of the coordinator at url ("http://HOST:PORT"; its replicas
    as "http://HOST:PORT,http://HOST:PORT"; or "etcd://HOST:PORT/PREFIX" to
    find their leader through etcd, followed on failover). token None:
    $COHORT_COORDINATOR_TOKEN. timeout bounds one request (seconds); failed
    connections and 5xx answers are retried with backoff for retry_deadline
    seconds (0: no retry). Safe to share between threads."""

    _kind = "coordinator client"
    _destroy_name = "cohort_coordinator_client_destroy"

    def __init__(self, url, token=None, timeout=10.0, retry_deadline=30.0):
        lib = _lib.load()
        ptr = _util.create(lib.cohort_coordinator_client_create, _lib.coordinator_client_p,
                           _util.text("url", url), _util.text("token", token, True),
                           _util.seconds("timeout", timeout, 0.0),
                           _util.seconds("retry_deadline", retry_deadline, -1.0))
        super().__init__(ptr)
        self._lib = lib
        self.url = url

    # -- jobs

    def create_job(self, name, settings=None):
        """Creates job `name` with settings (a dict: min_nodes, max_nodes,
        last_call, ...; None: the defaults), or finds it with the same ones."""
        text = None if settings is None else json.dumps(settings).encode()
        self._lib.cohort_coordinator_client_ensure_job(self._h(), _util.text("name", name), text)

    def job_state(self, name):
        return json.loads(_util.owned_bytes(self._lib.cohort_coordinator_client_job_state, self._h(),
                                            _util.text("name", name)))

    # -- rendezvous

    def join(self, job, member, host=None, address=None):
        """Joins node `member`; {"state": "waiting"|"active", "generation",
        "rank": int or None}."""
        generation, active, rank = c_uint64(), c_int32(), c_int32()
        self._lib.cohort_coordinator_client_join(self._h(), _util.text("job", job),
                                                 _util.text("member", member),
                                                 _util.text("host", host, True),
                                                 _util.text("address", address, True),
                                                 byref(generation), byref(active), byref(rank))
        return {"state": "active" if active.value else "waiting",
                "generation": generation.value,
                "rank": rank.value if rank.value >= 0 else None}

    def heartbeat(self, job, member, generation=0, step=None, step_time=None,
                  samples_per_sec=None):
        """{"generation", "state", "rendezvous"}; rendezvous True means a new
        round is open: join again and read the new world."""
        job_generation, active, rendezvous = c_uint64(), c_int32(), c_int32()
        self._lib.cohort_coordinator_client_heartbeat(
            self._h(), _util.text("job", job), _util.text("member", member),
            _util.u64("generation", generation), -1 if step is None else _util.u64("step", step),
            -1.0 if step_time is None else float(step_time),
            -1.0 if samples_per_sec is None else float(samples_per_sec),
            byref(job_generation), byref(active), byref(rendezvous))
        return {"generation": job_generation.value,
                "state": "active" if active.value else "waiting",
                "rendezvous": bool(rendezvous.value)}

    def leave(self, job, member, failed=None):
        """Says goodbye for the member; with failed="why" (a launcher that
        saw its worker die) the member is marked failed at once."""
        if failed is None:
            self._lib.cohort_coordinator_client_leave(self._h(), _util.text("job", job),
                                                      _util.text("member", member))
        else:
            self._lib.cohort_coordinator_client_leave_failed(self._h(), _util.text("job", job),
                                                             _util.text("member", member),
                                                             _util.text("failed", failed))

    def world(self, job, member):
        """{"state": "active", "generation", "rank", "world_size",
        "local_rank", "local_world_size", "node_rank", "peers": [{"rank", "id",
        "host", "address"}]}; only "state": "waiting" and "generation" while
        waiting (the coordinator's world message as it sends it)."""
        return json.loads(_util.owned_bytes(self._lib.cohort_coordinator_client_world, self._h(),
                                            _util.text("job", job), _util.text("member", member)))

    def wait_for_world(self, job, member, timeout=60.0):
        """Heartbeats until the member has a world, then world(); raises
        cohort.Timeout after `timeout` seconds."""
        return json.loads(_util.owned_bytes(self._lib.cohort_coordinator_client_wait_for_world, self._h(),
                                            _util.text("job", job), _util.text("member", member),
                                            _util.seconds("timeout", timeout)))

    # -- store of one generation

    def store_set(self, job, generation, key, value):
        data = value.encode() if isinstance(value, str) else bytes(value)
        self._lib.cohort_coordinator_client_store_set(self._h(), _util.text("job", job),
                                                      _util.u64("generation", generation),
                                                      _util.text("key", key), data, len(data))

    def store_get(self, job, generation, key, timeout=0.0):
        """The value (bytes); waits up to `timeout` seconds for it (0: not at
        all, cohort.NotFound when absent; cohort.Timeout after a wait)."""
        return _util.owned_bytes(self._lib.cohort_coordinator_client_store_get, self._h(),
                                 _util.text("job", job), _util.u64("generation", generation),
                                 _util.text("key", key), _util.seconds("timeout", timeout))

    def store_add(self, job, generation, key, delta):
        """Adds delta to the integer under key (absent: 0); the sum."""
        value = ctypes.c_int64()
        if not isinstance(delta, int) or isinstance(delta, bool):
            raise InvalidArgument(f"delta must be an int, not {delta!r}")
        self._lib.cohort_coordinator_client_store_add(self._h(), _util.text("job", job),
                                                      _util.u64("generation", generation),
                                                      _util.text("key", key), delta, byref(value))
        return value.value

    def store_compare_and_set(self, job, generation, key, expected, desired):
        """Stores `desired` when the value is `expected` (None: when the key
        is absent). (stored, value after the call or None)."""
        want = None if expected is None else (
            expected.encode() if isinstance(expected, str) else bytes(expected))
        data = desired.encode() if isinstance(desired, str) else bytes(desired)
        lib = _lib.load()
        stored = ctypes.c_int32()
        buf = ctypes.POINTER(ctypes.c_char)()
        length = ctypes.c_size_t()
        self._lib.cohort_coordinator_client_store_compare_and_set(
            self._h(), _util.text("job", job), _util.u64("generation", generation),
            _util.text("key", key), want, 0 if want is None else len(want), data, len(data),
            byref(stored), byref(buf), byref(length))
        if not buf:
            return bool(stored.value), None
        try:
            return bool(stored.value), ctypes.string_at(buf, length.value)
        finally:
            lib.cohort_free(buf)

    def store_wait(self, job, generation, keys, timeout=60.0):
        """Waits until every key exists; cohort.Timeout naming the missing."""
        names = [_util.text("key", k) for k in keys]
        array = (ctypes.c_char_p * max(1, len(names)))(*names)
        self._lib.cohort_coordinator_client_store_wait(self._h(), _util.text("job", job),
                                                       _util.u64("generation", generation),
                                                       array, len(names), _util.seconds("timeout", timeout))

    def store_delete(self, job, generation, key):
        """True when the key was there."""
        deleted = ctypes.c_int32()
        self._lib.cohort_coordinator_client_store_delete(self._h(), _util.text("job", job),
                                                         _util.u64("generation", generation),
                                                         _util.text("key", key), byref(deleted))
        return bool(deleted.value)

    def heartbeat_metrics(self, job, member, generation=0, metrics=None):
        """A heartbeat with any metrics dict of the heartbeat route ("step",
        "step_time", "samples_per_sec", "data_wait", "collective_wait",
        "collective_seq", "in_collective", "gpu", "samples": [...]); the
        answer: {"generation", "state", "rendezvous", and "rank",
        "world_size" while active}."""
        text = None if metrics is None else json.dumps(metrics).encode()
        return json.loads(_util.owned_bytes(self._lib.cohort_coordinator_client_heartbeat_json, self._h(),
                                            _util.text("job", job), _util.text("member", member),
                                            _util.u64("generation", generation), text))

    # -- shards

    def register_dataset(self, job, plan):
        """plan: {"shards": [{"id", "bytes"?, "hosts"?}], "epochs"?, ...}."""
        self._lib.cohort_coordinator_client_register_dataset(self._h(), _util.text("job", job),
                                                             json.dumps(plan).encode())

    def next_shard(self, job, member):
        """{"granted", "finished", and when granted "lease", "shard_id",
        "shard", "epoch", "bytes", "expiry"}."""
        return json.loads(_util.owned_bytes(self._lib.cohort_coordinator_client_next_shard, self._h(),
                                            _util.text("job", job), _util.text("member", member)))

    def shard_done(self, job, member, lease):
        """True when this report counted the shard, False when it was done
        already."""
        outcome = c_int32()
        self._lib.cohort_coordinator_client_shard_done(self._h(), _util.text("job", job),
                                                       _util.text("member", member),
                                                       _util.u64("lease", lease), byref(outcome))
        return outcome.value != SHARD_ALREADY_DONE

    def shard_release(self, job, member, lease):
        """Gives an outstanding lease back unread, so its shard goes to the
        next member that asks instead of waiting for the lease to expire.
        "released"; or "requeued" when it was back in the queue already
        (expired, member removed, given back before) and "reported" when it
        was reported done: then nothing changes."""
        outcome = c_int32()
        self._lib.cohort_coordinator_client_shard_release(self._h(), _util.text("job", job),
                                                          _util.text("member", member),
                                                          _util.u64("lease", lease), byref(outcome))
        return RELEASE_OUTCOMES[outcome.value]

    def __repr__(self):
        return f"cohort.CoordinatorClient({self.url!r})"
