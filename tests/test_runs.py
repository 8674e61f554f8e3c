"""The orchestrator opens and updates runs over HTTP; a run-owned change names its run."""
from __future__ import annotations

from store import admin


def test_the_orchestrator_opens_a_run_and_its_tool_calls_are_run_owned(server, boot, service, operator) -> None:
    r = service.post(f"{server.url}/api/runs", json={"agent_id": boot["agent_id"], "kind": "schedule",
                                                      "routine": "morning"})
    assert r.status_code == 201, r.text
    run = r.json()
    assert (run["status"], run["kind"], run["routine"]) == ("running", "schedule", "morning")
    r = service.post(f"{server.url}/api/agents/{boot['agent_id']}/tools/note_write",
                     json={"level": "agent", "key": "log.md", "content": "started"},
                     headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": "call-1"})
    assert r.status_code == 200, r.text
    r = service.patch(f"{server.url}/api/runs/{run['id']}", json={"status": "succeeded"})
    assert r.status_code == 200 and r.json() == {**run, "status": "succeeded"}  # the run as POST gave it
    history = operator.get(f"{server.url}/api/file-changes",
                           params={"display_path": f"org/{boot['org_id']}/agents/{boot['agent_id']}/log.md"})
    change = history.json()["changes"][0]
    assert change["run_id"] == run["id"] and change["tool_call_id"] == "call-1"
    assert change["run"]["status"] == "succeeded" and change["run"]["routine"] == "morning"


def test_runs_are_the_orchestrators_and_stay_in_its_organisation(server, boot, service, operator, db) -> None:
    other = admin.bootstrap(db, org_name="Other")
    r = service.post(f"{server.url}/api/runs", json={"agent_id": other["agent_id"], "kind": "chat"})
    assert r.status_code == 404
    foreign = admin.create_run(db, agent_id=other["agent_id"], kind="chat")
    assert service.patch(f"{server.url}/api/runs/{foreign['id']}", json={"status": "failed"}).status_code == 404
    # An operator is not the orchestrator.
    assert operator.post(f"{server.url}/api/runs", json={"agent_id": boot["agent_id"], "kind": "chat"}).status_code == 404


def test_a_bad_run_lists_every_problem(server, boot, service) -> None:
    r = service.post(f"{server.url}/api/runs", json={"agent_id": boot["agent_id"], "kind": "nap",
                                                      "status": "sleeping"})
    assert r.status_code == 422
    assert r.json()["problems"] == ['kind "nap" is not one of chat, schedule, studio, group, manual',
                                    'status "sleeping" is not one of queued, running, succeeded, failed, cancelled']
    r = service.post(f"{server.url}/api/runs", json={"agent": 1})
    assert r.status_code == 422 and "unknown field" in r.json()["problems"][0]
    # All at once: an unknown field no longer hides the others, which came only on the next try.
    r = service.post(f"{server.url}/api/runs", json={"agent": 1, "agent_id": "7", "kind": "nap"})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        "agent: unknown field; a run takes agent_id, kind, status, routine",
        "agent_id: expected the id of one of your organisation's agents; got \"7\"",
        'kind "nap" is not one of chat, schedule, studio, group, manual']
    made = service.post(f"{server.url}/api/runs", json={"agent_id": boot["agent_id"], "kind": "chat"})
    assert made.status_code == 201, made.text
    run = made.json()
    r = service.patch(f"{server.url}/api/runs/{run['id']}", json={"state": "done", "status": "over"})
    assert r.status_code == 422 and len(r.json()["problems"]) == 2, r.json()
