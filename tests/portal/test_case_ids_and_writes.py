"""Issue 25, items 1 and 2: ids are data (never a path), and case writes lose nothing under concurrency.

Against a started ``ragpulse serve`` with the portal on a private PostgreSQL database (real sockets, httpx).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from urllib.parse import quote

import asyncpg
import httpx
import pytest

from portal_testutil import Portal, problem_detail, started_portal

#: Ids that must work as data: a slash, a literal percent-escape, non-ASCII, dots that are not a whole segment.
GOOD_IDS = ["a/b", "a%2Fb", "ü", "..x", "x..", "hr/leave-1"]
#: Ids refused at every entry point, with the reason's words.
BAD_IDS = {
    "../../B": "has a '.' or '..' path segment",
    "..": "has a '.' or '..' path segment",
    "a/./b": "has a '.' or '..' path segment",
    "a\tb": "contains a control character",
    "x\u0085y": "contains a control character",
}


@pytest.fixture(scope="module")
def portal() -> Iterator[Portal]:
    with started_portal(RAGPULSE_API_MAX_TEST_SET_CASES="100") as p:
        yield p


def _case_url(name: str, case_id: str) -> str:
    return f"/api/v1/test-sets/{quote(name, safe='')}/cases/{quote(case_id, safe='')}"


def test_ids_with_slashes_percent_and_dots_round_trip_through_the_api(portal: Portal) -> None:
    with portal.client() as c:
        assert c.post("/api/v1/test-sets", json={"name": "ids-a"}).status_code == 201
        for cid in GOOD_IDS:
            r = c.post("/api/v1/test-sets/ids-a/cases", json={"id": cid, "question": f"Q {cid}?"})
            assert r.status_code == 201, r.text
            assert c.get(_case_url("ids-a", cid)).json() == {"id": cid, "question": f"Q {cid}?"}
            r = c.put(_case_url("ids-a", cid), json={"question": f"edited {cid}?"})
            assert r.status_code == 200, r.text
            assert c.get(_case_url("ids-a", cid)).json()["question"] == f"edited {cid}?"
        ids = [x["id"] for x in c.get("/api/v1/test-sets/ids-a/cases").json()["items"]]
        assert ids == GOOD_IDS
        for cid in GOOD_IDS:
            assert c.delete(_case_url("ids-a", cid)).status_code == 204
        assert c.get("/api/v1/test-sets/ids-a/cases").json()["items"] == []
        assert c.get("/api/v1/test-sets/ids-a").json()["case_count"] == 0


def test_traversal_ids_are_refused_at_every_entry_point_and_other_sets_survive(portal: Portal) -> None:
    with portal.client() as c:
        for name in ("trav-a", "B"):
            assert c.post("/api/v1/test-sets", json={"name": name}).status_code == 201
        c.post("/api/v1/test-sets/B/cases", json={"id": "keep", "question": "Q?"})
        for cid, why in BAD_IDS.items():
            detail = problem_detail(
                c.post("/api/v1/test-sets/trav-a/cases", json={"id": cid, "question": "Q"}), 422
            )
            assert why in detail
            r = c.post("/api/v1/test-sets/trav-a/cases/import", json=[{"id": cid, "question": "Q"}])
            assert r.status_code == 200
            assert [why in x["reason"] for x in r.json()["rejected"]] == [True]
            jsonl = json.dumps({"id": cid, "question": "Q"}) + "\n"
            r = c.post(
                "/api/v1/test-sets/trav-a/cases/import",
                content=jsonl.encode(),
                headers={"content-type": "application/x-ndjson"},
            )
            assert r.json()["rejected"][0]["line"] == 1
            assert why in r.json()["rejected"][0]["reason"]
        # CSV: the reproduction (a cell "../../B"); the PUT with the encoded id is refused as well
        csv = "id,question\n../../B,Q?\nfine,Q2?\n"
        r = c.post("/api/v1/test-sets/trav-a/cases/import", content=csv, headers={"content-type": "text/csv"})
        body = r.json()
        assert [x["id"] for x in body["created"]] == ["fine"]
        assert body["rejected"] == [{"line": 2, "reason": "id '../../B' has a '.' or '..' path segment"}]
        assert "path segment" in problem_detail(
            c.put(_case_url("trav-a", "../../B"), json={"question": "Q"}), 422
        )
        # the encoded traversal id names no case of A: 404, and B is untouched
        problem_detail(c.delete(_case_url("trav-a", "../../B")), 404)
        assert c.get("/api/v1/test-sets/B").json()["case_count"] == 1


def test_a_stored_traversal_id_stays_listable_and_deletable(portal: Portal) -> None:
    """Ids stored before the rule (written here straight into PostgreSQL) are still shown and deletable."""

    async def plant() -> None:
        conn = await asyncpg.connect(portal.db_url)
        try:
            await conn.execute(
                "INSERT INTO test_cases (test_set, case_id, position, question) VALUES "
                "('old-ids', '../../victim', 0, 'Q?'), ('old-ids', 'a/../b', 1, 'Q2?')"
            )
            await conn.execute("UPDATE test_sets SET case_count = 2 WHERE name = 'old-ids'")
        finally:
            await conn.close()

    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "old-ids"})
        c.post("/api/v1/test-sets", json={"name": "victim"})
        asyncio.run(plant())
        ids = [x["id"] for x in c.get("/api/v1/test-sets/old-ids/cases").json()["items"]]
        assert ids == ["../../victim", "a/../b"]
        assert c.get(_case_url("old-ids", "../../victim")).json()["question"] == "Q?"
        assert c.delete(_case_url("old-ids", "../../victim")).status_code == 204
        assert c.delete(_case_url("old-ids", "a/../b")).status_code == 204
        assert c.get("/api/v1/test-sets/victim").status_code == 200  # the other set was never the target
        assert c.get("/api/v1/test-sets/old-ids").json()["case_count"] == 0


def test_concurrent_adds_edits_and_deletes_keep_every_acknowledged_write(portal: Portal) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(base_url=portal.url, timeout=60) as c:
            assert (await c.post("/api/v1/test-sets", json={"name": "conc"})).status_code == 201
            seed = [{"id": f"old-{i}", "question": f"old {i}?"} for i in range(40)]
            r = await c.post("/api/v1/test-sets/conc/cases/import", json=seed)
            assert r.json()["case_count"] == 40
            adds = [
                c.post("/api/v1/test-sets/conc/cases", json={"id": f"new-{i}", "question": "n?"})
                for i in range(20)
            ]
            auto = [c.post("/api/v1/test-sets/conc/cases", json={"question": f"auto {i}?"}) for i in range(5)]
            edits = [
                c.put(f"/api/v1/test-sets/conc/cases/old-{i}", json={"question": f"edited {i}?"})
                for i in range(20)
            ]
            deletes = [c.delete(f"/api/v1/test-sets/conc/cases/old-{i}") for i in range(20, 40)]
            answers = await asyncio.gather(*adds, *auto, *edits, *deletes)
            assert [a.status_code for a in answers] == [201] * 25 + [200] * 20 + [204] * 20
            auto_ids = {a.json()["id"] for a in answers[20:25]}
            assert len(auto_ids) == 5
            got = {
                x["id"]: x["question"]
                for x in (await c.get("/api/v1/test-sets/conc/cases", params={"limit": 500})).json()["items"]
            }
            want = {f"new-{i}": "n?" for i in range(20)} | {f"old-{i}": f"edited {i}?" for i in range(20)}
            assert {k: v for k, v in got.items() if k not in auto_ids} == want
            assert len(got) == 45
            assert (await c.get("/api/v1/test-sets/conc")).json()["case_count"] == 45

    asyncio.run(go())


def test_the_case_limit_answers_422_too_many_cases_and_writes_nothing(portal: Portal) -> None:
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "limit"})
        rows = [{"id": f"c{i}", "question": "Q?"} for i in range(101)]
        r = c.post("/api/v1/test-sets/limit/cases/import", json=rows)
        assert r.status_code == 422
        assert r.json()["code"] == "too_many_cases"
        assert "101 cases, more than the limit of 100" in r.json()["detail"]
        assert c.get("/api/v1/test-sets/limit").json()["case_count"] == 0
        assert c.post("/api/v1/test-sets/limit/cases/import", json=rows[:100]).json()["case_count"] == 100
        r = c.post("/api/v1/test-sets/limit/cases", json={"id": "one-more", "question": "Q?"})
        assert (r.status_code, r.json()["code"]) == (422, "too_many_cases")
        r = c.put("/api/v1/test-sets/limit/cases/one-more", json={"question": "Q?"})
        assert (r.status_code, r.json()["code"]) == (422, "too_many_cases")
        assert c.put("/api/v1/test-sets/limit/cases/c0", json={"question": "edit ok"}).status_code == 200
        # replace mode counts the new set only
        r = c.post("/api/v1/test-sets/limit/cases/import", params={"mode": "replace"}, json=rows[:3])
        assert r.json()["case_count"] == 3


def _nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


def test_deep_json_is_refused_with_too_deep_at_the_api_and_in_imports(portal: Portal) -> None:
    too_deep = "too_deep: JSON nested deeper than 64 levels"
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "deep"})
        r = c.post("/api/v1/test-sets/deep/cases", json={"id": "ok", "question": "Q?", "m": _nested(63)})
        assert r.status_code == 201
        r = c.post("/api/v1/test-sets/deep/cases", json={"id": "no", "question": "Q?", "m": _nested(64)})
        assert (r.status_code, r.json()["code"], r.json()["detail"]) == (422, "too_deep", too_deep)
        r = c.put("/api/v1/test-sets/deep/cases/no", json={"question": "Q?", "m": _nested(500)})
        assert (r.status_code, r.json()["code"]) == (422, "too_deep")
        body = '{"id": "x", "question": "Q?", "m": ' + "[" * 50_000 + "]" * 50_000 + "}"
        r = c.post("/api/v1/test-sets/deep/cases", content=body, headers={"content-type": "application/json"})
        assert (r.status_code, r.json()["code"]) == (422, "too_deep")
        jsonl = (
            json.dumps({"id": "r1", "question": "Q?"})
            + "\n"
            + json.dumps({"id": "r2", "question": "Q?", "m": _nested(500)})
        )
        r = c.post(
            "/api/v1/test-sets/deep/cases/import",
            content=jsonl,
            headers={"content-type": "application/x-ndjson"},
        )
        assert r.status_code == 200
        assert r.json()["rejected"] == [{"line": 2, "reason": too_deep}]
        assert [x["id"] for x in r.json()["created"]] == ["r1"]
        r = c.post("/api/v1/evaluate", content=body, headers={"content-type": "application/json"})
        assert (r.status_code, r.json()["code"], r.json()["detail"]) == (422, "too_deep", too_deep)


def test_unicode_test_set_names_are_stored_nfc_and_runs_get_a_valid_id(portal: Portal) -> None:
    import re
    import unicodedata

    from ragpulse.runs.testsets import NAME_PATTERN

    with portal.client() as c:
        for name in ("人力资源知识库", "FAQ Übersicht", "Ünïcödé-2"):
            r = c.post("/api/v1/test-sets", json={"name": name})
            assert (r.status_code, r.json()["name"]) == (201, name)
            assert c.get(f"/api/v1/test-sets/{quote(name, safe='')}").json()["name"] == name
        nfd = unicodedata.normalize("NFD", "Café")
        assert c.post("/api/v1/test-sets", json={"name": nfd}).json()["name"] == "Café"
        for bad, why in {
            "a/b": "contains '/' or '\\'",
            "x\ny": "contains a control or format character",
            "x\u202ey": "contains a control or format character",
            "..": "is '.' or '..'",
            " lead": "starts or ends with a space",
            "长" * 129: "is longer than 128 characters",
        }.items():
            assert why in problem_detail(c.post("/api/v1/test-sets", json={"name": bad}), 422)
        c.post(
            "/api/v1/test-sets/人力资源知识库/cases", json={"id": "hr/leave-1", "question": "年假有几天？"}
        )
        r = c.post("/api/v1/runs", json={"test_set": "人力资源知识库"})
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]
        assert re.fullmatch(NAME_PATTERN, run_id)
        assert run_id.startswith("ts-")
        assert c.get(f"/api/v1/runs/{run_id}").json()["test_set"] == "人力资源知识库"


def test_copy_to_test_set_refuses_a_traversal_case_id_and_takes_a_slashed_one(portal: Portal) -> None:
    from datetime import UTC, datetime

    from portal_testutil import seed
    from ragpulse.model import Source, Trace, TraceOutcome, TraceResult

    tid = "trace/with/slashes"
    seed(
        portal.db_url,
        [
            TraceResult(
                trace=Trace(trace_id=tid, question="Q?", answer="A.", source=Source.OTLP),
                outcome=TraceOutcome.EVALUATED,
                judgements=(),
                received_at=datetime.now(UTC),
            )
        ],
    )
    with portal.client() as c:
        c.post("/api/v1/test-sets", json={"name": "copies"})
        url = f"/api/v1/traces/{quote(tid, safe='')}/copy-to-test-set"
        detail = problem_detail(c.post(url, json={"test_set": "copies", "case_id": "../copies2"}), 422)
        assert detail == "case id '../copies2' has a '.' or '..' path segment"
        r = c.post(url, json={"test_set": "copies", "case_id": "from/trace"})
        assert (r.status_code, r.json()["id"]) == (201, "from/trace")
        assert c.get(f"/api/v1/traces/{quote(tid, safe='')}").json()["trace_id"] == tid
