"""A short walk-through of the local control plane (what ``make demo`` ran before the operator).

Starts etcd, kube-apiserver and kube-scheduler, shows that generation moves
only with spec while resourceVersion moves with every write, creates a pod
that fits no node, then a node that fits it, and watches the scheduler bind it.
"""

from __future__ import annotations

import json
import time

from kubeloop.envtest import ControlPlane, ControlPlaneOptions


def main() -> None:
    with ControlPlane(ControlPlaneOptions(scheduler=True)) as cp:
        rest = cp.rest()
        print(f"control plane up: {cp.server} (kubeconfig {cp.kubeconfig})")
        ns = cp.create_namespace("demo")
        cm = rest.post(
            f"/api/v1/namespaces/{ns}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c"},
                "data": {"a": "1"},
            },
        )
        print(f"ConfigMap created at resourceVersion {cm['metadata']['resourceVersion']}")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "big"},
            "spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "resources": {"requests": {"memory": "28Gi"}}}
                ]
            },
        }
        rest.post(f"/api/v1/namespaces/{ns}/pods", pod)
        cp.create_node("small", memory="8Gi")
        message = ""
        for _ in range(100):
            got = rest.get(f"/api/v1/namespaces/{ns}/pods/big")
            conds = {c["type"]: c for c in got.get("status", {}).get("conditions", [])}
            message = conds.get("PodScheduled", {}).get("message", "")
            if "Insufficient" in message:
                break
            time.sleep(0.2)
        print(f"pod 'big' (28Gi) is pending: {message}")
        cp.create_node("large", memory="96Gi")
        node = ""
        for _ in range(100):
            node = rest.get(f"/api/v1/namespaces/{ns}/pods/big")["spec"].get("nodeName", "")
            if node:
                break
            time.sleep(0.2)
        print(f"after adding a 96Gi node, the scheduler bound the pod to: {node}")
        print(json.dumps({"pending_message": message, "bound_to": node}))


if __name__ == "__main__":
    main()
