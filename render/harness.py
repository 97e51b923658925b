"""The one mock harness of the offline render and the tests: runs the real program under Pulumi mocks and records it.

Every resource the program registers is recorded with the inputs the program passed (normalised the way Pulumi sends
them: camelCase keys, whole numbers as integers, secrets as "[secret]"), its parent and its logical name. The mocks
answer with realistic outputs (ARNs, names, a kubeconfig) so that values derived from them look like a real preview.
"""

import asyncio
import contextvars
import gc
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.sync_await import _ensure_event_loop

import domain.stack
import program
from render.event_loops import owned_event_loops

PROJECT = "gpulab"
ACCOUNT_ID = "123456789012"
# The IPv4 block of the stand-in VPC: the default VpcBlock of Amazon EKS's sample VPC CloudFormation templates, not the
# stack's VPC's, which only AWS knows.
VPC_CIDR = "192.168.0.0/16"
SECRET = "[secret]"


@dataclass(frozen=True)
class Registration:
    type: str
    name: str
    parent: str | None  # "<parent type token>::<parent name>", None for children of the stack
    inputs: dict[str, Any]
    # Every resource this one waits for, explicitly or through its inputs, as "<type token>::<name>".
    dependencies: tuple[str, ...] = ()
    # The provider the resource uses when it is not its package's default, as "<type token>::<name>"; not rendered.
    provider: str | None = None
    # How long Pulumi waits for the resource to be deleted, when the program sets it; not rendered.
    delete_timeout: str | None = None
    # Input properties Pulumi leaves to others after creation (ignore_changes); not rendered.
    ignore_changes: tuple[str, ...] = ()
    # The options that make Pulumi replace the resource where it would update it, or delete it before its replacement,
    # each as "<option>" or "<option>: <value>" (replaceOnChanges, replaceWith, replacementTrigger,
    # deleteBeforeReplace); not rendered.
    replacement_options: tuple[str, ...] = ()

    @property
    def token(self) -> str:
        """The resource as its children's `parent` and its dependents' `dependencies` name it."""
        return f"{self.type}::{self.name}"

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "dependsOn": list(self.dependencies),
            "inputs": self.inputs,
        }


@dataclass(frozen=True)
class Invoke:
    """A data-source call the program made, e.g. an SSM parameter look-up."""

    token: str
    args: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {"token": self.token, "args": self.args}


@dataclass
class Run:
    """What one run of the program registered, looked up and exported."""

    stack: domain.stack.StackConfig
    resources: list[Registration] = field(default_factory=list)
    invokes: list[Invoke] = field(default_factory=list)  # deduplicated, sorted
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_token: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_token]

    def one(self, type_token: str, name: str) -> Registration:
        matches = [r for r in self.of_type(type_token) if r.name == name]
        assert len(matches) == 1, f"expected one {type_token} named {name}, found {len(matches)}"
        return matches[0]


