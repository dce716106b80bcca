"""kubeloop.crd without an apiserver: CRDs with several versions and one stored, subresources
from the types, the rule builders' two halves, field paths in parse errors, and
``kubeloop manifests`` writing and checking files. tests/integration/test_crd_example.py puts
the same example in front of a real apiserver."""

from __future__ import annotations

import importlib
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import msgspec
import pytest
import yaml

from kubeloop import _cli, crd
from kubeloop.crd import (
    CustomResource,
    InvalidField,
    ListMapKey,
    MaxItems,
    ObjectMeta,
    Version,
    parse,
    rules,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "crds"


def example() -> ModuleType:
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    return importlib.import_module("website_api")


@dataclass(frozen=True, kw_only=True)
class ThingSpec:
    """What a thing is."""

    size: int = 1
    """How big."""


@dataclass(frozen=True, kw_only=True)
class Thing:
    """A thing without status."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: ThingSpec
    """Its spec."""


# -- versions ----------------------------------------------------------------------------------
def test_the_example_serves_two_versions_and_stores_one() -> None:
    websites: CustomResource = example().WEBSITES
    definition = websites.definition()
    versions = definition["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [
        ("v1", True, True),
        ("v1alpha1", True, False),
    ]
    assert versions[1]["deprecated"] is True
    assert "deprecated" not in versions[0]
    assert versions[0]["subresources"] == {
        "scale": {
            "labelSelectorPath": ".status.selector",
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
        },
        "status": {},
    }
    assert versions[1]["subresources"] == {"status": {}}
    assert versions[0]["schema"] == versions[1]["schema"]
    assert websites.resource().api_version == "examples.kubeloop.dev/v1"
    assert websites.resource("v1alpha1").path("ns", "a") == (
        "/apis/examples.kubeloop.dev/v1alpha1/namespaces/ns/websites/a"
    )
    assert websites.definition() == definition  # the same on every call


@pytest.mark.parametrize(
    ("versions", "storage", "error"),
    [
        ((), None, "a kind needs a version"),
        (("v1", "v2"), None, r"name the storage version, one of \['v1', 'v2'\]"),
        (("v1", "v2"), "v3", "storage version 'v3' is not in"),
        (("v1", "v1"), "v1", r"versions \['v1', 'v1'\] repeat a name"),
    ],
)
def test_one_storage_version_among_distinct_ones(
    versions: tuple[str, ...], storage: str | None, error: str
) -> None:
    with pytest.raises(ValueError, match=f"Thing: {error}"):
        CustomResource(
            "x.dev", "Thing", "things", tuple(Version(v, Thing) for v in versions), storage
        )


def test_the_storage_version_must_be_served() -> None:
    with pytest.raises(ValueError, match="storage version v1 is not served"):
        CustomResource(
            "x.dev",
            "Thing",
            "things",
            (Version("v1", Thing, served=False), Version("v2", Thing)),
            storage="v1",
        )


def test_one_version_is_stored_and_a_kind_without_status_has_no_status_subresource() -> None:
    things = CustomResource("x.dev", "Thing", "things", (Version("v1", Thing),), namespaced=False)
    definition = things.definition()
    (version,) = definition["spec"]["versions"]
    assert (version["storage"], definition["spec"]["scope"]) == (True, "Cluster")
    assert "subresources" not in version
    assert definition["metadata"]["name"] == "things.x.dev"


def test_a_conversion_webhook_stanza_goes_into_the_spec_as_written() -> None:
    webhook = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "ops", "namespace": "ops", "path": "/convert"}},
        },
    }
    things = CustomResource(
        "x.dev",
        "Thing",
        "things",
        (Version("v1", Thing), Version("v2", Thing)),
        storage="v2",
        conversion=webhook,
    )
    spec = things.definition()["spec"]
    assert spec["conversion"] == webhook
    assert list(spec) == ["conversion", "group", "names", "scope", "versions"]
    assert [v["storage"] for v in spec["versions"]] == [False, True]
    assert things.resource().version == "v2"


# -- rule builders: one definition, two halves -------------------------------------------------
@pytest.mark.parametrize(
    ("rule", "good", "bad", "text"),
    [
        (
            crd.min_duration(timedelta(seconds=1)),
            timedelta(seconds=1),
            timedelta(milliseconds=999),
            "duration(self) >= duration('1s')",
        ),
        (crd.not_negative(), "1Gi", "-1Gi", "!string(self).startsWith('-')"),
        (
            crd.keys_match(r"^[a-z]+$", max_length=3, message="m"),
            {"abc": "x"},
            {"abcd": "x"},
            "self.all(k, k.size() <= 3 && k.matches(r'^[a-z]+$'))",
        ),
        (
            crd.key_length(1, 2, message="m"),
            {"ab": ""},
            {"abc": ""},
            "self.all(k, k.size() >= 1 && k.size() <= 2)",
        ),
        (
            crd.reserved_keys(prefixes=["a/"], keys=["Name"], message="m"),
            {"b/x": ""},
            {"Name": ""},
            "!self.exists(k, k.startsWith('a/') || k == 'Name')",
        ),
        (
            crd.all_found_in(r"\$\{[^}]*\}", ["${a}"], message="m"),
            "x ${a} y",
            "x ${b}",
            r"self.findAll(r'\$\{[^}]*\}').all(p, p in ['${a}'])",
        ),
    ],
)
def test_field_rule_builders_write_the_rule_and_its_check(
    rule: crd.CEL, good: Any, bad: Any, text: str
) -> None:
    assert rule.rule == text
    assert rule.check is not None
    assert (rule.check(good), rule.check(bad)) == (True, False)


@rules(
    crd.less_or_equal("low", "high"),
    crd.exactly_one_of("left", "right"),
    crd.none_of("later", message="later is not supported yet"),
)
@dataclass(frozen=True, kw_only=True)
class Ranged:
    """Cross-field rules."""

    low: int = 0
    """Lower."""
    high: int = 10
    """Upper."""
    left: str | None = None
    """One side."""
    right: str | None = None
    """The other side."""
    later: str | None = None
    """Not yet."""


def test_class_rule_builders_render_and_check_by_json_name() -> None:
    node = crd.schema(Ranged)
    assert node["x-kubernetes-validations"] == [
        {
            "fieldPath": ".low",
            "message": "low must be less than or equal to high",
            "rule": "self.low <= self.high",
        },
        {
            "message": "exactly one of left and right must be set",
            "rule": "has(self.left) != has(self.right)",
        },
        {"message": "later is not supported yet", "rule": "!has(self.later)"},
    ]
    assert parse(Ranged, {"left": "x"}).left == "x"
    with pytest.raises(InvalidField) as caught:
        parse(Ranged, {"low": 11, "left": "x"}, "spec")
    assert (caught.value.path, caught.value.detail) == (
        "spec.low",
        "Invalid value: low must be less than or equal to high",
    )
    with pytest.raises(InvalidField, match=r"^spec: Invalid value: exactly one of left and right"):
        parse(Ranged, {"left": "x", "right": "y"}, "spec")
    with pytest.raises(InvalidField, match="exactly one"):
        parse(Ranged, {}, "spec")
    with pytest.raises(InvalidField, match=r"^spec: Invalid value: later is not supported yet"):
        parse(Ranged, {"left": "x", "later": "now"}, "spec")


def test_three_way_exactly_one_of_and_literals_without_quotes() -> None:
    rule = crd.exactly_one_of("a", "b", "c")
    assert rule.rule == "[has(self.a), has(self.b), has(self.c)].filter(x, x).size() == 1"
    assert rule.message == "exactly one of a, b and c must be set"
    with pytest.raises(ValueError, match="quote"):
        crd.reserved_keys(prefixes=["it's"], message="m")


# -- parse errors name the field ---------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Entry:
    """An item."""

    name: str
    """Its key."""
    weight: Annotated[int, crd.Minimum(0)] = 0
    """How heavy."""


@dataclass(frozen=True, kw_only=True)
class Listing:
    """Lists and maps."""

    entries: Annotated[list[Entry], ListMapKey("name"), MaxItems(4)] = field(default_factory=list)
    """Keyed items."""
    tags: dict[str, Annotated[str, crd.MaxLength(3)]] = field(default_factory=dict)
    """A map."""


@pytest.mark.parametrize(
    ("data", "path", "detail"),
    [
        ({"entries": [{"name": "a"}, {"name": "a"}]}, "spec.entries[1]", "Duplicate value"),
        ({"entries": [{"name": "a", "weight": -1}]}, "spec.entries[0].weight", "greater than"),
        ({"entries": [{}]}, "spec.entries[0].name", "Required value"),
        ({"entries": [{"name": n} for n in "abcde"]}, "spec.entries", "at most 4 items"),
        ({"entries": {"name": "a"}}, "spec.entries", "must be of type array"),
        ({"tags": {"k": "long"}}, "spec.tags[k]", "at most 3 characters"),
        ({"tags": {"k": 1}}, "spec.tags[k]", "must be of type string"),
    ],
)
def test_parse_errors_carry_the_field_path(data: dict[str, Any], path: str, detail: str) -> None:
    with pytest.raises(InvalidField) as caught:
        parse(Listing, data, "spec")
    assert caught.value.path == path
    assert detail in caught.value.detail
    assert str(caught.value).startswith(f"{path}: ")


@dataclass(frozen=True, kw_only=True)
class Unparsable:
    """A type with a field of no JSON type."""

    when: complex = 0j
    """Not JSON."""


def test_a_field_of_no_json_type_is_named_before_any_object() -> None:
    with pytest.raises(TypeError, match=r"^Unparsable\.when: no parser for <class 'complex'>"):
        parse(Unparsable, {})


def test_to_api_round_trips_what_parse_read() -> None:
    data = {"entries": [{"name": "a", "weight": 2}], "tags": {"k": "v"}}
    assert crd.to_api(parse(Listing, data)) == data


# -- kubeloop manifests ------------------------------------------------------------------------
def test_the_committed_example_crd_is_what_the_types_generate() -> None:
    committed = (EXAMPLE / "examples.kubeloop.dev_websites.yaml").read_text()
    rendered = crd.render([example().WEBSITES], committed.split("apiVersion:")[0])
    assert rendered == {"examples.kubeloop.dev_websites.yaml": committed}, (
        "run `kubeloop manifests website_api --out .` in examples/crds"
    )


def test_manifests_command_writes_checks_and_repairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLE)  # the command imports modules of the project it runs in
    out = ["--out", str(tmp_path)]
    assert _cli.main(["manifests", "website_api", "--check", *out]) == 1
    assert _cli.main(["manifests", "website_api", *out]) == 0
    written = tmp_path / "examples.kubeloop.dev_websites.yaml"
    assert written.read_text().startswith("# Generated from the Python types in website_api")
    assert yaml.safe_load(written.read_text()) == example().WEBSITES.definition()
    assert _cli.main(["manifests", "website_api:WEBSITES", "--check", *out]) == 0
    capsys.readouterr()

    written.write_text(written.read_text().replace("default: 10", "default: 12"))
    (tmp_path / "examples.kubeloop.dev_gone.yaml").write_text("left over\n")
    (tmp_path / "README.md").write_text("not ours\n")
    assert _cli.main(["manifests", "website_api", "--check", *out]) == 1
    captured = capsys.readouterr()
    assert "-                default: 12" in captured.out
    assert "+                default: 10" in captured.out
    assert "-left over" in captured.out
    assert "2 CRD file(s) out of date" in captured.err
    assert _cli.main(["manifests", "website_api", *out]) == 0
    assert not (tmp_path / "examples.kubeloop.dev_gone.yaml").exists()
    assert (tmp_path / "README.md").exists()
    assert _cli.main(["manifests", "website_api", "--check", *out]) == 0


def test_the_installed_command_checks_the_committed_example() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubeloop", "manifests", "website_api", "--out", ".", "--check"],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("no_such_module_here", "No module named 'no_such_module_here'"),
        ("website_api:nothing", "website_api has no attribute 'nothing'"),
        ("website_api:_HOSTNAME", "website_api:_HOSTNAME is a str, not CRDs"),
        ("dataclasses", "dataclasses defines no CustomResource at its top level"),
    ],
)
def test_manifests_command_names_a_bad_target(
    target: str, error: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(EXAMPLE)
    assert _cli.main(["manifests", target, "--out", "unused"]) == 2
    assert capsys.readouterr().err == f"error: {error}\n"
    assert not (EXAMPLE / "unused").exists()


def test_manifests_command_reports_a_type_that_is_no_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_api.py").write_text(
        "from dataclasses import dataclass\n"
        "from kubeloop.crd import CustomResource, Version\n"
        "@dataclass\n"
        "class Broken:\n"
        '    """Undocumented spec."""\n'
        "    spec: int = 0\n"
        'BROKEN = CustomResource("x.dev", "Broken", "brokens", (Version("v1", Broken),))\n'
    )
    monkeypatch.chdir(tmp_path)
    assert _cli.main(["manifests", "broken_api", "--out", "out"]) == 2
    assert "Broken.spec: document the field" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# -- the docs ----------------------------------------------------------------------------------
def test_the_guide_shows_the_tested_example_and_the_reference_lists_every_name() -> None:
    docs = EXAMPLE.parents[1] / "docs"
    page = (docs / "crds.md").read_text()
    source = (EXAMPLE / "website_api.py").read_text()
    for section in ("types", "resource", "parse"):
        assert f'--8<-- "examples/crds/website_api.py:{section}"' in page
        assert f"# --8<-- [start:{section}]" in source
    reference = (docs / "reference" / "crds.md").read_text()
    missing = [n for n in crd.__all__ if f"::: kubeloop.crd.{n}\n" not in reference]
    # constants are described in the guide, not by mkdocstrings
    assert missing == ["AGE", "DURATION_PATTERN", "QUANTITY_PATTERN"]


# -- msgspec Structs ---------------------------------------------------------------------------
class StructEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An item."""

    name: str
    """Its key."""
    weight: Annotated[int, crd.Minimum(0)] = 0
    """How heavy."""


class StructListing(msgspec.Struct, frozen=True, kw_only=True):
    """Lists and maps."""

    entries: Annotated[list[StructEntry], ListMapKey("name"), MaxItems(4)] = msgspec.field(
        default_factory=list
    )
    """Keyed items."""
    tags: dict[str, Annotated[str, crd.MaxLength(3)]] = {}
    """A map."""


@rules(crd.less_or_equal("low", "highWater"))
class Renamed(msgspec.Struct, rename="camel"):
    """A Struct that names its JSON fields itself."""

    low: int = 0
    """Lower."""
    high_water: int = 10
    """Upper."""


def test_a_struct_renders_and_parses_as_the_same_dataclass_does() -> None:
    assert crd.schema(StructListing) == crd.schema(Listing)
    data = {"entries": [{"name": "a", "weight": 2}], "tags": {"k": "v"}}
    parsed = parse(StructListing, data)
    assert parsed == StructListing(entries=[StructEntry(name="a", weight=2)], tags={"k": "v"})
    assert crd.to_api(parsed) == data
    assert crd.to_api(parse(StructListing, {})) == {}
    with pytest.raises(InvalidField) as caught:
        parse(StructListing, {"entries": [{"name": "a"}, {"name": "a"}]}, "spec")
    assert caught.value.path == "spec.entries[1]"


def test_a_struct_rename_gives_the_json_names() -> None:
    assert sorted(crd.schema(Renamed)["properties"]) == ["highWater", "low"]
    assert parse(Renamed, {"highWater": 3}).high_water == 3
    with pytest.raises(InvalidField, match=r"^low: Invalid value: low must be less than"):
        parse(Renamed, {"low": 4, "highWater": 3})
