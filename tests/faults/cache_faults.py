"""The fault matrix's scenarios of the cache's read guarantees (issue 23, bugs 3, 5, 8).

The Pack operator (tests/faults/pack.py) counts its children from the cache and reads
an optional Secret from it. Three faults, each with its own counter, read from the
apiserver or the fault proxy's log, never from the operator:

``child-lag`` (bug 3, read-your-own-writes)
    Once the children of the created Packs exist (and the informers have them), the
    operator's cluster-wide LISTs and watches of ConfigMaps are held for ``CHILD_LAG_S``;
    then the spec changes (Packs scale down and up). The selector informer the count
    reads stops, while the namespaced informer of the same kind goes on. Every count
    after one of the operator's own creates or deletes must still show them: the
    namespaced informer's event must not settle the held one's expectation, an own
    delete is waited for, and once the wait gives up (the hold outlasts it) the live
    read the selector informer falls back to keeps a fresh child. ``stale_reads``:
    children the apiserver saw created beyond the most any spec of the Pack asked for (a
    count that missed a fresh child creates another; one that still showed a deleted
    child deletes one more, then re-creates it).
``recreate-lag`` (bug 3, an older incarnation's delete)
    Once every Pack's seal exists (and the namespaced informer has it), that informer's
    watches hang; the spec change then makes the operator replace the seals of the Packs
    whose replicas change (delete, then create under the same name), unseen by the
    informer. At the heal its watch resumes, delivers the old seal's delete of ``p-0`` and
    breaks there (a connection lost between two events; the proxy's narrowed
    :class:`~kubeloop.testing.faults.CutWatch`), and its next watch opens
    ``RELAG_S`` late. Then the user annotates the Pack, and its reconcile's read of the seal must
    still wait for our create (the delete is of an older incarnation, older than the
    create) instead of showing no seal. ``stale_reads`` also counts, per Pack, seal creates
    refused ``AlreadyExists`` (a read that missed our create) and seal deletes beyond the
    replacements its specs asked for (one that still showed the old seal), from the proxy's
    log. ``faults_missed``: no watch was broken after that delete (the run proved nothing).
``forbid-list`` (bug 5)
    The proxy answers 403 to the operator's LISTs and watches of Secrets (RBAC granting
    ``get`` only). Two of the four Packs name a Secret; two workers. ``stuck_reads``: a
    Pack naming none that is not reconciled while the refusal holds (a worker held for
    ever by a read that waits for a sync that cannot come), or one naming a Secret whose
    ``status.secretError`` does not name the kind and the refused verb.
``list-hang`` (bug 8, a LIST timeout taken for a watch stall)
    The operator (requests time out after ``LIST_HANG_TIMEOUT``) has its ConfigMap
    watches answered 410 Gone and its LISTs of them held: each informer must relist with
    backoff. ``list_storms``: a LIST started sooner after the previous one of the same
    informer than a timeout and the client's shortest retry pause allow (the reflector
    listing again at once), from the proxy's log.

    python -m tests.faults.runner --only 'pack/single/child-lag@create'
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from kubeloop import CONFIGMAPS, LEASES, SECRETS, Object, Resource
from kubeloop._client import _READ_TRIES
from kubeloop.testing.faults import CutWatch, Delay, Hang, LogEntry, Respond, Rule
from kubeloop.testing.invariants import NOT_OBJECT_WRITES
from kubeloop.testing.oracles import ObjectKey, OpCount, State
from tests.faults import pack
from tests.faults.operators import ADAPTERS, Losses, OperatorAdapter, Scope, _get
from tests.faults.world import World

if TYPE_CHECKING:
    from tests.faults.runner import Run
    from tests.faults.scenarios import Scenario

FAULTS = ("child-lag", "recreate-lag", "forbid-list", "list-hang", "lease-steal")
#: The Lease a Pack leader pair holds (the runner waits for its first holder).
LEASE = pack.LEASE

#: Replicas per Pack at creation, and after the update (one scales down, one up).
REPLICAS = {"p-0": (3, 1), "p-1": (1, 3), "p-2": (2, 2), "p-3": (2, 1)}
#: The Packs that name a Secret (which exists for one of them).
WITH_SECRET = {"p-2": "present", "p-3": "absent"}

#: The operator's request timeout in ``list-hang`` scenarios, and how long the LISTs
#: are held: room for two of the reflector's attempts (each up to three tries of the
#: client's) after the first timeout.
LIST_HANG_TIMEOUT = 1.0
LIST_HANG_S = 9.0
#: How long ``child-lag`` holds the selector informer: longer than a read waits for our
#: own write (``read_your_writes_timeout``, 5 s), so reads also fall back to the server.
CHILD_LAG_S = 8.0
#: How late ``recreate-lag``'s watches open: longer than a read waits for our own write
#: (5 s), so a reconcile held in such a wait from before the cut (the informer was blind)
#: ends inside the window and the Pack is read again in it before the new seal's event.
RELAG_S = 8.0
#: The Pack whose old seal's delete ``recreate-lag`` breaks the watch after (one whose
#: replicas change).
RELAG_PACK = "p-0"
#: The annotation the user sets on :data:`RELAG_PACK` in ``recreate-lag``'s window.
NUDGE = "faults.kubeloop.dev/nudge"
#: How long after the cut the user annotates the Pack: well inside the window (RELAG_S).
NUDGE_AFTER_S = 0.5
#: How long ``recreate-lag`` waits at the heal for the replaced seals (from the apiserver).
RESEAL_WAIT_S = 20.0
#: How long ``child-lag`` lets the informers take in the children made for the
#: created Packs before it holds the selector one.
SEEN_S = 0.5
#: The faults whose hold lasts a set time (from the strike), not the runner's 4 s.
HOLDS = {"child-lag": CHILD_LAG_S, "list-hang": LIST_HANG_S}
#: A reflector attempt that started less than this after the previous attempt's last
#: LIST timed out started at once: its backoff is at least 0.8 s (``backoff_initial``),
#: and half of that leaves room for the proxy's and the loop's delays.
_AT_ONCE = 0.4
#: How long ``forbid-list`` waits, the refusal still in force, for the Packs that do not
#: need the Secret to be reconciled.
FORBID_WAIT_S = 20.0


def extra_argv(scn: Scenario) -> list[str]:
    """Flags the operator gets for this scenario's fault."""
    if scn.fault == "list-hang":
        return ["--request-timeout", str(LIST_HANG_TIMEOUT)]
    return []


