"""AMI releases: the SSM parameters Karpenter resolves an alias through, looked up at preview so a bad release fails."""

import grpc
import pytest

import domain.stack
from components.karpenter.ami import ssm_parameters
from domain.stack.model import Lab
from domain.upstream.ami_releases import NVIDIA_AMIS, ami_warnings, default_release
from render import harness
from render.run import main as render
from render.run import read_stack_file
from tests.conftest import STACK_FILES, as_cli_config, run_values, stack_values
from tests.support.synthetic import lab

GET_PARAMETER = "aws:ssm/getParameter:getParameter"


def a_lab(instance_types: list[str], ami: str) -> Lab:
    return Lab.model_validate(lab(instance_types, 2, max_gpus=8, ami=ami))


def test_a_pinned_release_resolves_its_nvidia_x86_64_parameter():
    assert ssm_parameters(a_lab(["g4dn.xlarge"], "al2023@v20260714"), "1.34") == {
        "amd64": "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.34-v20260714/image_id"
    }


def test_an_arm64_lab_resolves_the_arm64_parameter():
    assert ssm_parameters(a_lab(["g5g.xlarge"], "al2023@v20260714"), "1.33") == {
        "arm64": "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/nvidia/"
        "amazon-eks-node-al2023-arm64-nvidia-1.33-v20260714/image_id"
    }


def test_latest_resolves_the_recommended_parameter_per_arch():
    assert ssm_parameters(a_lab(["g5g.xlarge", "g6.xlarge"], "al2023@latest"), "1.34") == {
        "amd64": "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
        "arm64": "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/nvidia/recommended/image_id",
    }


def test_a_mixed_lab_looks_up_each_architecture_once():
    labs = {"mixed": lab(["g4dn.xlarge", "g5g.xlarge"], 2, ami="al2023@v20260714")}
    run = run_values(stack_values(**{"gpulab:labs": labs}))
    names = [i.args["name"] for i in run.invokes if i.token == GET_PARAMETER]
    assert names == sorted(ssm_parameters(Lab.model_validate(labs["mixed"]), "1.36").values())


class _NotFound(grpc.RpcError):
    """How a failed invoke reaches the program: a gRPC error whose details carry the provider's message."""

    def code(self):
        return grpc.StatusCode.UNKNOWN

    def details(self):
        return "ParameterNotFound: parameter not found"


@pytest.fixture
def missing_release(monkeypatch):
    answer = harness._Mocks.call

    def call(self, args):
        if args.token == GET_PARAMETER and "v20251117" in args.args["name"]:
            self.invokes.append(harness.Invoke(args.token, args.args))
            raise _NotFound()
        return answer(self, args)

    monkeypatch.setattr(harness._Mocks, "call", call)


def test_a_missing_release_fails_the_run_naming_lab_and_release(missing_release, tmp_path, capsys):
    labs = {"good": lab(["g4dn.xlarge"], 2), "stale": lab(["g4dn.xlarge"], 2, ami="al2023@v20251117")}
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(__import__("yaml").safe_dump({"config": stack_values(**{"gpulab:labs": labs})}))
    assert render([str(stack), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        "gpulab:labs.stale.ami: no NVIDIA AMI for amd64 nodes of Kubernetes 1.36 in release al2023@v20251117: "
        "looking up SSM parameter /aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.36-v20251117/image_id failed ("
    )
    assert "ParameterNotFound" in error  # the provider's own words reach the user
    assert "Traceback" not in error
    assert not (tmp_path / "out").exists()


def test_labs_that_share_a_release_share_one_look_up(monkeypatch):
    looked_up = []
    answer = harness._Mocks.call

    def call(self, args):
        looked_up.append(args.args.get("name")) if args.token == GET_PARAMETER else None
        return answer(self, args)

    monkeypatch.setattr(harness._Mocks, "call", call)
    labs = {name: lab(["g4dn.xlarge"], 2, ami="al2023@v20260714") for name in ("a", "b", "c")}
    harness.run("test", as_cli_config(stack_values(**{"gpulab:labs": labs})))  # not run_values: its runs are shared
    assert looked_up == list(ssm_parameters(Lab.model_validate(labs["a"]), "1.36").values())


def test_a_missing_release_shared_by_labs_names_each_lab(missing_release, tmp_path, capsys):
    stale = lab(["g4dn.xlarge"], 2, ami="al2023@v20251117")
    labs = {"first": stale, "good": lab(["g4dn.xlarge"], 2), "second": stale}
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(__import__("yaml").safe_dump({"config": stack_values(**{"gpulab:labs": labs})}))
    assert render([str(stack), "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1] for line in lines] == ["labs.first.ami", "labs.second.ami"]
    assert lines[0].split(": ", 1)[1] == lines[1].split(": ", 1)[1]  # the same message for each


def test_the_repos_stacks_use_releases_with_known_nvidia_amis():
    for path in STACK_FILES:
        stack = domain.stack.from_cli(read_stack_file(path))
        assert ami_warnings(stack.settings.labs, stack.settings.cluster.kubernetes_version) == [], path.name


def test_known_releases_follow_amazon_eks_ami_s_notes():
    # CHANGELOG.md at v20260724: v20260714 has NVIDIA AMIs for 1.30 to 1.36 on both architectures; v20250317, the last
    # without arm64 ones, for 1.25 to 1.32 on x86_64; 1.28's last is v20251112.
    assert NVIDIA_AMIS["v20260714"] == {arch: frozenset(f"1.{m}" for m in range(30, 37)) for arch in ("amd64", "arm64")}
    assert NVIDIA_AMIS["v20250317"]["arm64"] == frozenset()
    assert "1.28" in NVIDIA_AMIS["v20251112"]["amd64"] and "1.28" not in NVIDIA_AMIS["v20251120"]["amd64"]


def test_the_suggested_release_is_the_newest_whose_notes_list_the_version():
    # v20260714's CHANGELOG entry is the newest read here; newer releases are known from their pages only, and the
    # two refused ones are never suggested whatever their pages say.
    assert default_release("1.36") == default_release("1.35") == "v20260714"
    assert NVIDIA_AMIS["v20261023"]["amd64"] >= {"1.35", "1.36"}
    assert default_release("1.29") == "v20260318"  # the last whose notes list 1.29
    assert default_release("1.37") is None


@pytest.mark.parametrize("release", ["v20260930", "v20261003"])
def test_a_release_with_a_node_breaking_defect_is_refused(release, tmp_path, capsys):
    labs = {
        "good": lab(["g4dn.xlarge"], 2, ami="al2023@v20261012"),
        "bad": lab(["g4dn.xlarge"], 2, ami=f"al2023@{release}"),
    }
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(__import__("yaml").safe_dump({"config": stack_values(**{"gpulab:labs": labs})}))
    assert render([str(stack), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"gpulab:labs.bad.ami: release {release} is refused: its kernel 6.12 panics during memory reclaim and nodes "
        "reboot unexpectedly (amazon-eks-ami #2845), says the release notes of amazon-eks-ami v20261003 and v20261012; "
        "choose v20261012 or a later release"
    ]
    assert not (tmp_path / "out").exists()
