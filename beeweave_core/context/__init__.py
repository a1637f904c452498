"""Context: token-budgeted layered assembly, compaction that keeps every fact, and
long-term memory.

``weave.context`` is a :class:`ContextEngine`; ``weave.assemble(session_id, query,
budget_tokens=...)`` returns an :class:`AssembledContext` (messages as role/content
dicts, tokens per layer, provenance of every piece).
"""

from beeweave_core.context.assembler import (
    PRESETS,
    AssembledContext,
    LayerReport,
    LayerShares,
    Piece,
    infer_phase,
)
from beeweave_core.context.compactor import CompactionPolicy, CompactionReport, Compactor
from beeweave_core.context.editing import Editor, EditPolicy, cut_tool_output
from beeweave_core.context.engine import ContextEngine
from beeweave_core.context.messages import Unit, split_units
from beeweave_core.context.summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from beeweave_core.context.working_state import WorkingState, build_working_state
from beeweave_core.memory.kinds import KINDS, decay
from beeweave_core.memory.writer import MemoryWriter
from beeweave_core.ranking import HALF_LIFE_DAYS
from beeweave_core.transcript import record_messages

__all__ = [
    "HALF_LIFE_DAYS",
    "KINDS",
    "PRESETS",
    "AssembledContext",
    "CompactionPolicy",
    "CompactionReport",
    "Compactor",
    "ContextEngine",
    "EditPolicy",
    "Editor",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "LayerReport",
    "LayerShares",
    "MemoryWriter",
    "Piece",
    "Summarizer",
    "Unit",
    "WorkingState",
    "build_working_state",
    "cut_tool_output",
    "decay",
    "infer_phase",
    "record_messages",
    "split_units",
]