class PackAdapter(OperatorAdapter):
    """tests/faults/pack.py: Packs of child ConfigMaps counted from the cache."""

    name = "pack"
    generation_kinds = (pack.PACKS,)
    lag_kind = CONFIGMAPS

    def __init__(self) -> None:
        #: Every ``spec.replicas`` the workload asked of each Pack, per scope.
        self.asked: dict[str, dict[str, list[int]]] = {}
        #: When a scenario's ``list-hang`` hold began.
        self.hang_started: dict[Scenario, float] = {}
        #: The ids of the proxy rules a scenario's fault put in force.
        self.held: dict[Scenario, set[int]] = {}
        #: When a ``lease-steal`` scenario's Lease was taken.
        self.stolen: dict[Scenario, float] = {}
        #: The id of ``recreate-lag``'s narrowed cut, per scenario.
        self.cut_rule: dict[Scenario, int] = {}

    async def install(self, world: World) -> None:
        await world.blocking(world.cp.install_crds, [pack.PACK_CRD])

    def argv(self, world: World, scope: Scope, client: str, *, leader: bool) -> list[str]:
        return [
            str(pack.__file__),
            "--kubeconfig",
            str(world.kubeconfig(client)),
            "--label-selector",
            scope.selector,
            "--identity",
            client,
            "--namespace",
            scope.namespace,
            *(["--leader-elect"] if leader else []),
        ]

    async def create(self, world: World, scope: Scope) -> None:
        asked = self.asked.setdefault(scope.id, {})
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "present"}}
        await world.user.create(SECRETS, scope.labelled(secret), scope.namespace)
        for name, (replicas, _) in REPLICAS.items():
            spec: dict[str, object] = {"replicas": replicas}
            if name in WITH_SECRET:
                spec["secret"] = WITH_SECRET[name]
            obj = {"apiVersion": f"{pack.GROUP}/v1", "kind": "Pack", "metadata": {"name": name}}
            await world.user.create(
                pack.PACKS, scope.labelled({**obj, "spec": spec}), scope.namespace
            )
            scope.desired[name] = spec
            asked[name] = [replicas]

    async def update(self, world: World, scope: Scope) -> None:
        for name, (_, replicas) in REPLICAS.items():
            await world.user.patch(
                pack.PACKS, name, {"spec": {"replicas": replicas}}, scope.namespace
            )
            scope.desired[name] = {**scope.desired[name], "replicas": replicas}
            self.asked[scope.id][name].append(replicas)

    async def _children(self, world: World, scope: Scope) -> dict[str, list[Object]]:
        listed = await world.admin.list(CONFIGMAPS, scope.namespace, label_selector=pack.PACK_LABEL)
        out: dict[str, list[Object]] = defaultdict(list)
        for c in listed["items"]:
            if not c["metadata"].get("deletionTimestamp"):
                out[c["metadata"]["labels"][pack.PACK_LABEL]].append(c)
        return out

    async def mismatches(self, world: World, scope: Scope) -> list[str]:
        out: list[str] = []
        children = await self._children(world, scope)
        for name, spec in scope.desired.items():
            obj = await _get(world, pack.PACKS, name, scope.namespace)
            if obj is None:
                out.append(f"pack {name}: missing")
                continue
            status = obj.get("status") or {}
            if status.get("observedGeneration") != obj["metadata"]["generation"]:
                out.append(f"pack {name}: observedGeneration {status.get('observedGeneration')}")
            if len(children.get(name, [])) != spec["replicas"]:
                out.append(f"pack {name}: {len(children.get(name, []))} children")
            if name in WITH_SECRET and status.get("secretFound") != (
                WITH_SECRET[name] == "present"
            ):
                out.append(f"pack {name}: secretFound {status.get('secretFound')}")
            sealed = await _sealed(world, name, scope.namespace)
            if sealed != spec["replicas"]:
                out.append(f"pack {name}: seal records {sealed} replicas")
        return out

    async def acted_on_creates(self, world: World, scope: Scope) -> bool:
        children = await self._children(world, scope)
        for n, (r, _) in REPLICAS.items():
            if len(children.get(n, [])) != r or await _sealed(world, n, scope.namespace) != r:
                return False
        return True

    async def losses(self, world: World, scope: Scope) -> Losses:
        lost, notes = 0, []
        for name, spec in scope.desired.items():
            obj = await _get(world, pack.PACKS, name, scope.namespace)
            if obj is None or (obj.get("spec") or {}).get("replicas") != spec["replicas"]:
                lost += 1
                notes.append(f"pack {name}: spec is not the last written")
        return Losses(lost, notes=tuple(notes))

    async def snapshot(self, world: World, scope: Scope) -> State:
        objects: dict[ObjectKey, Object] = {}
        children = await self._children(world, scope)
        for name in REPLICAS:
            obj = await _get(world, pack.PACKS, name, scope.namespace)
            if obj is not None:
                objects[("packs", "", name)] = {
                    "spec": obj.get("spec"),
                    "children": len(children.get(name, [])),
                }
        return State(objects)

    def child_watch(self, scope: Scope) -> tuple[Resource, str | None, str | None] | None:
        return (CONFIGMAPS, scope.namespace, pack.PACK_LABEL)

    def creates_deletes(self, world: World, scope: Scope) -> dict[ObjectKey, OpCount]:
        """Per Pack (the children's names are generated, so differ from run to run)."""
        assert scope.children is not None
        out: dict[ObjectKey, OpCount] = {}
        for (res, _, name), count in scope.children.operations.items():
            owner = name.rsplit("-", 1)[0]
            if owner in REPLICAS:
                total = out.setdefault((res, "", owner), OpCount())
                total.creates += count.creates
                total.deletes += count.deletes
        return out

    def stale_reads(self, world: World, scope: Scope) -> list[str]:
        """Children created beyond the most any spec of their Pack asked for, as the
        apiserver's watch of them reported: each is a count that missed our own create
        or still showed our own delete. And the seals' (from the proxy's log)."""
        out: list[str] = []
        for (_, _, owner), count in self.creates_deletes(world, scope).items():
            most = max(self.asked[scope.id][owner])
            if count.creates > most:
                out.append(
                    f"pack {owner}: {count.creates} children created, {count.deletes} deleted; "
                    f"its specs asked for {self.asked[scope.id][owner]}"
                )
        entries = world.proxy.log.entries(resource="configmaps", namespace=scope.namespace)
        for owner, asked in self.asked[scope.id].items():
            out += seal_misreads(entries, owner, asked)
        return out


