"""Long-term items (LangGraph ``BaseStore`` data) kept as memory events; see ``base.py``."""

from .base import ItemIndex, ItemRow, ItemStore, matches, namespace_matches, open_item_index

__all__ = ["ItemIndex", "ItemRow", "ItemStore", "matches", "namespace_matches", "open_item_index"]
