"""Scenario files: the samples, `aw-mcp faults check|list|schema`, and start-up errors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from aw_mcp.cli import main
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.faults.coverage import argument_gaps, served_tool_arguments
from aw_mcp.faults.layer import CallContext
from aw_mcp.faults.scenario import bundled_scenario_names, load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.files.bundled import bundled_dir
from aw_mcp.files.yaml import DataFileError
from aw_mcp.wiring.assemble import make_faults
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import TOOL_SURFACES
from tests.faults_support import SHOP, scenario_from

SAMPLES = sorted(bundled_dir("faults").glob("*.yaml"))

BROKEN = """\
name: broken
seed: 3
rules:
  - id: a
    when: {nth: 0}
    effects:
      - kind: error
        preset: http_599
  - id: b
    probability: 1.5
    effects:
      - kind: latency
        distribution: uniform
        low: 2
"""


def test_the_issue_samples_are_all_bundled():
    assert {
        "flaky-search",
        "disk-full",
        "rate-limit",
        "slow-network",
        "permission-denied",
        "mcp-error-mix",
    } <= set(bundled_scenario_names())


def test_faults_check_accepts_every_sample(capsys):
    assert main(["faults", "check", *map(str, SAMPLES)]) == 0
    out = capsys.readouterr().out
    for sample in SAMPLES:
        assert f"ok: {sample}: {sample.stem}" in out


def test_faults_check_rejects_a_broken_file_naming_file_line_and_field(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    assert main(["faults", "check", str(SAMPLES[0]), str(broken)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert f"{broken}:5: rules[0].when.nth: calls are counted from 1" in err
    assert any(line.startswith(f"{broken}:8: rules[0].effects[0].error.preset:") for line in err)
    assert f"{broken}:10: rules[1].probability: Input should be less than or equal to 1" in err
    assert f"{broken}:12: rules[1].effects[0].latency: a uniform latency needs high" in err


def test_faults_check_reports_invalid_yaml_and_unknown_names(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrules: [\n")
    assert main(["faults", "check", str(bad), "no-such-scenario"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3: invalid YAML" in err
    assert "no-such-scenario: no bundled fault scenario of that name" in err


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("{id: r, effects: [{kind: hang}, {kind: truncate}]}", "output effects cannot apply"),
        (
            "{id: r, effects: [{kind: error, preset: http_500}, {kind: hang}]}",
            "at most one of error, result, jsonrpc_error, hang",
        ),
        ("{id: r, effects: [{kind: error}]}", "give a preset or a text"),
        ("{id: r, effects: [{kind: schema_drift}]}", "give rename and/or remove"),
        ("{id: r, when: {window: [5, 2]}, effects: [{kind: empty}]}", "from <= to"),
        (
            "{id: r, match: {arguments: {q: {equals: 1, present: true}}},"
            " effects: [{kind: empty}]}",
            "exactly one of equals, regex, present",
        ),
        ("{id: r, effects: []}", "at least 1 item"),
        (
            "{id: r, effects: [{kind: result, content: [{type: image, data: AAAA}]}]}",
            "content[0]: mimeType: Field required",
        ),
        ("{id: r, effects: [{kind: result, content: [{type: video}]}]}", "type must be one of"),
        ("{id: r, effects: [{kind: result, content: []}]}", "at least 1 item"),
    ],
)
def test_rules_that_cannot_work_are_refused(rule, problem):
    with pytest.raises(DataFileError) as caught:
        scenario_from(f"name: s\nrules:\n  - {rule}\n", source="s.yaml")
    assert problem in str(caught.value)
    assert str(caught.value).startswith("s.yaml:")


def test_duplicate_rule_ids_are_refused():
    with pytest.raises(DataFileError, match="rule id 'r' is used twice"):
        scenario_from(
            "name: s\nrules:\n  - {id: r, effects: [{kind: empty}]}\n"
            "  - {id: r, effects: [{kind: empty}]}\n"
        )


def test_faults_schema_is_a_json_schema_that_accepts_the_samples(capsys):
    assert main(["faults", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    for sample in SAMPLES:
        jsonschema.validate(yaml.safe_load(sample.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(yaml.safe_load(BROKEN), schema)


def test_faults_list_names_the_bundled_scenarios(capsys):
    assert main(["faults", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(bundled_scenario_names())
    assert out[0].split()[:3] == ["disk-full", "1", "rules"]
    assert "The disk fills up at the 3rd call" in out[0]


def test_serve_resolves_bundled_names_and_files(tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text("name: own\nrules:\n  - {id: r, effects: [{kind: empty}]}\n")
    settings = ServeSettings(faults=[Path("disk-full"), own])
    faults = make_faults(settings)
    assert isinstance(faults, ScenarioFaultLayer)
    assert [s.name for s in faults.scenarios] == ["disk-full", "own"]


def test_serve_fails_at_start_up_on_a_bad_scenario(tmp_path, capsys):
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    assert main(["serve", "--faults", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "aw-mcp: invalid file" in err
    assert f"{broken}:5: rules[0].when.nth" in err


def test_two_scenarios_with_one_name_are_refused():
    with pytest.raises(ValueError, match="loaded twice"):
        make_faults(ServeSettings(faults=[Path("disk-full"), Path("disk-full")]))


def test_start_up_warns_about_rules_that_match_no_served_tool(tmp_path, caplog):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\nrules:\n"
        "  - {id: typo, match: {tool: serach}, effects: [{kind: empty}]}\n"
        "  - {id: fine, match: {tool: [nope, 'sea*']}, effects: [{kind: empty}]}\n"
        "  - {id: other-domain, match: {domain: web}, effects: [{kind: empty}]}\n"
    )
    with caplog.at_level("WARNING", logger="aw_mcp.wiring.assemble"):
        make_faults(ServeSettings(faults=[scenario]), Catalogue([SHOP]))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert "s/typo matches no tool" in warned[0] and "s/other-domain" in warned[1]


def test_rules_on_resource_reads_prompts_and_completions_warn_only_where_none_are_offered(
    tmp_path, caplog
):
    """A rule may match the surface actions as tools: it is live where a domain serves
    resources, templates or prompts, and warned about where none does."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\nrules:\n"
        "  - {id: read, match: {tool: resources/read}, effects: [{kind: empty}]}\n"
        "  - {id: prompt, match: {tool: prompts/get}, effects: [{kind: empty}]}\n"
        "  - {id: complete, match: {tool: completion/complete}, effects: [{kind: empty}]}\n"
    )
    fixtures = mirror_domain(Path(__file__).parent / "data" / "conformance-fixtures.json")
    assert fixtures.resources and fixtures.prompts  # the capture offers both
    with caplog.at_level("WARNING", logger="aw_mcp.wiring.assemble"):
        make_faults(ServeSettings(faults=[scenario]), Catalogue([fixtures]))
        assert caplog.records == []
        make_faults(ServeSettings(faults=[scenario]), Catalogue([SHOP]))
    warned = [r.getMessage() for r in caplog.records]
    assert [w.split()[2] for w in warned] == ["s/read", "s/prompt", "s/complete"]


