from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path

import pytest

from nodepool_operator.cloud import (
    CapacityUnavailable,
    CloudProvider,
    CreateRequest,
    FailNext,
    FailRandomly,
    FaultPlan,
    GiB,
    IdempotencyMismatch,
    InstanceNotFound,
    InvalidRequest,
    QuotaExceeded,
    SimulatedCloud,
    TransientCloudError,
)

T0 = 1_000_000.0


class FakeClock:
    """A settable clock, so boot and list lag are exact."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def request(
    name: str = "pool-0", token: str = "tok-0", instance_type: str = "m5.large", **tags: str
) -> CreateRequest:
    return CreateRequest(
        name=name,
        instance_type=instance_type,
        image="img-1",
        tags=tags or {"pool": "a"},
        idempotency_token=token,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cloud.db"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cloud(db: Path, clock: FakeClock) -> SimulatedCloud:
    return SimulatedCloud(db, clock=clock)


async def run_python(code: str, db: Path) -> str:
    """Run ``code`` in a fresh interpreter with ``DB`` bound to the cloud file; its stdout."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        f"from pathlib import Path\nDB = Path({str(db)!r})\n" + textwrap.dedent(code),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def test_simulated_cloud_is_a_cloud_provider(cloud: SimulatedCloud) -> None:
    provider: CloudProvider = cloud  # checked by mypy
    assert provider is cloud


async def test_same_token_twice_makes_one_instance(cloud: SimulatedCloud) -> None:
    first = await cloud.create(request())
    second = await cloud.create(request())

    assert second.id == first.id
    assert cloud.calls()["create"] == 2
    assert cloud.duplicates() == 0
    assert len(cloud.snapshot().instances) == 1


async def test_same_name_with_new_token_is_a_duplicate(cloud: SimulatedCloud) -> None:
    await cloud.create(request(token="a"))
    await cloud.create(request(token="b"))

    assert cloud.duplicates() == 1


async def test_token_reused_with_other_arguments_is_rejected(cloud: SimulatedCloud) -> None:
    await cloud.create(request())

    with pytest.raises(IdempotencyMismatch):
        await cloud.create(request(instance_type="m5.xlarge"))


async def test_token_of_a_terminated_instance_returns_it_terminated(
    cloud: SimulatedCloud,
) -> None:
    inst = await cloud.create(request())
    await cloud.delete(inst.id)

    again = await cloud.create(request())

    assert again.id == inst.id
    assert again.state == "terminated"


async def test_create_without_token_is_refused(cloud: SimulatedCloud) -> None:
    with pytest.raises(InvalidRequest):
        await cloud.create(request(token=""))


async def test_ids_and_addresses(cloud: SimulatedCloud, db: Path) -> None:
    inst = await cloud.create(request())

    assert re.fullmatch(r"i-[0-9a-f]{17}", inst.id)
    assert re.fullmatch(r"10\.\d+\.\d+\.\d+", inst.private_ip)
    assert inst.public_ip is not None
    assert inst.public_ip.startswith("203.0.113.")
    again = await SimulatedCloud(db).describe(inst.id)
    assert (again.private_ip, again.public_ip) == (inst.private_ip, inst.public_ip)


async def test_state_survives_a_new_object(cloud: SimulatedCloud, db: Path) -> None:
    inst = await cloud.create(request())

    reopened = SimulatedCloud(db)

    assert (await reopened.describe(inst.id)).name == "pool-0"
    assert (await reopened.create(request())).id == inst.id
    assert reopened.calls()["create"] == 2


async def test_state_survives_another_process(db: Path) -> None:
    instance_id = await run_python(
        """
        import asyncio
        from nodepool_operator.cloud import CreateRequest, SimulatedCloud
        req = CreateRequest(name="pool-0", instance_type="m5.large", image="img",
                            tags={"pool": "a"}, idempotency_token="tok")
        print(asyncio.run(SimulatedCloud(DB).create(req)).id)
        """,
        db,
    )

    cloud = SimulatedCloud(db)
    assert [i.id for i in await cloud.list({"pool": "a"})] == [instance_id.strip()]
    assert cloud.calls()["create"] == 1


async def test_faults_injected_by_another_process_fire_here(db: Path) -> None:
    cloud = SimulatedCloud(db)
    inst = await cloud.create(request())

    await run_python(
        """
        from nodepool_operator.cloud import SimulatedCloud, TransientCloudError
        SimulatedCloud(DB).inject("describe", TransientCloudError, times=1)
        """,
        db,
    )

    with pytest.raises(TransientCloudError):
        await cloud.describe(inst.id)
    assert (await cloud.describe(inst.id)).id == inst.id