ADAPTERS[PackAdapter.name] = PackAdapter()


async def _sealed(world: World, name: str, namespace: str) -> int | None:
    """The replicas the Pack's seal records, as the apiserver has it (None: no seal)."""
    seal = await _get(world, CONFIGMAPS, pack.seal_name(name), namespace)
    replicas = ((seal or {}).get("data") or {}).get("replicas")
    return None if replicas is None else int(replicas)


def seal_misreads(entries: list[LogEntry], owner: str, asked: list[int]) -> list[str]:
    """A Pack's seal writes that only a stale read explains, from the proxy's log (the
    operators' writes: the workload never touches seals): a create refused
    ``AlreadyExists`` (the read missed our own create) and deletes beyond the replacements
    its specs asked for (``asked``: every replicas asked, in order; a read that still
    showed the old seal deletes the new one)."""
    name = pack.seal_name(owner)
    mine = [e for e in entries if e.name == name and e.client != "user"]
    refused = [e for e in mine if e.verb == "create" and e.reason == "AlreadyExists"]
    deleted = [e for e in mine if e.verb == "delete" and e.status == 200]
    replaced = sum(a != b for a, b in itertools.pairwise(asked))
    out: list[str] = []
    if refused:
        out.append(f"pack {owner}: {len(refused)} seal creates refused AlreadyExists")
    if len(deleted) > replaced:
        out.append(
            f"pack {owner}: {len(deleted)} seals deleted; its specs asked for {asked} "
            f"({replaced} replacements)"
        )
    return out