def normalise(value: Any) -> Any:
    """Inputs as the program passed them, in a form that compares and serialises stably."""
    if isinstance(value, Mapping):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return _masked(value.get("value"))
        return {str(k): normalise(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _masked(value: Any) -> Any:
    """A secret as the render shows it: "[secret]" for every value, the shape of a map or list kept (a Secret's
    stringData stays a map of its keys), so that the object still reads as the kind it is."""
    if isinstance(value, Mapping) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return _masked(value.get("value"))
    if isinstance(value, Mapping):
        return {str(k): _masked(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    return SECRET


def _suffix(name: str) -> str:
    # Stands in for the random suffix of Pulumi's auto-naming, but stable, so that renders are byte-identical.
    return hashlib.sha256(name.encode()).hexdigest()[:7]


def _type_name(urn: str) -> tuple[str, str]:
    # urn:pulumi:<stack>::<project>::<parent types joined by $>$<type>::<name>
    qualified_type, name = urn.split("::")[2:4]
    return qualified_type.split("$")[-1], name


def urn_token(urn: str) -> str:
    """The resource of a URN as Registration.token names it: "<type token>::<name>"."""
    return "::".join(_type_name(urn))


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self, region: str):
        self.region = region
        self.monitor: _Monitor | None = None
        self.invokes: list[Invoke] = []

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        self.invokes.append(Invoke(args.token, normalise(args.args)))
        answers: dict[str, Callable[[], dict]] = {
            "aws:index/getPartition:getPartition": lambda: {
                "id": "aws",
                "partition": "aws",
                "dnsSuffix": "amazonaws.com",
            },
            "aws:index/getCallerIdentity:getCallerIdentity": lambda: {
                "id": ACCOUNT_ID,
                "accountId": ACCOUNT_ID,
                "arn": f"arn:aws:iam::{ACCOUNT_ID}:role/ci",
                "userId": "AROAEXAMPLE:ci",
            },
            # A stand-in for the stack's VPC: one IPv4 block, VPC_CIDR.
            "aws:ec2/getVpc:getVpc": lambda: {
                "id": args.args["id"],
                "arn": f"arn:aws:ec2:{self.region}:{ACCOUNT_ID}:vpc/{args.args['id']}",
                "cidrBlock": VPC_CIDR,
                "cidrBlockAssociations": [
                    {"associationId": "vpc-cidr-assoc-0", "cidrBlock": VPC_CIDR, "state": "associated"}
                ],
            },
            # An AMI ID is "ami-" and 17 hex digits; a stable stand-in per parameter, as AWS has one per release.
            "aws:ssm/getParameter:getParameter": lambda: {
                "id": args.args["name"],
                "name": args.args["name"],
                "type": "String",
                "value": f"ami-0{hashlib.sha256(args.args['name'].encode()).hexdigest()[:16]}",
                "version": 1,
            },
            # A subnet in one of the region's first three zones, stable per subnet (a live price look-up asks:
            # components/live_prices.py).
            "aws:ec2/getSubnet:getSubnet": lambda: {
                "id": args.args["id"],
                "availabilityZone": f"{self.region}{'abc'[int(_suffix(args.args['id']), 16) % 3]}",
            },
        }
        if args.token not in answers:
            raise NotImplementedError(f"the mock harness has no answer for {args.token}; add one in render/harness.py")
        return answers[args.token](), []  # no check failures

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", {**args.inputs, **self.outputs_beyond_inputs(args)}

    def outputs_beyond_inputs(self, args: pulumi.runtime.MockResourceArgs) -> dict:
        """What a resource's state holds besides its inputs: the ARNs, names and URLs AWS would assign."""
        outputs: dict = {}
        name = args.inputs.get("name") or f"{args.name}-{_suffix(args.name)}"
        arn_of = {
            "aws:iam/role:Role": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}",
            "aws:iam/policy:Policy": f"arn:aws:iam::{ACCOUNT_ID}:policy/{name}",
            "aws:kms/key:Key": f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{_suffix(name)}",
            "aws:sqs/queue:Queue": f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}",
            "aws:cloudwatch/eventRule:EventRule": f"arn:aws:events:{self.region}:{ACCOUNT_ID}:rule/{name}",
        }
        if args.typ in arn_of:
            outputs |= {"name": name, "arn": arn_of[args.typ]}
        if args.typ == "aws:sqs/queue:Queue":
            outputs["url"] = f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}"
        if args.typ == "aws:kms/key:Key":
            outputs["keyId"] = _suffix(name)  # the last part of the key's ARN, which an alias targets
        if args.typ == "aws:amp/workspace:Workspace":
            workspace = f"{args.name}-id"  # the resource's ID, as new_resource gives it
            outputs["arn"] = f"arn:aws:aps:{self.region}:{ACCOUNT_ID}:workspace/{workspace}"
            outputs["prometheusEndpoint"] = (
                f"https://aps-workspaces.{self.region}.amazonaws.com/workspaces/{workspace}/"
            )
        # What pulumi-tls makes (the proxy's key and certificate, components/jupyterhub/proxy_tls.py): stand-ins, stable
        # so that renders are byte-identical; the key is a secret of the Secret that carries it.
        if args.typ == "tls:index/privateKey:PrivateKey":
            outputs["privateKeyPem"] = f"-----BEGIN PRIVATE KEY----- stand-in for {args.name}"
        if args.typ == "tls:index/selfSignedCert:SelfSignedCert":
            outputs["certPem"] = f"-----BEGIN CERTIFICATE----- stand-in for {args.name}"
        if args.typ == "eks:index:Cluster":
            outputs |= self._eks_cluster(args)
        return outputs

    def _eks_cluster(self, args: pulumi.runtime.MockResourceArgs) -> dict:
        # pulumi-eks is a remote component: its children are not built under mocks, so the aws.eks.Cluster it would
        # return is registered here by hand and handed back as a resource reference.
        assert self.monitor is not None
        cluster_name = args.inputs["name"]
        endpoint = f"https://{_suffix(cluster_name).upper()}.gr7.{self.region}.eks.amazonaws.com"
        state = {
            "name": cluster_name,
            "arn": f"arn:aws:eks:{self.region}:{ACCOUNT_ID}:cluster/{cluster_name}",
            "endpoint": endpoint,
        }
        urn = self.monitor.make_urn("", "aws:eks/cluster:Cluster", f"{args.name}-eksCluster")
        self.monitor.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, cluster_name, state)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster_name, "cluster": {"server": endpoint}}],
            "contexts": [{"name": "aws", "context": {"cluster": cluster_name, "user": "aws"}}],
            "current-context": "aws",
            "users": [{"name": "aws", "user": {"exec": {"command": "aws", "args": ["eks", "get-token"]}}}],
        }
        return {
            "eksCluster": {rpc._special_sig_key: rpc._special_resource_sig, "urn": urn, "id": cluster_name},
            "kubeconfigJson": json.dumps(kubeconfig),
            "clusterSecurityGroupId": f"sg-0{_suffix(cluster_name)}0000000",
        }


