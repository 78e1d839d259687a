"""``/api/v1``: judges, knowledge bases, test sets and their cases (thin adapters over
:mod:`ragpulse.runs.testsets`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ragpulse.portal.auth import get_ctx
from ragpulse.portal.context import PortalContext
from ragpulse.query import DEFAULT_LIMIT, Page
from ragpulse.runs import testsets as ts

__all__ = ["router"]

router = APIRouter()

Ctx = Annotated[PortalContext, Depends(get_ctx)]
Limit = Annotated[int, Query(ge=1, le=500, description="items per page")]
Cursor = Annotated[str | None, Query(description="next_cursor of the previous page")]
SetName = Annotated[str, Path(description="test-set name", max_length=128)]


class JudgeInfo(BaseModel):
    """A configured judge."""

    name: str
    version: str
    backend: str
    model: str | None = None
    threshold: float | None = None


class TestSetCreate(BaseModel):
    """A new (empty) test set; add cases with ``POST …/cases`` or ``…/cases/import``."""

    __test__ = False
    model_config = ConfigDict(extra="forbid")
    name: ts.TestSetName = Field(
        description="any Unicode text (stored NFC), ≤ 128 characters; no control characters, '/' or '\\'"
    )
    knowledge_base: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=2000)


class TestSetPatch(BaseModel):
    """Fields to change (only those present)."""

    __test__ = False
    model_config = ConfigDict(extra="forbid")
    knowledge_base: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=2000)


#: A case as a test-set file line: ``id``, ``question``, ``expected_answer``, ``keywords``,
#: ``reference_contexts``, ``answer``, ``contexts``, ``doc_ids``, ``context_labels``, other fields = metadata.
CaseBody = Annotated[
    dict[str, Any],
    Body(
        description="the fields of a test-set file line",
        examples=[{"id": "c1", "question": "How long is the warranty?", "expected_answer": "Two years."}],
    ),
]

_IMPORT_TYPES: dict[str, ts.ImportFormat] = {
    "application/json": "json",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/x-jsonlines": "jsonl",
    "application/jsonlines": "jsonl",
    "text/jsonl": "jsonl",
    "text/csv": "csv",
}


@router.get("/judges", summary="Configured judges")
async def list_judges(ctx: Ctx) -> Page[JudgeInfo]:
    items = [
        JudgeInfo(
            name=name,
            version=j.version,
            backend=str(getattr(j.backend, "value", j.backend)),
            model=getattr(j, "model", None),
            threshold=j.threshold,
        )
        for name, j in sorted(ctx.judges.items())
    ]
    return Page[JudgeInfo](items=items)


@router.get("/knowledge-bases", summary="Knowledge bases known from test sets")
async def list_knowledge_bases(ctx: Ctx) -> Page[ts.KnowledgeBase]:
    return Page[ts.KnowledgeBase](items=await ts.knowledge_bases(ctx.store))


@router.get("/test-sets", summary="Test sets, newest first")
async def list_test_sets(
    ctx: Ctx,
    knowledge_base: Annotated[str | None, Query()] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> Page[ts.TestSetInfo]:
    return await ts.list_test_sets(ctx.store, knowledge_base=knowledge_base, limit=limit, cursor=cursor)


@router.post("/test-sets", status_code=201, summary="Create a test set")
async def create_test_set(ctx: Ctx, body: TestSetCreate) -> ts.TestSetInfo:
    return await ts.create_test_set(
        ctx.store, body.name, knowledge_base=body.knowledge_base, description=body.description
    )


@router.get("/test-sets/{name}", summary="One test set (without cases)")
async def get_test_set(ctx: Ctx, name: SetName) -> ts.TestSetInfo:
    return await ts.get_test_set_info(ctx.store, name)


@router.patch("/test-sets/{name}", summary="Change a test set's knowledge base or description")
async def patch_test_set(ctx: Ctx, name: SetName, body: TestSetPatch) -> ts.TestSetInfo:
    return await ts.update_test_set(ctx.store, name, body.model_dump(exclude_unset=True))


@router.delete("/test-sets/{name}", status_code=204, summary="Delete a test set and its cases")
async def delete_test_set(ctx: Ctx, name: SetName) -> Response:
    await ts.delete_test_set(ctx.store, name)
    return Response(status_code=204)


@router.get("/test-sets/{name}/cases", summary="The cases of a test set, in order")
async def list_cases(
    ctx: Ctx, name: SetName, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> Page[dict[str, Any]]:
    return await ts.list_cases(ctx.store, name, limit=limit, cursor=cursor)


@router.post("/test-sets/{name}/cases", status_code=201, summary="Add a case")
async def add_case(ctx: Ctx, name: SetName, body: CaseBody) -> dict[str, Any]:
    return await ts.add_case(ctx.store, name, body, max_cases=ctx.options.max_test_set_cases)


@router.post(
    "/test-sets/{name}/cases/import",
    summary="Bulk import cases (JSON array, JSONL or CSV by Content-Type)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
                "application/x-ndjson": {"schema": {"type": "string"}},
                "text/csv": {"schema": {"type": "string"}},
            },
        }
    },
)
async def import_cases(
    ctx: Ctx,
    request: Request,
    name: SetName,
    mode: Annotated[Literal["append", "replace"], Query()] = "append",
) -> ts.ImportResult:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fmt = _IMPORT_TYPES.get(ctype)
    if fmt is None:
        raise HTTPException(
            415, f"Content-Type {ctype or '(none)'!r}: use application/json, application/x-ndjson or text/csv"
        )
    raw = await request.body()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise HTTPException(422, f"body is not UTF-8 (byte {e.start})") from e
    return await ts.import_cases(
        ctx.store, name, text, fmt, mode=mode, max_cases=ctx.options.max_test_set_cases
    )


@router.get("/test-sets/{name}/cases/{case_id:path}", summary="One case")
async def get_case(ctx: Ctx, name: SetName, case_id: str) -> dict[str, Any]:
    return await ts.get_case(ctx.store, name, case_id)


@router.put("/test-sets/{name}/cases/{case_id:path}", summary="Create or replace a case")
async def put_case(
    ctx: Ctx, name: SetName, case_id: str, body: CaseBody, response: Response
) -> dict[str, Any]:
    case, created = await ts.put_case(
        ctx.store, name, case_id, body, max_cases=ctx.options.max_test_set_cases
    )
    response.status_code = 201 if created else 200
    return case


@router.delete("/test-sets/{name}/cases/{case_id:path}", status_code=204, summary="Delete a case")
async def delete_case(ctx: Ctx, name: SetName, case_id: str) -> Response:
    await ts.delete_case(ctx.store, name, case_id)
    return Response(status_code=204)