# -- the faults ------------------------------------------------------------------------


async def strike(run: Run) -> None:
    """Put ``run``'s fault in force (lifted by the runner's heal)."""
    fault, px, ops = run.scn.fault, run.w.proxy, run.clients
    adapter = ADAPTERS[run.scn.operator]
    assert isinstance(adapter, PackAdapter)
    if fault == "child-lag":
        # the children made for the created Packs first, and seen by the selector
        # informer, so the update's scale-downs delete children it holds
        await run._acted_on_creates()
        await asyncio.sleep(SEEN_S)
        # as watch-lag: the cluster-wide informer has listed, then its watch is cut and
        # its re-watch (and any relist) hangs; the namespaced one goes on
        await run._until_watching(CONFIGMAPS.plural)
        run.rules.append(
            px.add_rule(
                Hang(), client=ops, verb={"list", "watch"}, resource="configmaps", namespace=""
            )
        )
        for client in ops:
            px.cut_watches(client=client, resource=CONFIGMAPS.plural)
        adapter.hang_started[run.scn] = time.monotonic()
    elif fault == "recreate-lag":
        # every seal made and seen by the namespaced informer, which then goes blind:
        # its watches hang (not its LISTs: a resumed watch delivers the old seal's delete,
        # a relist would not), and the cut re-watch hangs too
        await run._acted_on_creates()
        await asyncio.sleep(SEEN_S)
        await run._until_watching(CONFIGMAPS.plural)
        for scope in run.scopes:
            run.rules.append(
                px.add_rule(
                    Hang(),
                    client=ops,
                    verb="watch",
                    resource="configmaps",
                    namespace=scope.namespace,
                )
            )
        for client in ops:
            px.cut_watches(client=client, resource=CONFIGMAPS.plural)
    elif fault == "forbid-list":
        forbidden = Respond(403, reason="Forbidden", message="secrets is forbidden: list denied")
        run.rules.append(
            px.add_rule(forbidden, client=ops, verb={"list", "watch"}, resource="secrets")
        )
    elif fault == "list-hang":
        await run._until_watching(CONFIGMAPS.plural)
        gone = Respond(410, reason="Expired", message="too old resource version")
        run.rules.append(px.add_rule(gone, client=ops, verb="watch", resource="configmaps"))
        run.rules.append(px.add_rule(Hang(), client=ops, verb="list", resource="configmaps"))
        for client in ops:
            px.cut_watches(client=client, resource=CONFIGMAPS.plural)
        adapter.hang_started[run.scn] = time.monotonic()
    elif fault == "lease-steal":
        # the leader keeps writing (a Pack's spec.secret flips, so its status does), and
        # then another holder takes the Lease
        scope = run.scopes[0]
        run.meddlers.append(asyncio.create_task(_flip_secret(run.w, scope)))
        await asyncio.sleep(1.0)
        adapter.stolen[run.scn] = await _steal(run.w, scope.namespace)