class _Monitor(pulumi_mocks.MockMonitor):
    """Records each registration with its parent, which the mocks' new_resource does not see.

    It answers a registration as pulumi's MockMonitor does (pulumi/runtime/mocks.py RegisterResource), with the
    resource's inputs and the mocks' outputs as its state, but hands the inputs back as the program sent them instead of
    deserialising and serialising them again: that round trip was a fifth of a large stack's render.
    """

    def __init__(self, mocks: _Mocks):
        super().__init__(mocks)
        self.mocks: _Mocks = mocks
        self.registrations: list[Registration] = []

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()  # deserialising a resource reference needs one on this thread
        inputs = rpc.deserialize_properties(request.object)
        args = pulumi.runtime.MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=inputs,
            provider=request.provider,
            resource_id=request.importId,
            custom=request.custom or False,
        )
        resource_id, extra = f"{request.name}-id", self.mocks.outputs_beyond_inputs(args)
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, resource_id, {**inputs, **extra})
        self._record(request, inputs)
        response = resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id, object=request.object)  # a copy
        response.object.update(extra)
        return response

    def _record(self, request, inputs: dict) -> None:
        parent = None
        if request.parent and _type_name(request.parent)[0] != "pulumi:pulumi:Stack":
            parent = urn_token(request.parent)
        dependencies = tuple(sorted(urn_token(urn) for urn in request.dependencies))
        # A provider reference is "<provider URN>::<provider ID>".
        provider = urn_token(request.provider.rsplit("::", 1)[0]) if request.provider else None
        delete_timeout = request.customTimeouts.delete or None
        ignored = tuple(request.ignoreChanges)
        replacement = (
            *(f"replaceOnChanges: {path}" for path in request.replaceOnChanges),
            *(f"replaceWith: {urn_token(urn)}" for urn in request.replace_with),
            *(["replacementTrigger"] if request.HasField("replacement_trigger") else []),
            *(["deleteBeforeReplace"] if request.deleteBeforeReplace else []),
        )
        self.registrations.append(
            Registration(
                request.type,
                request.name,
                parent,
                normalise(inputs),
                dependencies,
                provider,
                delete_timeout,
                ignored,
                replacement,
            )
        )


# What a render passes for a secret of the stack file (`key: {secure: <ciphertext>}`): it has no Pulumi CLI to decrypt
# it with, and a secret never reaches the render anyway.
ENCRYPTED = "[encrypted]"


def config_from_stack_file(document: Mapping[str, Any]) -> dict[str, str]:
    """The `config:` block of a stack file as the Pulumi CLI hands it to a program: structured values as JSON text,
    and secrets, at the top or nested in a structured value, as a stand-in (run() tells the program that a key holding
    one is a secret, as the CLI does)."""
    values = document.get("config") or {}
    return {
        key: ENCRYPTED if _is_secure(value) else value if isinstance(value, str) else json.dumps(_stand_ins(value))
        for key, value in values.items()
    }


