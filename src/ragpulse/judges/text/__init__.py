"""Text processing of the heuristic judges: tokens (jieba for Chinese), sentences, lexical support, scripts."""
