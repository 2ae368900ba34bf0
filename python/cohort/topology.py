"""The cluster (Topology, Node) and its topology-aware rank order (RankOrder)."""

import collections.abc
import ctypes
import json
from ctypes import byref, c_int32, c_uint32, c_uint64
from dataclasses import dataclass
from typing import Optional

from . import _lib, _util
from ._util import LEVELS, ROLES, STATUSES
from .errors import InvalidArgument, NotFound, OutOfRange

# COHORT_FIELD_* in order.
_FIELDS = ("id", "host", "address", "switch", "rack", "zone", "region", "role", "status")
_FIELD_ID = 0


@dataclass(frozen=True)
class Node:
    """One node of the cluster. host is the host it runs on: its own id when
    it is alone on its own host. Unset labels and address are None."""
    id: str
    host: Optional[str] = None
    address: Optional[str] = None
    role: str = "worker"
    status: str = "ready"
    switch: Optional[str] = None
    rack: Optional[str] = None
    zone: Optional[str] = None
    region: Optional[str] = None
    gpu_count: int = 0
    gpu_memory: int = 0  # bytes per GPU


class Topology(_util.Handle):
    """A set of nodes with unique ids, in file (insertion) order.

    Topology() is empty; fill it with add_node(). Topology.from_file() and
    Topology.from_string() load the YAML/JSON cluster schema.
    """

    _kind = "topology"
    _destroy_name = "cohort_topology_destroy"

    def __init__(self, nodes=None, *, _ptr=None):
        lib = _lib.load()
        super().__init__(_ptr or _util.create(lib.cohort_topology_create, _lib.topology_p))
        for node in nodes or ():
            if isinstance(node, str):
                self.add_node(node)
            elif isinstance(node, Node):
                self.add_node(node.id, host=node.host, address=node.address, role=node.role,
                              switch=node.switch, rack=node.rack, zone=node.zone,
                              region=node.region, gpus=node.gpu_count,
                              gpu_memory=node.gpu_memory, status=node.status)
            elif isinstance(node, dict):
                self.add_node(**node)
            else:
                raise InvalidArgument(f"a node must be an id, a Node or a dict, not {node!r}")

    @classmethod
    def from_file(cls, path):
        """Loads a .yaml/.yml/.json cluster file; errors name file:line:column."""
        lib = _lib.load()
        return cls(_ptr=_util.create(lib.cohort_topology_load_file, _lib.topology_p,
                                     _util.fspath(path)))

    @classmethod
    def from_string(cls, text, format="auto", source_name=None):
        """Parses cluster text; format is "auto", "yaml" or "json"."""
        lib = _lib.load()
        return cls(_ptr=_util.load_string(lib.cohort_topology_load_string, _lib.topology_p, text, format, source_name))

    @classmethod
    def of(cls, nodes):
        """nodes itself if it is a Topology, else a Topology of those node ids
        (each on its own host), Node objects or dicts of add_node arguments."""
        if isinstance(nodes, Topology):
            return nodes
        if isinstance(nodes, (str, bytes)):
            raise InvalidArgument("nodes must be a Topology or a list of node ids, not a str")
        return cls(nodes)

    def add_node(self, id, host=None, address=None, role="worker", switch=None, rack=None,
                 zone=None, region=None, gpus=0, gpu_memory=0, status="ready"):
        """Adds a node and returns it. Arguments are checked before anything is
        added, so a bad one leaves the topology unchanged."""
        lib = _lib.load()
        h = self._h()
        node_id = _util.text("id", id)
        args = (_util.text("host", host, True), _util.text("address", address, True),
                _util.choice("role", ROLES, role))
        labels = [(level, _util.text(LEVELS[level], label))
                  for level, label in enumerate((None, switch, rack, zone, region))
                  if level and label]
        gpu_count = _util.u32("gpus", gpus)
        gpu_bytes = _util.u64("gpu_memory", gpu_memory)
        state = _util.choice("status", STATUSES, status)
        lib.cohort_topology_add_node(h, node_id, *args)
        for level, label in labels:
            lib.cohort_topology_set_locality(h, node_id, level, label)
        if gpu_count or gpu_bytes:
            lib.cohort_topology_set_gpus(h, node_id, gpu_count, gpu_bytes)
        if state:
            lib.cohort_topology_set_status(h, node_id, state)
        return self.node(self.index(id))

    def set_locality(self, id, level, label):
        """Sets (or, with None or "", clears) one label: switch, rack, zone or region."""
        _lib.load().cohort_topology_set_locality(
            self._h(), _util.text("id", id), _util.choice("level", LEVELS, level),
            _util.text("label", label, True))

    def set_gpus(self, id, gpus, gpu_memory):
        _lib.load().cohort_topology_set_gpus(self._h(), _util.text("id", id),
                                             _util.u32("gpus", gpus),
                                             _util.u64("gpu_memory", gpu_memory))

    def set_status(self, id, status):
        _lib.load().cohort_topology_set_status(self._h(), _util.text("id", id),
                                               _util.choice("status", STATUSES, status))

    def __len__(self):
        out = c_uint32()
        _lib.load().cohort_topology_node_count(self._h(), byref(out))
        return out.value

    def find(self, id):
        """The index of the node with this id, or None."""
        try:
            return self.index(id)
        except NotFound:
            return None

    def index(self, id):
        """The index of the node with this id; NotFound if there is none."""
        out = c_uint32()
        _lib.load().cohort_topology_find(self._h(), _util.text("id", id), byref(out))
        return out.value

    def __contains__(self, id):
        return isinstance(id, str) and self.find(id) is not None

    def node_id(self, index):
        """The id of the node at `index`."""
        out = ctypes.c_char_p()
        _lib.load().cohort_topology_node_str(self._h(), _util.u32("index", index), _FIELD_ID,
                                             byref(out))
        return _util.decode(out.value)

    def node(self, index):
        """The node at `index` (OutOfRange past the end)."""
        lib = _lib.load()
        h = self._h()
        index = _util.u32("index", index)
        out = ctypes.c_char_p()
        fields = {}
        for code, name in enumerate(_FIELDS):
            lib.cohort_topology_node_str(h, index, code, byref(out))
            fields[name] = _util.decode(out.value) or None
        role, status, count, memory = c_int32(), c_int32(), c_uint32(), c_uint64()
        lib.cohort_topology_node_info(h, index, byref(role), byref(status), byref(count),
                                      byref(memory))
        fields["role"] = fields["role"] or ROLES[role.value]
        fields["status"] = fields["status"] or STATUSES[status.value]
        return Node(gpu_count=count.value, gpu_memory=memory.value, **fields)

    def __getitem__(self, key):
        """topo[i] is the i-th node; topo["id"] the node with that id."""
        if isinstance(key, str):
            return self.node(self.index(key))
        if isinstance(key, slice):
            return [self.node(i) for i in range(*key.indices(len(self)))]
        key = _util.index("index", key)
        return self.node(key + len(self) if key < 0 else key)

    @property
    def nodes(self):
        return [self.node(i) for i in range(len(self))]

    def __iter__(self):
        return iter(self.nodes)

    @property
    def ids(self):
        return [self.node_id(i) for i in range(len(self))]

    def to_json(self):
        """The cluster in the file schema, as JSON text."""
        return _util.owned_string(_lib.load().cohort_topology_to_json, self._h())

    def to_dict(self):
        return json.loads(self.to_json())

    def rank_order(self, roles=None):
        """Ranks the ready nodes whose role is in `roles` (default: worker and
        chief; "all" for every role): contiguous per host, switch, rack, zone
        and region, chief first."""
        return RankOrder(self, roles)

    def __repr__(self):
        return "Topology(closed)" if self.closed else f"Topology({len(self)} nodes)"


