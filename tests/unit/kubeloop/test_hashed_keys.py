"""Request and Resource compute their hash once (they key the workqueue's and the cache's
tables, looked up several times per reconcile); they still behave as the value types
they are: equal values hash alike, ordering and copies are unchanged, and a pickled one
is hashed afresh in a process whose string hashes differ."""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import subprocess
import sys

import msgspec

from kubeloop import CONFIGMAPS, NODES, Request, Resource


def test_equal_values_hash_alike_and_order_as_before() -> None:
    assert hash(Request("a", "ns")) == hash(Request("a", "ns"))
    assert {Request("a", "ns"): 1}[Request("a", "ns")] == 1
    assert Request("a") != Request("a", "ns")
    assert sorted([Request("b"), Request("a", "x")]) == [Request("a", "x"), Request("b")]
    assert repr(Request("a", "ns")) == "Request(name='a', namespace='ns')"
    moved = dataclasses.replace(Request("a", "ns"), name="b")
    assert {moved: 1}[Request("b", "ns")] == 1, "a replaced copy hashes its own fields"
    twin = Resource("", "v1", "configmaps", "ConfigMap")
    assert twin is not CONFIGMAPS
    assert {CONFIGMAPS: 1}[twin] == 1
    assert {copy.deepcopy(NODES): 1}[NODES] == 1
    assert repr(NODES).endswith("kind='Node', namespaced=False)")


def test_the_cached_hash_is_no_field() -> None:
    assert dataclasses.asdict(Request("a", "ns")) == {"name": "a", "namespace": "ns"}
    assert [f.name for f in dataclasses.fields(NODES)] == [
        "group",
        "version",
        "plural",
        "kind",
        "namespaced",
    ]
    assert msgspec.json.decode(msgspec.json.encode(Request("a"))) == {
        "name": "a",
        "namespace": None,
    }


def test_a_pickled_key_is_hashed_afresh_in_another_process() -> None:
    blob = pickle.dumps((Request("a", "ns"), CONFIGMAPS)).hex()
    check = (
        "import pickle, sys\n"
        "from kubeloop import CONFIGMAPS, Request\n"
        "req, res = pickle.loads(bytes.fromhex(sys.argv[1]))\n"
        "assert {Request('a', 'ns'): 1}.get(req) == 1, 'request'\n"
        "assert {CONFIGMAPS: 1}.get(res) == 1, 'resource'\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # other string hashes than ours
    done = subprocess.run(
        [sys.executable, "-c", check, blob], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