def _stand_ins(value: Any) -> Any:
    # Pulumi decrypts a `secure:` value anywhere in a structured value and marks the whole key secret
    # (pulumi/pulumi sdk/go/common/resource/config: an object value is secure when any of its values is).
    if _is_secure(value):
        return ENCRYPTED
    if isinstance(value, Mapping):
        return {key: _stand_ins(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_stand_ins(inner) for inner in value]
    return value


def _holds_secret(value: str) -> bool:
    return value == ENCRYPTED or (value[:1] in "[{" and json.dumps(ENCRYPTED) in value)


async def _resolved(value: Any) -> tuple[Any, bool]:
    """An export with every Output in it awaited, and whether any of them is secret (then the whole export is, as
    Output.from_input would make it). Walked here rather than through Output.from_input, which makes an Output of every
    leaf: for the per-lab export of a large stack that was a third of the run, and `pulumi preview` does no such thing
    (the stack serialises its outputs as plain values)."""
    if isinstance(value, pulumi.Output):
        inner, secret = await _resolved(await value.future())
        return inner, secret or await value.is_secret()
    if isinstance(value, Mapping):
        items = [(key, await _resolved(v)) for key, v in value.items()]
        return {key: v for key, (v, _) in items}, any(secret for _, (_, secret) in items)
    if isinstance(value, list | tuple):
        elements = [await _resolved(v) for v in value]
        return [v for v, _ in elements], any(secret for _, secret in elements)
    return value, False


def _is_secure(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"secure"}


def run(
    stack_name: str, stack_config: Mapping[str, str], secrets: Sequence[str] = (), live_prices: bool = False
) -> Run:
    """Validates the configuration, then runs the program under mocks; raises domain.stack.ConfigError before
    registering.

    `secrets` are keys the CLI would mark secret (`pulumi config set --secret`), besides the stack file's own.
    `live_prices` looks prices up as `pulumi preview` does (components/live_prices.py), for a test whose mocks answer;
    the render prices from the list."""
    # On a thread of its own, as the Pulumi language host runs a program near the bottom of a stack: the SDK records
    # the call stack of every registration (pulumi/runtime/resource.py _get_stack_trace), frame by frame, and under a
    # test runner's fifty frames that was a quarter of a run.
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(
            contextvars.copy_context().run, _run, stack_name, stack_config, secrets, live_prices
        ).result()


def validated(stack_config: Mapping[str, str], secrets: Sequence[str] = ()) -> domain.stack.StackConfig:
    """The stack's configuration as the program reads it, checked as run() checks it before it registers anything
    (render/inputs.py checks a stack this way, in a fraction of a run); raises domain.stack.ConfigError."""
    secret_keys = [*secrets, *(key for key, value in stack_config.items() if _holds_secret(value))]
    pulumi.runtime.set_all_config(dict(stack_config), secret_keys)
    stack = domain.stack.load()
    if lines := program.problems(stack):
        raise domain.stack.ConfigError(lines)
    return stack


# Every event loop of a run is made and closed by the run, so that the process ends without a traceback.
@owned_event_loops()
def _run(stack_name: str, stack_config: Mapping[str, str], secrets: Sequence[str], live_prices: bool) -> Run:
    stack = validated(stack_config, secrets)
    mocks = _Mocks(stack.region)
    monitor = _Monitor(mocks)
    mocks.monitor = monitor
    # set_mocks makes a root stack resource only when there is none: without this a run would export into the stack
    # of the process's first run, whose outputs (a `jupyterhub` this stack has not) would stay in this run's.
    pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack_name, preview=False, monitor=monitor)
    result = Run(stack=stack)

    async def exports() -> None:
        root = pulumi.runtime.get_root_resource()
        for key, output in sorted(getattr(root, "outputs", {}).items()):
            value, secret = await _resolved(output)
            result.outputs[key] = SECRET if secret else normalise(value)

    @pulumi.runtime.test
    def program_run() -> Any:
        program.build(stack, live_prices=live_prices)
        return asyncio.ensure_future(exports())

    threshold = gc.get_threshold()
    program.collect_rarely()  # as `pulumi preview` runs it (program.main)
    try:
        program_run()
    finally:
        gc.set_threshold(*threshold)
    result.resources = sorted(monitor.registrations, key=lambda r: (r.type, r.name, r.parent or ""))
    unique = {json.dumps(i.as_json(), sort_keys=True): i for i in mocks.invokes}
    result.invokes = [unique[key] for key in sorted(unique)]
    return result
