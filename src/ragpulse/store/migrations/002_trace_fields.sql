-- Typed trace fields that used to travel as attributes keys (or did not exist): what the producer said about
-- the trace (not evaluable, error; time_replaced is migration 111), the ground truth a replayed case carried, and which span of
-- an OTLP trace supplied the answer.
ALTER TABLE traces
    -- the producer's reason why no judge may score the trace (e.g. 'rag_endpoint_failed: …', 'ambiguous_answer')
    ADD COLUMN not_evaluable      text,
    -- ["…"]: ground-truth contexts ('sha256:<hex>' each when redacted)
    ADD COLUMN reference_contexts jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- [true, false, …]: relevance label per retrieved (or labelled) chunk; NULL = not labelled
    ADD COLUMN context_labels     jsonb,
    -- ["…"] / ["id", …]: the chunks the labels belong to, when they differ from the retrieved ones
    ADD COLUMN labelled_contexts  jsonb,
    ADD COLUMN labelled_doc_ids   jsonb,
    -- the OTLP span that supplied answer and context, and the LLM spans that could have
    ADD COLUMN answer_span_id     text,
    ADD COLUMN answer_candidates  jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- trace-level error reported by the source (e.g. OTLP root span status ERROR)
    ADD COLUMN error              text;

-- Rows written before this migration kept these in attributes: move them into the columns.
UPDATE traces SET
    not_evaluable = COALESCE(not_evaluable, attributes ->> 'ragpulse.not_evaluable'),
    reference_contexts = CASE WHEN jsonb_typeof(attributes -> 'reference_contexts') = 'array'
                              THEN attributes -> 'reference_contexts' ELSE reference_contexts END,
    context_labels = CASE WHEN jsonb_typeof(attributes -> 'context_labels') = 'array'
                          THEN attributes -> 'context_labels' ELSE context_labels END,
    labelled_contexts = CASE WHEN jsonb_typeof(attributes -> 'labelled_contexts') = 'array'
                             THEN attributes -> 'labelled_contexts' ELSE labelled_contexts END,
    labelled_doc_ids = CASE WHEN jsonb_typeof(attributes -> 'labelled_doc_ids') = 'array'
                            THEN attributes -> 'labelled_doc_ids' ELSE labelled_doc_ids END,
    attributes = attributes - 'ragpulse.not_evaluable' - 'reference_contexts' - 'context_labels'
                 - 'labelled_contexts' - 'labelled_doc_ids'
WHERE attributes ?| ARRAY['ragpulse.not_evaluable', 'reference_contexts', 'context_labels',
                         'labelled_contexts', 'labelled_doc_ids'];
