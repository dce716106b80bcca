"""The operator's admission decisions, pure: what is refused, with which message and field,
and which UPDATEs are not looked at (the apiserver-facing tests are in
tests/e2e/test_admission_webhook.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kubeloop import AdmissionRequest, Cause, UserInfo
from nodepool_operator.__main__ import _parser, main
from nodepool_operator.admission import (
    NODE_CLASS_REF_FIELD,
    POOL_REF_FIELD,
    PoolAdmission,
    decide_autoscaler,
    decide_nodepool,
)


def scaler(name: str, pool: str, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodePoolRef": {"name": pool}, "namespaces": ["a"]}}


def test_a_second_autoscaler_for_a_pool_is_denied_naming_the_pool_and_the_first() -> None:
    answer = decide_autoscaler("b", "web", [scaler("z", "web"), scaler("a", "web")])
    assert not answer.allowed
    assert answer.code == 403
    # the first by name of the rivals, so the message is stable across calls
    assert answer.message.startswith("NodePool web is already scaled by Autoscaler a:")
    assert answer.causes == (Cause("FieldValueDuplicate", answer.message, POOL_REF_FIELD),)
    assert POOL_REF_FIELD == "spec.nodePoolRef.name"


def test_other_pools_itself_and_deleting_autoscalers_do_not_count() -> None:
    others = [scaler("b", "web"), scaler("c", "db"), scaler("d", "web", deleting=True)]
    assert decide_autoscaler("b", "web", others).allowed
    assert decide_autoscaler("e", "batch", others).allowed
    assert not decide_autoscaler("e", "web", others).allowed


def test_a_missing_node_class_is_denied_naming_the_field_and_the_class() -> None:
    answer = decide_nodepool("gpu", exists=False)
    assert not answer.allowed
    assert answer.message.startswith("spec.nodeClassRef.name: AwsNodeClass gpu not found")
    assert [(c.reason, c.field) for c in answer.causes] == [
        ("FieldValueNotFound", NODE_CLASS_REF_FIELD)
    ]
    assert decide_nodepool("gpu", exists=True).allowed


class Recorder:
    """A client whose reads are counted: the handlers must not read for unchanged refs."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def list(self, res: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(f"list {res.plural}")
        # every Autoscaler counts, not only the operator's shard
        assert not args
        assert not kwargs.get("label_selector")
        return {"items": [scaler("first", "web")]}

    async def get(self, res: Any, name: str, *args: Any) -> dict[str, Any]:
        self.calls.append(f"get {res.plural} {name}")
        return {}


def request(op: str, obj: dict[str, Any] | None, old: dict[str, Any] | None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        operation=op,
        kind={},
        resource={},
        name="second",
        namespace=None,
        object=obj,
        old_object=old,
        user=UserInfo(),
    )


def test_updates_are_checked_only_when_the_reference_moves() -> None:
    client = Recorder()
    admission = PoolAdmission(client)  # type: ignore[arg-type]

    def autoscaler(op: str, new: str, old: str | None) -> bool:
        old_obj = None if old is None else scaler("second", old)
        answer = asyncio.run(
            admission.validate_autoscaler(request(op, scaler("second", new), old_obj))
        )
        return answer is None or answer.allowed

    assert not autoscaler("CREATE", "web", None)
    assert autoscaler("UPDATE", "web", "web")  # e.g. a finalizer or namespaces edit
    assert not autoscaler("UPDATE", "web", "db")
    assert client.calls == ["list autoscalers", "list autoscalers"]

    client.calls.clear()

    def pool(ref: str | None) -> dict[str, Any]:
        return {"spec": {"nodeClassRef": {"name": ref}} if ref else {}}

    for op, new, old in [("CREATE", "a", None), ("UPDATE", "a", "a"), ("UPDATE", "b", "a")]:
        asyncio.run(admission.validate_nodepool(request(op, pool(new), pool(old))))
    asyncio.run(admission.validate_nodepool(request("CREATE", pool(None), None)))
    assert client.calls == ["get awsnodeclasses a", "get awsnodeclasses b"]


def test_run_flags_turn_the_webhook_on() -> None:
    args = _parser().parse_args(["run"])
    assert args.webhook_port is None
    args = _parser().parse_args(["run", "--webhook-port", "9443", "--webhook-cert-dir", "/c"])
    assert (args.webhook_port, args.webhook_cert_dir) == (9443, Path("/c"))


@pytest.mark.parametrize("port", ["0", "70000", "x"])
def test_a_bad_webhook_port_is_a_usage_error(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["run", "--webhook-port", port])
    assert exit_.value.code == 2
    assert "--webhook-port" in capsys.readouterr().err


def test_run_with_the_webhook_and_no_certificate_exits_2_naming_the_file(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Before anything reconciles (no apiserver is reached: none listens at the address)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    code = main(
        [
            "run",
            f"--kubeconfig={kubeconfig}",
            "--no-simulated-kubelets",
            f"--cloud-state={tmp_path / 'cloud.sqlite'}",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            "--webhook-port=1",
            f"--webhook-cert-dir={tmp_path / 'certs'}",
        ]
    )
    assert code == 2
    err = capfd.readouterr().err
    assert f"no serving certificate at {tmp_path / 'certs' / 'tls.crt'}" in err
    assert "Traceback" not in err
