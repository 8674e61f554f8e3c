"""Scripts: the name rule, the tools, and that scripts never appear in note search."""
from __future__ import annotations

from store.access import Principal
from store import tools
from store.errors import Invalid, NotFound

import pytest


def test_script_tools_round_trip_over_http(server, boot, service, db) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    url = f"{server.url}/api/agents/{agent}/tools"
    r = service.post(f"{url}/script_write", json={"name": "fetch_prices.py", "content": "print('prices')"})
    assert r.status_code == 200 and r.json()["display_path"] == f"org/{org}/agents/{agent}/scripts/fetch_prices.py"
    assert service.post(f"{url}/script_write", json={"name": "fetch_prices.py", "content": "print(2)"}).json()[
        "version"] == 2
    listed = service.post(f"{url}/script_list", json={}).json()["scripts"]
    assert [(s["name"], s["size"], s["version"]) for s in listed] == [("fetch_prices.py", 8, 2)]
    got = service.post(f"{url}/script_get", json={"name": "fetch_prices.py"}).json()
    assert got["content"] == "print(2)"
    # scripts are not notes and never show up in note search
    assert service.post(f"{url}/note_find", json={"query": "print"}).json()["notes"] == []
    r = service.post(f"{url}/script_delete", json={"name": "fetch_prices.py"})
    assert r.json() == {"deleted": f"org/{org}/agents/{agent}/scripts/fetch_prices.py"}
    r = service.post(f"{url}/script_get", json={"name": "fetch_prices.py"})
    assert r.status_code == 404 and "script_list" in r.json()["error"]


def test_script_name_rule(db, boot) -> None:
    principal = Principal("service", None, "service", frozenset({boot["org_id"]}))
    for name in ["run.sh", "a/b.py", ".hidden.py", "-x.py", "x.py~", ".py"]:
        with pytest.raises(Invalid) as err:
            tools.call(db, principal, boot["agent_id"], "script_write", {"name": name, "content": "x"})
        assert "a script is one file name ending in .py" in err.value.message, name
    with pytest.raises(NotFound):
        tools.call(db, principal, boot["agent_id"], "script_delete", {"name": "missing.py"})