def role_mask(roles):
    """The COHORT_ROLES_* mask for None (training roles), "all", one role or several."""
    if roles is None:
        return 0
    if isinstance(roles, str):
        if roles.strip().lower() == "all":
            return 0x1F
        roles = (roles,)
    mask = 0
    for role in roles:
        mask |= 1 << _util.choice("role", ROLES, role)
    if not mask:
        raise InvalidArgument("roles is empty: name at least one role to rank")
    return mask


@dataclass(frozen=True)
class RankInfo:
    rank: int
    node_id: str
    node_index: int        # into the topology
    local_rank: int        # within its host
    local_world_size: int  # ranked nodes on its host
    node_rank: int         # index of its host among ranked hosts


class RankOrder(_util.Handle, collections.abc.Sequence):
    """order[r] is the RankInfo of rank r; len(order) is the world size."""

    _kind = "rank order"
    _destroy_name = "cohort_rank_order_destroy"

    def __init__(self, topology, roles=None):
        lib = _lib.load()
        mask = role_mask(roles)
        super().__init__(_util.create(lib.cohort_rank_order_create, _lib.rank_order_p,
                                      topology._h(), mask))
        # The order is a snapshot: keep the ids as they were when it was made.
        self._ids = {}
        size = c_int32()
        lib.cohort_rank_order_size(self._h(), byref(size))
        self._size = size.value
        hosts = c_uint32()
        lib.cohort_rank_order_host_count(self._h(), byref(hosts))
        self._host_count = hosts.value
        for rank in range(self._size):
            index = self._info(rank).node_index
            self._ids[index] = topology.node_id(index)

    def _info(self, rank):
        out = _lib.rank_info()
        _lib.load().cohort_rank_order_get(self._h(), _util.rank("rank", rank), byref(out))
        return out

    @property
    def world_size(self):
        return self._size

    @property
    def host_count(self):
        return self._host_count

    def __len__(self):
        return self._size

    def __getitem__(self, rank):
        if isinstance(rank, slice):
            return [self[r] for r in range(*rank.indices(self._size))]
        rank = _util.index("rank", rank)
        if rank < 0:
            rank += self._size
        if not 0 <= rank < self._size:
            raise OutOfRange(f"rank {rank} is past the world size {self._size}")
        info = self._info(rank)
        return RankInfo(rank, self._ids.get(info.node_index), info.node_index,
                        info.local_rank, info.local_world_size, info.node_rank)

    def __iter__(self):
        return (self[r] for r in range(self._size))

    def rank_of(self, id):
        """The rank of node `id`; NotFound if it is not ranked."""
        out = c_int32()
        _lib.load().cohort_rank_order_rank_of(self._h(), _util.text("id", id), byref(out))
        return out.value

    @property
    def node_ids(self):
        """Node ids in rank order."""
        return [info.node_id for info in self]

    def ring_crossings(self, level="host"):
        """How many edges of the ring 0 -> 1 -> ... -> 0 join two different
        groups at `level` ("host", "switch", "rack", "zone" or "region")."""
        out = c_uint32()
        _lib.load().cohort_rank_order_ring_crossings(self._h(), _util.choice("level", LEVELS, level),
                                                     byref(out))
        return out.value

    def __repr__(self):
        return f"RankOrder(world_size={self._size}, hosts={self._host_count})"