async def at_heal(run: Run) -> None:
    """The counters that must be read while the fault still holds; then, for the hold
    of ``list-hang``, its full length."""
    adapter = ADAPTERS[run.scn.operator]
    assert isinstance(adapter, PackAdapter)
    adapter.held[run.scn] = {r.id for r in run.rules}
    if run.scn.fault == "forbid-list":
        stuck: list[str] = []
        for scope in run.scopes:
            wrong, seen = await _forbidden_stuck(run.w, scope)
            stuck += wrong
            run.outcome.notes += seen
        run.outcome.stuck_reads = len(stuck)
        run.outcome.notes += stuck[:5]
    elif run.scn.fault == "lease-steal":
        for task in run.meddlers:
            task.cancel()
        await asyncio.gather(*run.meddlers, return_exceptions=True)
        run.meddlers.clear()
        for scope in run.scopes:  # the secret as the workload last wrote it
            secret = scope.desired[FLIPPED]["secret"]
            await run.w.user.patch(
                pack.PACKS, FLIPPED, {"spec": {"secret": secret}}, scope.namespace
            )
    elif run.scn.fault == "recreate-lag":
        await _relag(run, adapter)
    elif run.scn.fault in HOLDS:
        held = time.monotonic() - adapter.hang_started.pop(run.scn, time.monotonic())
        await asyncio.sleep(max(0.0, HOLDS[run.scn.fault] - held))


async def _relag(run: Run, adapter: PackAdapter) -> None:
    """``recreate-lag``'s second half: once the seals are replaced (as the apiserver has
    them), the hung watches are let go; the one that resumes breaks just after the old
    seal's delete of :data:`RELAG_PACK`, and every reopened watch waits ``RELAG_S``. Then
    the lag lifts (the runner removes nothing it has not been given)."""
    px, ops = run.w.proxy, run.clients
    deadline = time.monotonic() + RESEAL_WAIT_S
    for scope in run.scopes:
        final = {n: r for n, (_, r) in REPLICAS.items()}
        while any([await _sealed(run.w, n, scope.namespace) != r for n, r in final.items()]):
            if time.monotonic() > deadline:
                run.outcome.notes.append("recreate-lag: the seals were not replaced in time")
                break
            await asyncio.sleep(0.2)
    lag: list[Rule] = []
    for scope in run.scopes:
        cut = CutWatch(after_events=1, types=("DELETED",), name=pack.seal_name(RELAG_PACK))
        # the delay first: the log names the last rule that acted on a request, the cut
        late = px.add_rule(
            Delay(RELAG_S),
            client=ops,
            verb="watch",
            resource="configmaps",
            namespace=scope.namespace,
        )
        narrowed = px.add_rule(
            cut, client=ops, verb="watch", resource="configmaps", namespace=scope.namespace
        )
        adapter.cut_rule[run.scn] = narrowed.id
        lag += [late, narrowed]
    for rule in run.rules:  # the hung watches go (reset): the reflector watches again
        px.remove_rule(rule)
    run.rules.clear()
    # once the watch has broken after the old seal's delete, the user touches the Pack
    # (an annotation: no new generation), so a reconcile reads the seal in the window
    # whatever else brings one (a reconcile held in a wait from before the cut, its
    # informer blind, ends in the window and runs again for this event)
    try:
        await px.log.wait_for(
            lambda e: e.rule in {r.id for r in lag} and e.ended == "cut", timeout=2 * RELAG_S
        )
    except TimeoutError:
        pass  # judged: faults_missed
    else:
        # after the operator has taken in the delete (the stream's end reached the proxy's
        # log first): a read begun before it waits on the store either way
        await asyncio.sleep(NUDGE_AFTER_S)
        for scope in run.scopes:
            nudge = {"metadata": {"annotations": {NUDGE: str(time.time())}}}
            await run.w.user.patch(pack.PACKS, RELAG_PACK, nudge, scope.namespace)
    # the second watch (late), and the reads it lets through
    await asyncio.sleep(RELAG_S + 1.0)
    for rule in lag:
        px.remove_rule(rule)


