"""Text analysis, in one place for retrieval, the lexical index and the context engine.

* :mod:`~beeweave_core.text.segment` — scripts (the CJK ranges), word segmentation
  (jieba for Chinese), tokens and stopwords;
* :mod:`~beeweave_core.text.lexical` — what the SQLite FTS index stores and is asked;
* :mod:`~beeweave_core.text.lucene` — user text made safe inside a Lucene query;
* :mod:`~beeweave_core.text.language` — the English/Chinese rules for statements;
* :mod:`~beeweave_core.text.timehints` — the dates a question names.
"""
