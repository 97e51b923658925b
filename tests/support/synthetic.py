"""Synthetic stacks that exercise what the repo's own stack files may not: many labs, every GPU count, arm64, other
namespaces."""

from typing import Any

from tests.conftest import stack_values


def lab(instance_types: list[str], slices: int, max_gpus: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "instanceTypes": instance_types,
        "slicesPerGpu": slices,
        "maxGpus": max_gpus,
        "ami": "al2023@latest",
    } | extra


NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-a4c8c5467c74"
HUB: dict[str, Any] = {
    "host": "hub.example.edu",
    "loadBalancer": {
        "subnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002"],
        "certificateArn": "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
    },
    "auth": {"type": "github", "clientId": "Iv1.0123456789abcdef", "allowedOrganizations": ["example-org:teachers"]},
    # The hub's idle culler stops servers (on by default), so learners' files need a volume of their own: a hub with
    # homes: none is refused unless it stops no server itself.
    "homes": "perLearner",
}

SYNTHETIC: dict[str, dict[str, Any]] = {
    "mixed": stack_values(
        **{
            "gpulab:labs": {
                "solo": lab(["g4dn.xlarge"], 1),
                "one-four-eight": lab(["g5.xlarge", "g5.12xlarge", "g5.48xlarge"], 2, max_gpus=16),
                "graviton": lab(["g5g.xlarge", "g5g.16xlarge"], 7, capacityTypes=["spot", "on-demand"]),
                "both-arches": lab(["g4dn.xlarge", "g5g.xlarge"], 4, prepullImages=["ubuntu:24.04"]),
                "big": lab(
                    ["p4d.24xlarge"],
                    48,
                    max_gpus=8,
                    capacityTypes=["reserved"],
                    capacityReservationIds=["cr-0123456789abcdef0"],
                ),
            }
        }
    ),
    # MPS beside time-slicing and no sharing: only the MPS lab's nodes may run the MPS control daemon.
    "mps-beside-time-slicing": stack_values(
        **{
            "gpulab:labs": {
                "isolated": lab(["g4dn.xlarge", "g6.12xlarge"], 4, max_gpus=8, sharing="mps"),
                "turns": lab(["g4dn.xlarge"], 3),
                "solo": lab(["g6.xlarge"], 1),
            }
        }
    ),
    "no-sharing": stack_values(
        **{"gpulab:labs": {"a": lab(["g6.xlarge"], 1), "b": lab(["g6e.12xlarge"], 1, max_gpus=4)}}
    ),
    "no-labs": stack_values(**{"gpulab:labs": {}}),
    # Both CPU architectures in one lab, a whole four-GPU node within maxGpus, Karpenter in a namespace of its own.
    "own-namespace": stack_values(
        **{
            "gpulab:labs": {
                "mixed-arch": lab(["g4dn.xlarge", "g5g.xlarge"], 2),
                "four-gpu": lab(["g6.12xlarge"], 3, max_gpus=8),
            },
            "gpulab:karpenter": {"namespace": "karpenter"},
        }
    ),
    "classes": stack_values(
        **{
            "gpulab:labs": {
                "morning": lab(
                    ["g4dn.xlarge", "g4dn.12xlarge"],
                    3,
                    max_gpus=8,
                    classes=[
                        {"schedule": "10 0 * * mon", "duration": "1h30m", "warmup": "20m"},
                        {"schedule": "0 9 * * tue-fri", "duration": "2h", "warmSeats": 6},
                    ],
                ),
                "graviton": lab(["g5g.xlarge"], 4, classes=[{"schedule": "@daily", "duration": "45m"}]),
                "no-classes": lab(["g6.xlarge"], 2),
                # The longest lab name allowed: every object name derived from it must still fit.
                "l" * 63: lab(["g5.xlarge"], 1, classes=[{"schedule": "30 13 1-28 * *", "duration": "1h"}]),
            }
        }
    ),
    # JupyterHub over an MPS lab, a time-sliced lab with learner requests in decimal units and no internet (an exam), a
    # lab off the spawn page; GitHub sign-in (its client secret a Pulumi secret) and a home volume per learner.
    "jupyterhub": stack_values(
        **{
            "gpulab:labs": {
                "isolated": lab(
                    ["g4dn.xlarge", "g6.xlarge"], 4, max_gpus=8, sharing="mps", notebookImage=NOTEBOOK_IMAGE
                ),
                "turns": lab(
                    ["g4dn.xlarge"],
                    3,
                    notebookImage=NOTEBOOK_IMAGE,
                    learnerPod={"cpu": "1", "memory": "4G"},
                    internet=False,
                ),
                "staff-only": lab(["g5.xlarge"], 1, onSpawnPage=False),
            },
            "gpulab:jupyterhub": {**HUB, "culling": {"idleTimeout": "45m"}},
            "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        }
    ),
    # The GPU meter beside JupyterHub: a lab whose idle GPU seats are given back, and a lab on nodes without a DCGM host
    # engine (arm64), which dcgm-exporter leaves out. Learners launch the hub from a learning platform (LTI 1.3, no
    # client secret) over the internet (an internet-facing load balancer): the tests of that sign-in, the URIs
    # docs/jupyterhub.md gives and the tests of a public load balancer read it.
    "metrics": stack_values(
        **{
            "gpulab:labs": {
                "culled": lab(
                    ["g4dn.xlarge", "g6.12xlarge"], 3, max_gpus=8, notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="20m"
                ),
                "unmetered": lab(["g5g.xlarge"], 2, notebookImage=NOTEBOOK_IMAGE),
            },
            "gpulab:jupyterhub": {
                **HUB,
                "loadBalancer": {
                    **HUB["loadBalancer"],
                    "scheme": "internet-facing",
                    "subnetIds": ["subnet-0a1b2c3d4e5f60101", "subnet-0a1b2c3d4e5f60102"],
                },
                "auth": {
                    "type": "lti13",
                    "clientIds": ["10000000000001"],
                    "issuer": "https://lms.example.edu",
                    "authorizeUrl": "https://lms.example.edu/api/lti/authorize_redirect",
                    "jwksEndpoint": "https://lms.example.edu/api/lti/security/jwks",
                },
            },
            "gpulab:metrics": {"namespace": "meter", "idleUtilisationPercent": 10, "idleAfter": "45m"},
        }
    ),
    # JupyterHub signing in with OpenID Connect (its client secret a Pulumi secret), in a namespace of its own, culling
    # at the shortest idle timeout and not at the default interval.
    "jupyterhub-oidc": stack_values(
        **{
            "gpulab:labs": {"course": lab(["g6.xlarge"], 2, notebookImage=NOTEBOOK_IMAGE)},
            "gpulab:jupyterhub": {
                **HUB,
                "namespace": "learners",
                "culling": {"idleTimeout": "1m", "every": "5m"},
                "auth": {
                    "type": "oidc",
                    "clientId": "gpulab-hub",
                    "authorizeUrl": "https://idp.example.edu/realms/lab/protocol/openid-connect/auth",
                    "tokenUrl": "https://idp.example.edu/realms/lab/protocol/openid-connect/token",
                    "userdataUrl": "https://idp.example.edu/realms/lab/protocol/openid-connect/userinfo",
                    "allowedGroups": ["gpu-learners"],
                },
            },
            "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        }
    ),
    # Karpenter and the device plugin outside their default namespaces, a smoke workload, two system instance types.
    "own-namespaces": stack_values(
        **{
            "gpulab:labs": {"smoke": lab(["g6.xlarge"], 2, smokeTest=True)},
            "gpulab:karpenter": {"namespace": "karpenter"},
            "gpulab:nvidiaDevicePlugin": {"namespace": "gpu-plugins"},
        }
    ),
}

# The planner's own stack (tests/test_planner.py), which its exact counts are for; not among SYNTHETIC, whose stacks
# every chart test renders. Small requests (far below a node's share) make a buffer that forgets to request its slice
# pack many warm copies on one node: its class lab would then warm too few nodes.
PLANNER_STACK = stack_values(
    **{
        "gpulab:labs": {
            "single": lab(["g4dn.xlarge"], 3, max_gpus=4),
            "two-types": lab(["g4dn.xlarge", "g4dn.12xlarge"], 2, max_gpus=8),
            "mixed-arch-spot": lab(["g4dn.xlarge", "g5g.xlarge"], 4, capacityTypes=["spot", "on-demand"]),
            "mps": lab(["g6.xlarge"], 4, sharing="mps"),
            "spot-only": lab(["g5.xlarge"], 2, max_gpus=3, capacityTypes=["spot"]),
            "classy": lab(
                ["g4dn.xlarge"],
                3,
                max_gpus=4,
                learnerPod={"cpu": "500m", "memory": "1Gi"},
                classes=[
                    {"schedule": "0 9 * * mon-fri", "duration": "1h", "warmSeats": 5},
                    {"schedule": "0 14 * * *", "duration": "2h"},
                ],
            ),
            # kubelet maxPods below the ENI-limited 29: Karpenter's kube-reserved still counts 29 pods.
            "max-pods": lab(["g4dn.xlarge"], 3, max_gpus=4, maxPods=20),
            # Its smoke workload (slicesPerGpu + 1 pods of one slice each) holds 3 of its 6 seats while it runs.
            "smoke": lab(["g6.xlarge"], 2, max_gpus=3, smokeTest=True),
        }
    }
)


# Classes in the five zones of the year-long proof (tests/test_class_year.py), each with a term across its zone's
# changes of 2027 (skipping the class day after each change, and another) and a class all year: Berlin through
# gpulab:timeZone, New York at 20:00 (01:00 UTC the day after in winter), Sydney in the southern summer (its Monday
# 09:00 is Sunday in UTC), Kolkata half an hour off UTC without daylight saving (01:30 daily, 20:00 UTC the day
# before), Lord Howe with its half-hour change.
def zone_lab(term_class: dict[str, Any], all_year: dict[str, Any]) -> dict[str, Any]:
    return lab(["g4dn.xlarge"], 2, classes=[term_class, all_year])


TIME_ZONE_STACK = stack_values(
    **{
        "gpulab:timeZone": "Europe/Berlin",
        "gpulab:labs": {
            "berlin": zone_lab(
                {
                    "schedule": "0 9 * * tue,thu",
                    "duration": "2h",
                    "term": {"start": "2027-03-01", "end": "2027-11-15", "skip": ["2027-03-30", "2027-11-02"]},
                },
                {"schedule": "30 3 * * sun", "duration": "1h"},
            ),
            "new-york": zone_lab(
                {
                    "schedule": "0 20 * * mon",
                    "duration": "1h30m",
                    "warmup": "30m",
                    "timeZone": "America/New_York",
                    "term": {"start": "2027-02-01", "end": "2027-12-06", "skip": ["2027-03-15", "2027-11-08"]},
                },
                {"schedule": "30 8 * * mon,wed", "duration": "1h", "timeZone": "America/New_York"},
            ),
            "sydney": zone_lab(
                {
                    "schedule": "0 9 * * mon",
                    "duration": "3h",
                    "timeZone": "Australia/Sydney",
                    "term": {"start": "2027-02-01", "end": "2027-11-29", "skip": ["2027-04-05", "2027-10-04"]},
                },
                {"schedule": "15 18 * * wed", "duration": "1h", "timeZone": "Australia/Sydney"},
            ),
            "kolkata": zone_lab(
                {
                    "schedule": "0 8 * * tue",
                    "duration": "2h",
                    "timeZone": "Asia/Kolkata",
                    "term": {"start": "2027-01-05", "end": "2027-06-29", "skip": ["2027-03-23"]},
                },
                {"schedule": "30 1 * * *", "duration": "45m", "warmup": "15m", "timeZone": "Asia/Kolkata"},
            ),
            "lord-howe": zone_lab(
                {
                    "schedule": "0 10 * * sat",
                    "duration": "2h",
                    "timeZone": "Australia/Lord_Howe",
                    "term": {"start": "2027-02-06", "end": "2027-11-27", "skip": ["2027-04-03", "2027-10-09"]},
                },
                {"schedule": "30 7 * * tue", "duration": "1h", "timeZone": "Australia/Lord_Howe"},
            ),
        },
    }
)
