"""Context: token-budgeted layered assembly, compaction that keeps every fact, and
long-term memory.

``weave.context`` is a :class:`ContextEngine`; ``weave.assemble(session_id, query,
budget_tokens=...)`` returns an :class:`AssembledContext` (messages as role/content
dicts, tokens per layer, provenance of every piece).
"""

from .assembler import PRESETS, AssembledContext, LayerReport, LayerShares, Piece, infer_phase
from .compactor import CompactionPolicy, CompactionReport, Compactor
from .editing import Editor, EditPolicy, cut_tool_output
from .engine import ContextEngine
from .memory import HALF_LIFE_DAYS, KINDS, MemoryWriter, decay
from .messages import Unit, record_messages, split_units
from .summarizers import ExtractiveSummarizer, LLMSummarizer, Summarizer
from .working_state import WorkingState, build_working_state

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