MOVE_BY_PATH = """\
name: move-guard
rules:
  - id: by-path
    match: {tool: [write_file, move_file], arguments: {path: {regex: '^/etc/'}}}
    effects: [{kind: error, text: denied}]
  - id: absent-ok
    match: {tool: move_file, arguments: {path: {present: false}}}
    effects: [{kind: latency, seconds: 0.1}]
"""


def test_faults_check_against_a_domain_warns_about_arguments_the_tools_lack(tmp_path, capsys):
    scenario = tmp_path / "move-guard.yaml"
    scenario.write_text(MOVE_BY_PATH)
    capture = TOOL_SURFACES / "filesystem.json"
    assert (
        main(["faults", "check", str(scenario), "--against", "terminal", "--against", str(capture)])
        == 0
    )
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2  # move_file in each; write_file has `path`; present: false holds
    assert all(
        "move-guard/by-path" in w and "tool move_file has no argument path" in w for w in warnings
    )
    assert "(it has: destination, source)" in warnings[0]
    assert "against terminal" in warnings[0] and "against " + str(capture) in warnings[1]


def test_bundled_scenarios_fit_every_bundled_domain_and_captured_tool_surface():
    targets = [load_domain(name) for name in bundled_domain_names()]
    targets += [mirror_domain(path) for path in sorted(TOOL_SURFACES.glob("*.json"))]
    scenarios = [load_scenario(path) for path in SAMPLES]
    gaps = [
        gap
        for d in targets
        for gap in argument_gaps(scenarios, served_tool_arguments(Catalogue([d])))
    ]
    assert gaps == []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"path": "/etc/passwd", "content": "x"}),
        ("edit_block", {"file_path": "/etc/passwd", "old_string": "a", "new_string": "b"}),
        ("move_file", {"source": "/etc/passwd", "destination": "/tmp/p"}),
        ("move_file", {"source": "/tmp/p", "destination": "/etc/passwd"}),
    ],
)
def test_permission_denied_refuses_every_write_tool_on_a_system_path(tool, arguments):
    layer = ScenarioFaultLayer([load_scenario("permission-denied")])
    decision = layer.decide(CallContext("e", "terminal", tool, arguments, 1))
    assert decision.answer is not None and decision.answer.is_error
    assert (
        "EACCES: permission denied" in decision.answer.text
        and "/etc/passwd" in decision.answer.text
    )
    home = {k: v.replace("/etc/passwd", "/home/dev/notes") for k, v in arguments.items()}
    assert layer.decide(CallContext("f", "terminal", tool, home, 1)).answer is None


