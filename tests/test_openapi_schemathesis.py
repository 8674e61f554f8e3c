"""schemathesis against /api/openapi.json with a member token, then the service token (the tool,
run and State routes), on the bootstrap agent and guild: the document says exactly what the
server accepts and answers. No server error, no request that is valid by the document refused,
no status the document does not list, every 405 with Allow. Bounded: a few examples per operation.

Where a refusal depends on what is stored and not on the request's shape, the document cannot
say it (a record's body must use the collection's own columns; a where term must name one), so for
those operations alone a 422 counts as an answer; CONFIG names each with the reason.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHECKS = ",".join(["not_a_server_error", "status_code_conformance", "positive_data_acceptance",
                   "content_type_conformance", "response_schema_conformance", "unsupported_method",
                   "allow_header_conformance"])
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429"]
# Operation -> (further statuses a schema-valid request may get, and why the document cannot rule
# the request out): what is stored decides, or a rule JSON Schema has no words for.
STORED_RULES = {
    "POST /api/collections/{collection_id}/records": (["422"], "a record must use the collection's columns and types"),
    "PATCH /api/collections/{collection_id}/records/{record_id}": (["412", "422"], "a patch must use the collection's "
                                                                   "columns; If-Match names a version the record may "
                                                                   "no longer be at"),
    "GET /api/collections/{collection_id}/records": (["422"], "where and order name the collection's columns"),
    "POST /api/agents/{agent_id}/tools/{tool}": (["422"], "each tool takes its own arguments"),
    "PUT /api/agents/{agent_id}/task": (["412"], "If-Match names a version the task may no longer be at"),
    "PATCH /api/collections/{collection_id}": (["412", "422"], "If-Match names a version the table may no longer "
                                               "be at; rename_from names a current column; names must differ"),
    "POST /api/collections": (["422"], "column names must differ, and values be distinct once NFC"),
    "PUT /api/guilds/{guild_id}/collection-access": (["422"], "a guild's own table takes no guild grant"),
    "PUT /api/agents/{agent_id}/collection-access": (["422"], "a guild's own table takes rows for its agents only"),
}


def config(boot: dict[str, Any]) -> str:
    # The bootstrap agent and guild, so that agent and guild routes reach real ones, not only 404.
    blocks = [f'[parameters]\n"path.agent_id" = {boot["agent_id"]}\n"path.guild_id" = {boot["guild_id"]}\n']
    for operation, (further, why) in STORED_RULES.items():
        statuses = ", ".join(f'"{s}"' for s in [*ACCEPTED, *further])
        blocks.append(f'# {why}\n[[operations]]\ninclude-name = "{operation}"\n'
                      f'checks.positive_data_acceptance.expected-statuses = [{statuses}]\n')
    return "\n".join(blocks)


def st() -> list[str]:
    """schemathesis's command (the `test` extra installs it beside this Python)."""
    exe = Path(sys.executable).parent / "st"
    found = str(exe) if exe.exists() else shutil.which("st")
    assert found, "schemathesis is not installed: pip install -e '.[test]'"
    return [found]


@pytest.mark.parametrize("token", ["member_token", "service_token"])
def test_schemathesis_finds_no_server_error_no_refused_valid_request_no_undocumented_status(
        server, boot, tmp_path: Path, token: str) -> None:
    conf = tmp_path / "schemathesis.toml"
    conf.write_text(config(boot))
    cmd = [*st(), "--config-file", str(conf), "run", f"{server.url}/api/openapi.json",
           "-H", f"Authorization: Bearer {boot[token]}", "--checks", CHECKS,
           "--max-examples", "6", "--seed", "1", "--workers", "1", "--no-color",
           "--request-timeout", "30", "--generation-database", "none", "--suppress-health-check", "all"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-20000:]
    assert "Tested: " in out
