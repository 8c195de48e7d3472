"""Reading kubelet's List answer: who holds which device, and the held ids the daemon's holds use."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hcs_deviceplugin.api.podresources.v1 import api_wire as pr
from hcs_deviceplugin.kubelet.podresources import DeviceAllocation, allocations_of, held_devices

names = st.sampled_from(["a", "b", "trainer", "infer"])
resources = st.sampled_from(["gpu.deckhouse.io/a", "gpu.deckhouse.io/b", "nvidia.com/gpu"])
devices = st.lists(st.sampled_from(["GPU-0", "GPU-1", "GPU-1::0", "GPU-1::1", "npu-7"]), max_size=3)
container_devices = st.builds(
    lambda resource, ids: pr.ContainerDevices(resource_name=resource, device_ids=ids), resources, devices
)
containers = st.builds(
    lambda name, devs: pr.ContainerResources(name=name, devices=devs),
    names,
    st.lists(container_devices, max_size=3),
)
pods = st.builds(
    lambda name, namespace, cs: pr.PodResources(name=name, namespace=namespace, containers=cs),
    names,
    st.sampled_from(["default", "ml"]),
    st.lists(containers, max_size=3),
)
answers = st.builds(lambda ps: pr.ListPodResourcesResponse(pod_resources=ps), st.lists(pods, max_size=4))


@given(answers)
def test_every_listed_device_is_attributed_once_to_its_pod_and_container(
    answer: pr.ListPodResourcesResponse,
) -> None:
    allocations = allocations_of(answer)
    assert list(allocations) == sorted(set(allocations), key=DeviceAllocation.sort_key)
    expected = {
        DeviceAllocation(pod.namespace, pod.name, c.name, d.resource_name, device)
        for pod in answer.pod_resources
        for c in pod.containers
        for d in c.devices
        for device in d.device_ids
    }
    assert set(allocations) == expected
    held: dict[str, set[str]] = {}
    for pod in answer.pod_resources:
        for c in pod.containers:
            for d in c.devices:
                held.setdefault(d.resource_name, set()).update(d.device_ids)
    assert held_devices(allocations) == {r: frozenset(ids) for r, ids in held.items() if ids}


def test_devices_split_by_numa_node_join_under_one_container() -> None:
    """Kubelet lists one ContainerDevices per (resource, NUMA node): both halves belong to the container."""
    answer = pr.ListPodResourcesResponse(
        pod_resources=[
            pr.PodResources(
                name="trainer",
                namespace="ml",
                containers=[
                    pr.ContainerResources(
                        name="main",
                        devices=[
                            pr.ContainerDevices(resource_name="gpu.deckhouse.io/a", device_ids=["GPU-0"]),
                            pr.ContainerDevices(resource_name="gpu.deckhouse.io/a", device_ids=["GPU-1"]),
                        ],
                    )
                ],
            )
        ]
    )
    assert allocations_of(answer) == (
        DeviceAllocation("ml", "trainer", "main", "gpu.deckhouse.io/a", "GPU-0"),
        DeviceAllocation("ml", "trainer", "main", "gpu.deckhouse.io/a", "GPU-1"),
    )
    assert held_devices(allocations_of(answer)) == {"gpu.deckhouse.io/a": frozenset({"GPU-0", "GPU-1"})}