@pytest.mark.parametrize(
    "path", ["//etc/z", "/./etc/passwd", "/../etc/passwd", "/srv/www/index.html", "/etc"]
)
def test_permission_denied_normalises_system_paths_and_covers_srv(path):
    layer = ScenarioFaultLayer([load_scenario("permission-denied")])
    decision = layer.decide(CallContext("e", "terminal", "write_file", {"path": path}, 1))
    assert decision.answer is not None and f"permission denied, open '{path}'" in (
        decision.answer.text
    )


@pytest.mark.parametrize(
    "command",
    [
        "echo > /etc/motd",
        "echo hi >>//etc/hosts",
        "ls 2>/var/log/err",
        "echo x | tee -a /srv/www/index.html",
        "touch /./etc/z",
        "mkdir -p /srv/data",
        "rm -rf /usr/lib/thing",
        "cp notes.txt /etc/",
        "mv a '/opt/app/b'",
        "sed -i 's/a/b/' /etc/ssh/sshd_config",
        "dd if=/dev/zero of=/var/lib/blob bs=1 count=1",
    ],
)
def test_permission_denied_refuses_shell_writes_to_system_paths(command):
    layer = ScenarioFaultLayer([load_scenario("permission-denied")])
    for tool in ("run_command", "start_process"):
        decision = layer.decide(CallContext("e", "terminal", tool, {"command": command}, 1))
        assert decision.answer is not None and decision.answer.is_error, (tool, command)
        assert "Permission denied" in decision.answer.text
        assert decision.fired[0].rule == "system-path-shell-write"


@pytest.mark.parametrize(
    "command",
    [
        "cat /etc/hosts",
        "ls /usr/bin /srv",
        "cp /etc/hosts ~/hosts",
        "rsync -a /etc/ backup/",
        "grep root /etc/passwd > out.txt",
        "echo hi > /tmp/x",
        "mkdir -p /home/dev/etc",
        "echo /etc/motd",
        "sed -i s/a/b/ notes.txt",
    ],
)
def test_permission_denied_lets_reads_of_system_paths_and_home_writes_pass(command):
    layer = ScenarioFaultLayer([load_scenario("permission-denied")])
    decision = layer.decide(CallContext("e", "terminal", "run_command", {"command": command}, 1))
    assert decision.answer is None and decision.fired == []