async def test_concurrent_creates_from_two_processes_make_one_instance(db: Path) -> None:
    SimulatedCloud(db)  # schema first, so the race is on the create alone
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        from pathlib import Path
        from nodepool_operator.cloud import CreateRequest, SimulatedCloud
        cloud = SimulatedCloud(Path({str(db)!r}))
        req = CreateRequest(name="pool-0", instance_type="m5.large", image="img",
                            tags={{"pool": "a"}}, idempotency_token="tok")
        print("ready", flush=True)
        sys.stdin.readline()  # both start together

        async def main():
            return await asyncio.gather(*(cloud.create(req) for _ in range(20)))

        print(" ".join(sorted({{i.id for i in asyncio.run(main())}})))
        """
    )
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), timeout=60) == b"ready\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
    outputs = [await asyncio.wait_for(p.communicate(), timeout=60) for p in procs]

    ids = {out.decode().strip() for out, _ in outputs}
    cloud = SimulatedCloud(db)
    assert len(ids) == 1
    assert len(cloud.snapshot().instances) == 1
    assert cloud.calls()["create"] == 40


async def test_pending_becomes_running_exactly_after_boot(db: Path, clock: FakeClock) -> None:
    cloud = SimulatedCloud(db, boot_seconds=5.0, clock=clock)
    inst = await cloud.create(request())
    assert (inst.state, inst.created_at, inst.launched_at) == ("pending", T0, None)

    clock.now = T0 + 4.999
    assert (await cloud.describe(inst.id)).state == "pending"

    clock.now = T0 + 5.0
    booted = await cloud.describe(inst.id)
    assert (booted.state, booted.launched_at) == ("running", T0 + 5.0)


async def test_the_snapshot_says_when_the_next_boot_ends(db: Path, clock: FakeClock) -> None:
    """What the simulated kubelets look again at: the soonest boot end of a pending VM."""
    cloud = SimulatedCloud(db, boot_seconds=5.0, clock=clock)
    assert cloud.snapshot().next_launch_in is None
    await cloud.create(request("a", token="t-a"))
    clock.now = T0 + 2
    await cloud.create(request("b", token="t-b"))
    clock.now = T0 + 3
    assert cloud.snapshot().next_launch_in == pytest.approx(2.0)  # a's, of a and b
    clock.now = T0 + 5
    assert cloud.snapshot().next_launch_in == pytest.approx(2.0)  # a runs: b's
    clock.now = T0 + 7
    assert cloud.snapshot().next_launch_in is None


async def test_stop_and_start_reboot(db: Path, clock: FakeClock) -> None:
    cloud = SimulatedCloud(db, boot_seconds=2.0, clock=clock)
    inst = await cloud.create(request())
    clock.now = T0 + 10

    cloud.stop_behind_the_back(inst.id)
    stopped = await cloud.describe(inst.id)
    assert (stopped.state, stopped.public_ip) == ("stopped", None)

    await cloud.start(inst.id)
    assert (await cloud.describe(inst.id)).state == "pending"
    clock.now = T0 + 12
    assert (await cloud.describe(inst.id)).launched_at == T0 + 12


async def test_start_and_stop_refuse_terminated(cloud: SimulatedCloud) -> None:
    inst = await cloud.create(request())
    cloud.terminate_behind_the_back(inst.id)

    with pytest.raises(InvalidRequest):
        await cloud.start(inst.id)
    with pytest.raises(InvalidRequest):
        await cloud.stop(inst.id)


async def test_quota(db: Path) -> None:
    cloud = SimulatedCloud(db, quota=2)
    first = await cloud.create(request("p-0", "t0"))
    await cloud.create(request("p-1", "t1"))

    with pytest.raises(QuotaExceeded) as caught:
        await cloud.create(request("p-2", "t2"))
    assert not caught.value.retryable
    assert caught.value.retry_after == 300.0
    assert (await cloud.create(request("p-0", "t0"))).id == first.id  # a repeat is no new VM

    await cloud.delete(first.id)
    await cloud.create(request("p-2", "t2"))
    assert SimulatedCloud(db).snapshot().duplicates == 0


async def test_capacity_per_instance_type(db: Path) -> None:
    cloud = SimulatedCloud(db, faults=FaultPlan(capacity={"m5.large": 1}))
    await cloud.create(request("p-0", "t0"))

    with pytest.raises(CapacityUnavailable) as caught:
        await cloud.create(request("p-1", "t1"))
    assert caught.value.retryable
    assert caught.value.instance_type == "m5.large"
    await cloud.create(request("p-1", "t2", instance_type="m5.xlarge"))


async def test_unknown_instance_type_is_invalid(cloud: SimulatedCloud) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await cloud.create(request(instance_type="m9.huge"))

    assert not caught.value.retryable
    assert cloud.snapshot().instances == ()


async def test_injected_faults_fire_exactly_n_times(cloud: SimulatedCloud) -> None:
    cloud.inject("create", TransientCloudError, times=2)

    for _ in range(2):
        with pytest.raises(TransientCloudError):
            await cloud.create(request())
    await cloud.create(request())
    await cloud.create(request())

    assert cloud.calls()["create"] == 4
    assert len(cloud.snapshot().instances) == 1


async def test_fault_plan_from_constructor(db: Path) -> None:
    plan = FaultPlan(fail_next=[FailNext(method="list", error=QuotaExceeded, times=1)])
    cloud = SimulatedCloud(db, faults=plan)

    with pytest.raises(QuotaExceeded):
        await cloud.list({})
    assert await cloud.list({}) == []


async def test_applied_fault_creates_the_vm_but_loses_the_answer(cloud: SimulatedCloud) -> None:
    cloud.inject("create", TransientCloudError, applied=True)

    with pytest.raises(TransientCloudError):
        await cloud.create(request())
    assert len(cloud.snapshot().instances) == 1

    retried = await cloud.create(request())
    assert [i.id for i in cloud.snapshot().instances] == [retried.id]


async def test_clear_faults(cloud: SimulatedCloud) -> None:
    cloud.inject("list", times=3)
    cloud.clear_faults()

    assert await cloud.list({}) == []


async def outcomes(cloud: SimulatedCloud, n: int) -> list[bool]:
    failed = []
    for _ in range(n):
        try:
            await cloud.instance_types()
        except TransientCloudError:
            failed.append(True)
        else:
            failed.append(False)
    return failed


async def test_probability_faults_replay_with_a_seed(tmp_path: Path) -> None:
    def plan(seed: int) -> FaultPlan:
        return FaultPlan(
            fail_randomly=[FailRandomly(method="instance_types", probability=0.5)], seed=seed
        )

    a = await outcomes(SimulatedCloud(tmp_path / "a.db", faults=plan(7)), 40)
    b = await outcomes(SimulatedCloud(tmp_path / "b.db", faults=plan(7)), 40)
    c = await outcomes(SimulatedCloud(tmp_path / "c.db", faults=plan(8)), 40)

    assert a == b
    assert a != c
    assert 5 < sum(a) < 35


async def test_list_by_tags(cloud: SimulatedCloud) -> None:
    a0 = await cloud.create(request("a-0", "t0", pool="a", role="w"))
    a1 = await cloud.create(request("a-1", "t1", pool="a", role="w"))
    await cloud.create(request("b-0", "t2", pool="b", role="w"))
    await cloud.delete(a1.id)
    leaked = cloud.leak("a-9", {"pool": "a"})

    assert [i.id for i in await cloud.list({"pool": "a"})] == [a0.id, leaked.id]
    assert [i.id for i in await cloud.list({"pool": "a", "role": "w"})] == [a0.id]
    assert len(await cloud.list({})) == 3
    assert await cloud.list({"pool": "c"}) == []


async def test_list_lag_hides_new_instances(db: Path, clock: FakeClock) -> None:
    cloud = SimulatedCloud(db, clock=clock, faults=FaultPlan(list_lag_seconds=10))
    inst = await cloud.create(request())

    assert await cloud.list({}) == []
    assert (await cloud.describe(inst.id)).id == inst.id
    clock.now = T0 + 10
    assert [i.id for i in await cloud.list({})] == [inst.id]


async def test_delete_is_idempotent(cloud: SimulatedCloud) -> None:
    inst = await cloud.create(request())

    await cloud.delete(inst.id)
    await cloud.delete(inst.id)
    await cloud.delete("i-00000000000000000")

    assert (await cloud.describe(inst.id)).state == "terminated"
    assert await cloud.list({}) == []
    assert cloud.calls()["delete"] == 3


async def test_describe_unknown_raises_not_found(cloud: SimulatedCloud) -> None:
    with pytest.raises(InstanceNotFound) as caught:
        await cloud.describe("i-00000000000000000")

    assert caught.value.instance_id == "i-00000000000000000"


async def test_behind_the_back_changes_are_not_counted(cloud: SimulatedCloud) -> None:
    inst = await cloud.create(request())
    cloud.reset_calls()

    cloud.terminate_behind_the_back(inst.id)
    cloud.leak("pool-0", {"pool": "a"})

    assert sum(cloud.calls().values()) == 0
    with pytest.raises(InstanceNotFound):
        cloud.terminate_behind_the_back("i-00000000000000000")


async def test_catalogue(cloud: SimulatedCloud) -> None:
    types = {t.name: t for t in await cloud.instance_types()}

    assert (types["m5.large"].cpu_cores, types["m5.large"].memory_bytes) == (2, 8 * GiB)
    assert (types["r5.4xlarge"].cpu_cores, types["r5.4xlarge"].memory_bytes) == (16, 128 * GiB)
    assert types["mem96.large"].memory_bytes == 96 * GiB
    assert types["mem96.large"].memory_bytes // (28 * GiB) == 3


def test_snapshot_to_json(cloud: SimulatedCloud) -> None:
    cloud.leak("x", {})

    report = cloud.snapshot().to_json()

    assert report["live"] == 1
    assert report["by_state"] == {"pending": 1}


def test_bad_fault_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        FailNext(method="reboot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot inject"):
        FailNext(method="create", error=RuntimeError)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="probability"):
        FailRandomly(method="create", probability=1.5)