async def _forbidden_stuck(world: World, scope: Scope) -> tuple[list[str], list[str]]:
    """What is wrong while Secrets cannot be listed: Packs that name none not reconciled
    (waited for up to ``FORBID_WAIT_S``), Packs that name one without an error naming the
    kind and the refused verb; and the error as one Pack's status shows it."""
    deadline = time.monotonic() + FORBID_WAIT_S
    while True:
        wrong: list[str] = []
        errors: list[str] = []
        for name in REPLICAS:
            obj = await _get(world, pack.PACKS, name, scope.namespace)
            status = (obj or {}).get("status") or {}
            if obj is None:
                wrong.append(f"pack {name}: missing")
            elif name not in WITH_SECRET:
                if status.get("observedGeneration") != obj["metadata"]["generation"]:
                    wrong.append(
                        f"pack {name} (no Secret) not reconciled while Secrets were refused: "
                        f"observedGeneration {status.get('observedGeneration')}"
                    )
            else:
                error = str(status.get("secretError") or "")
                errors.append(f"pack {name}: status.secretError {error!r}")
                if "Secret" not in error or "list" not in error:
                    wrong.append(f"pack {name}: no error naming the kind and verb: {error!r}")
        if not wrong or time.monotonic() > deadline:
            return wrong, errors[:1]
        await asyncio.sleep(0.5)


#: The Pack whose ``spec.secret`` flips while the Lease is stolen (its status follows).
FLIPPED = "p-2"
#: The holder that takes the Lease, and for how long it claims it.
INTRUDER = "faults-intruder"
INTRUDER_LEASE_S = 3


async def _flip_secret(world: World, scope: Scope) -> None:
    """Keep the leader writing: ``spec.secret`` of one Pack flips between a Secret that
    exists and one that does not, so every reconcile of it writes ``status.secretFound``."""
    names = ("absent", "present")
    n = 0
    while True:
        n += 1
        body = {"spec": {"secret": names[n % 2]}}
        await world.user.patch(pack.PACKS, FLIPPED, body, scope.namespace)
        await asyncio.sleep(0.1)


async def _steal(world: World, namespace: str) -> float:
    """Another holder takes the Lease (as a replica whose clock ran ahead would); returns
    when, on the proxy log's clock."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
    body = {
        "spec": {
            "holderIdentity": INTRUDER,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseDurationSeconds": INTRUDER_LEASE_S,
        }
    }
    await world.admin.patch(LEASES, pack.LEASE, body, namespace)
    return time.monotonic()


def writes_after_stepdown(entries: list[LogEntry], leader: str, stolen: float) -> list[str]:
    """The old leader's object writes sent after it read the stolen Lease (its first
    Lease request after the theft, answered) and before it took the Lease again: it
    must stop at once, not write on until its renew deadline."""
    mine = sorted((e for e in entries if e.client == leader), key=lambda e: e.started)
    seen = next(
        (
            e.finished
            for e in mine
            if e.resource == "leases" and e.started > stolen and e.finished is not None
        ),
        None,
    )
    if seen is None:
        return [f"old leader {leader} never read the Lease after it was taken"]
    again = next(
        (
            e.started
            for e in mine
            if e.resource == "leases"
            and e.started > seen
            and e.verb == "update"
            and e.status == 200
        ),
        float("inf"),
    )
    return [
        f"old leader {leader} sent {e.verb} {e.resource}/{e.name} {e.started - seen:.2f}s after "
        "it read the Lease held by another"
        for e in mine
        if seen < e.started < again
        and e.verb in ("create", "update", "patch", "delete")
        and (e.resource or "") not in NOT_OBJECT_WRITES
    ]


def list_storms(entries: list[LogEntry], clients: set[str]) -> list[str]:
    """Reflector LIST attempts of ConfigMaps that started as soon as the previous one
    timed out: the reflector relisting at once (it must back off, at least
    ``backoff_initial``). The client sends a timed-out GET up to ``_READ_TRIES`` times
    itself, short pauses apart, so an informer's hung LISTs come in groups of that many:
    the gap that counts is from the last of a group to the first of the next."""
    by_informer: dict[tuple[str, str, bool], list[LogEntry]] = defaultdict(list)
    for e in entries:
        if e.client in clients and e.verb == "list" and e.resource == "configmaps":
            by_informer[(e.client, e.namespace or "", "labelSelector" in e.query)].append(e)
    out: list[str] = []
    for (client, ns, _), lists in by_informer.items():
        hung = sorted((e for e in lists if e.status == 0), key=lambda e: e.started)
        for i in range(_READ_TRIES, len(hung), _READ_TRIES):
            gap = hung[i].started - hung[i - 1].started
            if gap < LIST_HANG_TIMEOUT + _AT_ONCE:
                where = f" in {ns}" if ns else ""
                out.append(
                    f"{client} listed configmaps{where} again {gap:.2f}s after its "
                    f"previous LIST was sent (request timeout {LIST_HANG_TIMEOUT:g}s)"
                )
    return out


def judge(run: Run) -> None:
    adapter = ADAPTERS[run.scn.operator]
    assert isinstance(adapter, PackAdapter)
    stale: list[str] = []
    for scope in run.scopes:
        stale += adapter.stale_reads(run.w, scope)
    run.outcome.stale_reads = len(stale)
    run.outcome.notes += stale[:5]
    for scope in run.scopes:
        made = adapter.creates_deletes(run.w, scope)
        run.outcome.notes.append(
            "children created/deleted per Pack (the apiserver's watch): "
            + ", ".join(f"{k[2]} {c.creates}/{c.deletes}" for k, c in sorted(made.items()))
        )
    held = adapter.held.pop(run.scn, set())  # every scenario's: none is left behind
    if run.scn.fault == "child-lag":
        # what the fault did, from the proxy's log
        entries = run.w.proxy.log.entries()
        n_held = sum(e.rule in held for e in entries)
        live = sum(
            e.client in run.clients and e.verb == "get" and e.resource == "configmaps"
            for e in entries
        )
        run.outcome.notes.append(
            f"child-lag: {n_held} cluster-wide LISTs/watches held; {live} live reads of "
            "children (the cache's fallback once its informer stayed behind our write)"
        )
    if run.scn.fault == "recreate-lag":
        rule = adapter.cut_rule.pop(run.scn, None)
        cut = [
            e
            for e in run.w.proxy.log.entries(verb="watch", resource="configmaps")
            if e.rule == rule and e.ended == "cut"
        ]
        run.outcome.notes.append(
            f"recreate-lag: {len(cut)} watches broken just after {RELAG_PACK}'s old seal's delete"
        )
        if not cut:  # the run proved nothing: not a pass
            run.outcome.faults_missed += 1
    if run.scn.fault == "lease-steal" and run.leader is not None:
        stolen = adapter.stolen.pop(run.scn, float("inf"))
        entries = run.w.proxy.log.entries()
        late = writes_after_stepdown(entries, run.leader.client, stolen)
        run.outcome.writes_after_stepdown = len(late)
        run.outcome.notes += late[:5]
        before = [
            e
            for e in entries
            if e.client == run.leader.client
            and e.verb in ("create", "update", "patch", "delete")
            and (e.resource or "") not in NOT_OBJECT_WRITES
            and e.started <= stolen
        ]
        run.outcome.notes.append(
            f"lease-steal: the old leader made {len(before)} object writes before the Lease "
            f"was taken, {len(late)} after it read the Lease held by {INTRUDER}"
        )
    if run.scn.fault == "list-hang":
        storms = list_storms(run.w.proxy.log.entries(), run.clients)
        run.outcome.list_storms = len(storms)
        lists = [
            e
            for e in run.w.proxy.log.entries(verb="list", resource="configmaps")
            if e.client in run.clients
        ]
        run.outcome.notes.append(f"list-hang: {len(lists)} LISTs of configmaps by the operator")
        run.outcome.notes += storms[:5]
